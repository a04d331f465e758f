//! The webhook's integration tests, one binary (linking is most of a test
//! step on two cores): its admission controllers on the sample kinds, the
//! webhook in-process behind HTTPS, and the `webhook` binary end to end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod admission;
mod e2e;
mod https;
