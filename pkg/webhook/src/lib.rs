//! Knative's admission webhook for kinject kinds (`knative.dev/pkg/webhook`):
//! one HTTPS server with three admission controllers and four
//! leader-elected reconcilers.
//!
//! **Where it stands.** The top of the framework: a process of its own, built
//! on `kinject-sharedmain` (flags, environment, the one injection context,
//! leader election, probes) and `kinject-runtime` (its reconcilers), with
//! rustls and rcgen for TLS and certificates. It never depends on an
//! application's crates: the kinds it defaults and validates are handed to
//! it as the application's generated registry.
//!
//! | path | what it does |
//! |---|---|
//! | `/defaulting` | decodes the object (unknown fields refused), runs `Defaultable::set_defaults`, answers a JSON patch |
//! | `/resource-validation` | runs `Validatable::validate`: `validation failed: missing field(s): spec.serviceName` |
//! | `/config-validation` | checks `config-logging`, `config-leader-election`, `config-observability` with the process's own parsers |
//! | `/resource-conversion` | converts the objects of a `ConversionReview` through their kind's hub (see [`conversion`]) |
//! | `/health`, `/readiness` | 200, or 500 once shutting down |
//!
//! Which kinds are defaulted and validated comes from the generated registry
//! (`generated::registry::custom_kinds()`): a kind is listed with a hook when
//! its API module implements the trait.
//!
//! The reconcilers keep the Secret `webhook-certs` (a CA and a serving
//! certificate, renewed a day before they expire), the three webhook
//! configurations (rules, `caBundle`, Service path) and the conversion of
//! the CRDs of kinds with a hub ([`crds`]) current. The server reads
//! the certificate from the Secret on every handshake.
//!
//! A `main` is one call (see `cmd/webhook`):
//!
//! ```no_run
//! # mod generated { pub mod registry { pub fn custom_kinds() -> Vec<kinject_runtime::apis::registry::CustomKind> { Vec::new() } } }
//! fn main() -> std::process::ExitCode {
//!     kinject_webhook::main("webhook", generated::registry::custom_kinds())
//! }
//! ```
//!
//! [`run`] is the same once flags and environment are read, for a process
//! (or a test) that runs the webhook in-process. Its parts, without a
//! cluster: the admission controllers by path, and the reconcilers as
//! constructors, which `--disable-controllers` names:
//!
//! ```
//! use kinject_webhook::admission::ConfigValidation;
//! use kinject_webhook::{Options, Webhook};
//!
//! let webhook = Webhook::new(
//!     "knative-samples",
//!     Vec::new(), // the application's `generated::registry::custom_kinds()`
//!     ConfigValidation::sharedmain(str::to_owned),
//!     Options::default(),
//! );
//! assert_eq!(webhook.validation_name(), "validation.webhook.knative-samples.knative.dev");
//! let names: Vec<&str> = webhook.constructors().iter().map(|c| c.name()).collect();
//! assert_eq!(names, ["webhookcertificates", "defaultingwebhook", "validationwebhook", "configmapwebhook"]);
//! ```
#![warn(missing_docs)]

pub mod admission;
mod bodies;
pub mod certificates;
pub mod configurations;
mod controller_options;
pub mod conversion;
pub mod crds;
mod flags;
pub mod metrics;
mod process;
pub mod server;
mod webhook;

pub use flags::WebhookFlags;
pub use process::{bind, main, run};
pub use webhook::{CONFIG_VALIDATION_PATH, DEFAULTING_PATH, Options, VALIDATION_PATH, Webhook};
