//! The generator's integration tests, one binary (linking is most of a test
//! step on two cores): error messages, golden output, files written, the
//! k8s-openapi paths it knows, and the sample app's scripts run on copies of
//! it (`copies`), which share this workspace's build.
//!
//! **Why it takes about 42 s warm:** the copy checks run one at a time, each
//! building its copy's own crates (`apis` … `cmd/*`) and running their tests;
//! `new_kind` (about 17 s) also starts the copy's local job for the
//! tutorial's step 5. The rest takes well under a second.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod copies;

mod errors;
mod golden;
mod hack_scripts;
mod k8s_openapi_paths;
mod new_kind;
mod write;
