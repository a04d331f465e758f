//! The runtime's integration tests, one binary so the workspace links one
//! test executable for them instead of eight.
//!
//! **Why it takes about 8 s warm:** the informer scenarios run in real time
//! over loopback: an API server that restarts empty, or a resource that
//! disappears and returns, takes a few seconds to notice and list again.
#![allow(
    clippy::too_many_lines,
    reason = "a scenario test reads best top to bottom, in one function"
)]

mod constructors;
mod controller;
#[path = "../fixtures/mod.rs"]
mod fixtures;
mod generic_reconciler;
mod informer;
mod metrics;
mod statefulset;
mod status_processing;
mod tracker;
mod workqueue;
