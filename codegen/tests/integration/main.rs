//! The generator's integration tests, one binary (linking is most of a test
//! step on two cores): error messages, golden output, files written, the
//! k8s-openapi paths it knows, and the sample app's scripts run on copies of
//! it (`copies`), which share this workspace's build.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod copies;

mod errors;
mod golden;
mod hack_scripts;
mod k8s_openapi_paths;
mod new_kind;
mod write;
