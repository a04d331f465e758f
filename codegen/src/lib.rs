//! The generator: reads annotated API types and emits the typed layer
//! (clients, listers, informers, injection accessors and reconciler traits) as
//! thin glue over `kinject-runtime`.
//!
//! # Where it stands
//!
//! This is the generation-time end of kinject's code generation, above
//! [`model`] (`kinject-model`, the one parser of marker attributes, which the
//! `kinject-macros` derive uses too, so both agree on what a marker means).
//! It depends on the model, `syn`, `quote` and `proc-macro2` to read and
//! write Rust, `prettyplease` to format it, `toml` and `serde` for the
//! config, `thiserror`, and `clap` for the binary only (feature `cli`). It
//! never depends on the runtime or on Kubernetes crates: the code it writes
//! does.
//!
//! The pipeline is parse → model → emit → format → write:
//! [`config`] names the inputs, the scanner reads every `#[derive(Kind)]`
//! struct through [`model`] into a plan per kind, the emitter turns each kind
//! into one module, prettyplease formats it, and only files whose bytes
//! changed are written, all or none (see [`Generated::write`]).
//! [`scaffold`] starts a new kind's hand-written files.
//!
//! Three ways to run it:
//!
//! * `hack/update-codegen.sh` (or `cargo run -p kinject-codegen`) regenerates the
//!   checked-in `generated/` crate from `codegen.toml`; `--verify` only checks.
//! * [`generate`] and [`Generated`] do the same from a program.
//! * [`Builder`] generates into `OUT_DIR` from a `build.rs`, as
//!   `codegen/tests/buildrs-fixture` does:
//!
//! ```no_run
//! // build.rs of a crate beside the API crate `apis`
//! fn main() -> Result<(), kinject_codegen::Error> {
//!     kinject_codegen::Builder::new()
//!         .api("apis", "apis::v1alpha1", "../apis/src/v1alpha1")
//!         .generate()
//! }
//! // src/lib.rs: pub mod generated { include!(concat!(env!("OUT_DIR"), "/codegen.rs")); }
//! ```
#![warn(missing_docs)]
mod builder;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
mod emit;
mod error;
pub use kinject_model as model;
mod output;
pub mod scaffold;
mod scan;
mod stage;

pub use builder::Builder;
pub use config::{ApiModule, Config, ExternalKind, ScaffoldPaths};
pub use emit::{HEADER, Layout};
pub use error::{Diagnostic, Error};
pub use output::{Generated, Stale, WriteReport, generate};
/// All-or-nothing writes of several files (see the `stage` module), for
/// tools that write a tree of their own, as `kinject init` does.
pub use stage::write_all;
