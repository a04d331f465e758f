//! testenv's integration tests, one binary: each module drives the server
//! through a real client (kube's, kubectl, the `testenv serve` binary). One
//! binary links the server and kube once, where a binary per file linked
//! them eleven times.
//!
//! **Why it takes about 12 s warm:** the kubectl module runs the real kubectl
//! (a process, its discovery and OpenAPI reads) for each command, about 8 s
//! for the generators' test alone; a watch from a future revision waits 3 s
//! for it, as kube-apiserver does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod admission;
mod binary;
mod builtins;
mod cel;
mod conversion;
mod impersonation;
mod kubectl;
mod kubectl_auth;
mod memory;
mod openapi;
mod parity;
mod printing;
mod proto_generated;
mod reviews;
mod semantics;
mod tokens;
mod validation;
mod watch;
