//! `sharedmain`: the `main` of a controller process (Knative's
//! `injection/sharedmain`).
//!
//! **Where it stands.** The process layer of the framework, above
//! `kinject-runtime`: flags, environment, kubeconfig, logging, the
//! configuration ConfigMaps, leader election, metrics and probes, signals.
//! It depends on `kinject-runtime` and the crates a process needs (clap,
//! tracing-subscriber, axum, prometheus-client), never on an application's
//! crates; `kinject-webhook` and every application's `cmd/*` build on it.
//! This is the one place that reads the process's environment ([`Env`]) and
//! builds its injection [`Context`] ([`Setup::context`]).
//!
//! ```no_run
//! # mod reconcilers { pub fn controllers() -> Vec<kinject_runtime::injection::Constructor> { Vec::new() } }
//! fn main() -> std::process::ExitCode {
//!     // `reconcilers` declares its modules with `kinject_runtime::controllers!`,
//!     // which lists one constructor per module.
//!     kinject_sharedmain::main("controller", reconcilers::controllers())
//! }
//! ```
//!
//! [`run`] is the same once flags and environment are read; here against the
//! in-memory API server, with no controllers, stopped at once:
//!
//! ```
//! use clap::Parser;
//! use kinject_sharedmain::{Env, Flags};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = kinject_testenv::TestEnv::builder().namespace("knative-samples").build();
//! let server = cluster.serve().await?;
//! let kubeconfig = std::env::temp_dir().join(format!("sharedmain-doc-{}.kubeconfig", std::process::id()));
//! server.write_kubeconfig(&kubeconfig)?;
//! let flags = Flags::try_parse_from([
//!     "controller", "--kubeconfig", &kubeconfig.to_string_lossy(), "--disable-ha", "--bind-address", "127.0.0.1",
//! ])?;
//! let env = Env::from_lookup(|name| match name {
//!     "SYSTEM_NAMESPACE" => Some("knative-samples".to_owned()),
//!     "METRICS_PROMETHEUS_PORT" | "PROBES_PORT" => Some("0".to_owned()),
//!     _ => None,
//! })?;
//! let shutdown = CancellationToken::new();
//! shutdown.cancel();
//! kinject_sharedmain::run("controller", &[], flags, env, shutdown).await?;
//! # std::fs::remove_file(&kubeconfig)?;
//! # Ok(()) }
//! ```
//!
//! A single constructor can be named with [`controller!`] instead:
//! `main("controller", [controller!(addressableservice::new_controller)])`.
//!
//! In order, [`main`]:
//! 1. reads flags (`--kubeconfig`, `--server`, `--context`, `--kube-api-qps`,
//!    `--kube-api-burst`, `--disable-ha`, `--disable-controllers`,
//!    `--resync-period`) and the
//!    environment (`SYSTEM_NAMESPACE` is required; see [`Env`]);
//! 2. builds the kube client from the kubeconfig (or the in-cluster config) with
//!    client-side QPS/burst limiting (0 means 5× and 10× the number of
//!    controllers, as Knative) and request metrics;
//! 3. reads `config-logging` (JSON logs at its level, changed live),
//!    `config-leader-election` and `config-observability` from
//!    `SYSTEM_NAMESPACE`; a missing ConfigMap means the defaults, a malformed
//!    one stops the process with the reason;
//! 4. calls each constructor that `--disable-controllers` does not name with
//!    the injection [`Context`]; constructors ask for informers and return
//!    their [`Impl`];
//! 5. serves `/metrics` (port 9090, `METRICS_PROMETHEUS_PORT`) and `/health`
//!    and `/readiness` (port 8080, `PROBES_PORT`; readiness answers 500 naming
//!    the informers not in sync), starts exactly the informers the
//!    controllers asked for and waits for their caches;
//! 6. runs the controllers, each with leader election over Leases; in a
//!    StatefulSet pod (`STATEFUL_CONTROLLER_ORDINAL`), owning the bucket of
//!    its ordinal without Leases; or leading everything with `--disable-ha`;
//! 7. on SIGTERM or SIGINT turns readiness to 500, stops taking work, lets
//!    in-flight reconciles finish, releases its leases and exits 0; a second
//!    signal exits at once (status 1).
//!
//! Steps 1–3 are [`Setup::read`], then [`Setup::context`], step 4
//! [`Setup::construct`] and steps 5–7 [`Setup::run`], for a `main` that needs
//! its own steps in between; [`run`] chains them.
//!
//! Every failure before the controllers run exits 1 with a message that says
//! what failed, where, and how to fix it.
//!
//! [`Context`]: kinject_runtime::injection::Context
//! [`Impl`]: kinject_runtime::controller::Impl
#![warn(missing_docs)]

mod client;
pub mod client_layers;
mod config_maps;
mod controllers;
mod env;
mod error;
mod flags;
pub mod logging;
mod process;
mod process_metrics;
pub mod rbac;
mod run_loop;
mod servers;
mod setup;
mod signals;

pub use kinject_runtime::injection::Constructor;

pub use client::kube_config;
pub use config_maps::{
    CONFIG_MAPS, check_config_map, leader_election_config, logging_config, metrics_enabled,
};
pub use controllers::{Built, construct};
pub use env::{ENVIRONMENT_HELP, Env};
pub use error::MainError;
pub use flags::Flags;
pub use process::{main, process, run};
pub use setup::Setup;
pub use signals::handle_signals;
