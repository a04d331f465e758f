//! testenv's integration tests, one binary: each module drives the server
//! through a real client (kube's, kubectl, the `testenv serve` binary). One
//! binary links the server and kube once, where a binary per file linked
//! them eleven times.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod admission;
mod binary;
mod builtins;
mod kubectl;
mod openapi;
mod parity;
mod printing;
mod proto_generated;
mod semantics;
mod validation;
mod watch;
