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
//! | `/health`, `/readiness` | 200, or 500 once shutting down |
//!
//! Which kinds are defaulted and validated comes from the generated registry
//! (`generated::registry::custom_kinds()`): a kind is listed with a hook when
//! its API module implements the trait.
//!
//! The reconcilers keep the Secret `webhook-certs` (a CA and a serving
//! certificate, renewed a day before they expire) and the three webhook
//! configurations (rules, `caBundle`, Service path) current. The server reads
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

pub mod admission;
pub mod certificates;
pub mod configurations;
pub mod metrics;
pub mod server;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Secret;
use kinject_runtime::apis::registry::CustomKind;
use kinject_runtime::controller::{ControllerOptions, WorkqueueMetrics};
use kinject_runtime::injection::{Constructor, Context};
use kinject_runtime::reconciler::ThreadsPerController;
use kinject_sharedmain::{Env, Flags, MainError, Setup};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use admission::{ConfigValidation, Defaulting, Validation};
use certificates::{CertificatesOptions, Clock};
use configurations::{Home, WebhookSpec, config_map_rules, kind_rules};
use server::{Routes, SecretCertResolver};

/// The path of the defaulting admission controller.
pub const DEFAULTING_PATH: &str = "/defaulting";
/// The path of the resource validation admission controller.
pub const VALIDATION_PATH: &str = "/resource-validation";
/// The path of the ConfigMap validation admission controller.
pub const CONFIG_VALIDATION_PATH: &str = "/config-validation";

/// The flags of a webhook process: the controller's, and where to listen.
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Serves admission webhooks (defaulting, validation, ConfigMap validation) over TLS.",
    after_help = kinject_sharedmain::ENVIRONMENT_HELP
)]
pub struct WebhookFlags {
    /// The controller flags.
    #[command(flatten)]
    pub common: Flags,
    /// The HTTPS port admission reviews arrive on (the `webhook` Service's
    /// targetPort).
    #[arg(long, env = "WEBHOOK_PORT", default_value_t = 8443)]
    pub port: u16,
    /// After SIGTERM, how long to keep answering reviews (with /readiness
    /// failing) before closing the port, so the API server stops calling this
    /// replica first; Go duration syntax. Knative's default is 45s.
    #[arg(long, default_value = "45s", value_parser = parse_duration)]
    pub drain_period: Duration,
    /// Leave the webhook configurations without the system namespace as
    /// their owner (Knative's variable of the same name; any value turns it
    /// on).
    #[arg(long, env = "WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP", value_parser = any_value_is_true, default_value = "false")]
    pub disable_namespace_ownership: bool,
}

/// Knative checks `WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP` for presence, so any
/// value but an explicit false (the flag's default) turns it on.
fn any_value_is_true(text: &str) -> Result<bool, String> {
    Ok(!matches!(text.trim(), "" | "false"))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    kinject_runtime::duration::parse_go_duration(text)
        .map_err(|e| format!("{e}; write a Go duration such as 45s or 0s"))
        .and_then(|nanos| {
            u64::try_from(nanos)
                .map(Duration::from_nanos)
                .map_err(|_| "must not be negative".to_owned())
        })
}

/// Names and settings of the webhook (Knative's `webhook.Options`).
#[derive(Clone)]
pub struct Options {
    /// The Service the API server calls (`webhook`).
    pub service_name: String,
    /// The Secret holding the certificates (`webhook-certs`).
    pub secret_name: String,
    /// See [`WebhookFlags::drain_period`].
    pub drain: Duration,
    /// What time it is, for certificate expiry.
    pub clock: Clock,
    /// Whether the system namespace owns the webhook configurations; see
    /// [`WebhookFlags::disable_namespace_ownership`].
    pub namespace_owns_configurations: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            service_name: "webhook".to_owned(),
            secret_name: "webhook-certs".to_owned(),
            drain: Duration::from_secs(45),
            clock: certificates::system_clock(),
            namespace_owns_configurations: true,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("service_name", &self.service_name)
            .field("secret_name", &self.secret_name)
            .field("drain", &self.drain)
            .finish_non_exhaustive()
    }
}

/// The webhook of one system namespace: its admission controllers and the
/// names of its configurations.
#[derive(Debug, Clone)]
pub struct Webhook {
    namespace: String,
    options: Options,
    defaulting: Defaulting,
    validation: Validation,
    config: ConfigValidation,
}

impl Webhook {
    /// Defaults and validates the kinds of `kinds` that have the hooks, and
    /// checks ConfigMaps with `config`; its Secret, leases and Service live in
    /// `namespace` (`SYSTEM_NAMESPACE`).
    pub fn new(namespace: &str, kinds: Vec<CustomKind>, config: ConfigValidation, options: Options) -> Self {
        Webhook {
            namespace: namespace.to_owned(),
            options,
            defaulting: Defaulting::new(kinds.clone()),
            validation: Validation::new(kinds),
            config,
        }
    }

    /// `defaulting.webhook.<ns>.knative.dev`: the MutatingWebhookConfiguration.
    pub fn defaulting_name(&self) -> String {
        format!("defaulting.webhook.{}.knative.dev", self.namespace)
    }

    /// `validation.webhook.<ns>.knative.dev`: the resource ValidatingWebhookConfiguration.
    pub fn validation_name(&self) -> String {
        format!("validation.webhook.{}.knative.dev", self.namespace)
    }

    /// `config.webhook.<ns>.knative.dev`: the ConfigMap ValidatingWebhookConfiguration.
    pub fn config_name(&self) -> String {
        format!("config.webhook.{}.knative.dev", self.namespace)
    }

    /// The admission controllers by path.
    pub fn routes(&self) -> Routes {
        Routes::new()
            .route(DEFAULTING_PATH, Arc::new(self.defaulting.clone()))
            .route(VALIDATION_PATH, Arc::new(self.validation.clone()))
            .route(CONFIG_VALIDATION_PATH, Arc::new(self.config.clone()))
    }

    /// The reconcilers (certificates, then the three configurations) as
    /// constructors, for `Setup::construct` (which leaves out those
    /// `--disable-controllers` names, before they ask for any informer). Each
    /// watches Secrets only in the system namespace.
    pub fn constructors(&self) -> Vec<Constructor> {
        let home = Home {
            namespace: self.namespace.clone(),
            secret: self.options.secret_name.clone(),
            namespace_owns_configurations: self.options.namespace_owns_configurations,
        };
        let certificates = CertificatesOptions {
            service: self.options.service_name.clone(),
            secret: home.secret.clone(),
            namespace: home.namespace.clone(),
            clock: self.options.clock.clone(),
        };
        let defaulting = WebhookSpec {
            name: self.defaulting_name(),
            path: DEFAULTING_PATH.to_owned(),
            rules: kind_rules(&self.defaulting.kinds(), &["CREATE", "UPDATE"]),
            exclude_label: true,
        };
        let validation = WebhookSpec {
            name: self.validation_name(),
            path: VALIDATION_PATH.to_owned(),
            rules: kind_rules(&self.validation.kinds(), &["CREATE", "UPDATE", "DELETE"]),
            exclude_label: true,
        };
        let config = WebhookSpec {
            name: self.config_name(),
            path: CONFIG_VALIDATION_PATH.to_owned(),
            rules: config_map_rules(),
            exclude_label: false,
        };
        let (home_d, home_v, home_c) = (home.clone(), home.clone(), home);
        vec![
            Constructor::new(certificates::QUEUE, move |ctx| {
                certificates::new_controller(ctx, certificates.clone())
            }),
            Constructor::new("defaultingwebhook", move |ctx| {
                configurations::mutating_controller(ctx, "defaultingwebhook", defaulting.clone(), &home_d)
            }),
            Constructor::new("validationwebhook", move |ctx| {
                configurations::validating_controller(ctx, "validationwebhook", validation.clone(), &home_v)
            }),
            Constructor::new("configmapwebhook", move |ctx| {
                configurations::validating_controller(ctx, "configmapwebhook", config.clone(), &home_c)
            }),
        ]
    }

    /// The certificate resolver over the informer of the certificates
    /// Secret alone, derived from `ctx`.
    pub fn resolver(&self, ctx: &Context) -> Arc<SecretCertResolver> {
        Arc::new(SecretCertResolver::new(
            ctx.in_namespace(self.namespace.clone())
                .named_informer::<Secret>(&self.options.secret_name)
                .lister(),
            &self.namespace,
            &self.options.secret_name,
        ))
    }

    /// Serves the admission controllers over TLS on `listener` until
    /// `shutdown` (then drains and stops; see [`server::serve`]). The
    /// certificate comes from `ctx`'s Secret informer, which must be started
    /// (`Setup::run` starts it).
    pub async fn serve(
        &self,
        ctx: &Context,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> Result<(), MainError> {
        let tls = server::tls_config(self.resolver(ctx))
            .map_err(|e| MainError::Serve(format!("cannot configure TLS: {e}")))?;
        let mut routes = self.routes();
        if let Some(metrics) = ctx.get::<metrics::AdmissionMetrics>() {
            routes = routes.metrics((*metrics).clone());
        }
        server::serve(listener, Arc::new(tls), routes, self.options.drain, shutdown).await;
        Ok(())
    }
}

/// Workers and metrics for a webhook reconciler, from the context.
pub(crate) fn controller_options(ctx: &Context) -> ControllerOptions {
    let mut options =
        ControllerOptions::default().concurrency(ctx.get::<ThreadsPerController>().map_or(0, |t| t.0));
    if let Some(metrics) = ctx.get::<WorkqueueMetrics>() {
        options = options.metrics((*metrics).clone());
    }
    options
}

/// Runs the webhook `component` for `kinds` until a signal; the exit code to
/// return from `main`. Reads the flags ([`WebhookFlags`]) and the environment
/// as the controller does (`SYSTEM_NAMESPACE` is required); every failure
/// before it serves exits 1 saying what failed and how to fix it.
pub fn main(component: &str, kinds: Vec<CustomKind>) -> ExitCode {
    let flags = WebhookFlags::parse();
    kinject_sharedmain::process(component, |env, shutdown| async move {
        let listener = bind(&flags).await?;
        run(component, kinds, flags, env, listener, shutdown).await
    })
}

/// Listens where the flags say (`--bind-address`, `--port`).
pub async fn bind(flags: &WebhookFlags) -> Result<TcpListener, MainError> {
    let address = SocketAddr::from((flags.common.bind_address, flags.port));
    let cannot = |e: std::io::Error| {
        MainError::Serve(format!(
            "cannot listen on {address}: {e}; free the port or choose another (--port, WEBHOOK_PORT), \
             or another address (--bind-address)"
        ))
    };
    match TcpListener::bind(address).await {
        Ok(listener) => Ok(listener),
        // Hosts without IPv6 still get every interface on IPv4.
        Err(_) if flags.common.bind_address == std::net::IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED) => {
            TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], flags.port)))
                .await
                .map_err(cannot)
        }
        Err(e) => Err(cannot(e)),
    }
}

/// The webhook process once flags and environment are read: the sharedmain
/// phases (`Setup::read`, the process's context, the four reconcilers, which
/// watch only `SYSTEM_NAMESPACE`, `Setup::run`) with the HTTPS server on
/// `listener` beside them, until `shutdown`; returns once both have stopped.
pub async fn run(
    component: &str,
    kinds: Vec<CustomKind>,
    flags: WebhookFlags,
    env: Env,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), MainError> {
    let names = [
        ("config-logging", env.config_logging_name.clone()),
        ("config-leader-election", env.config_leader_election_name.clone()),
        ("config-observability", env.config_observability_name.clone()),
    ];
    let config = ConfigValidation::sharedmain(|default| {
        names
            .iter()
            .find(|(d, _)| *d == default)
            .map_or_else(|| default.to_owned(), |(_, name)| name.clone())
    });
    let options = Options {
        drain: flags.drain_period,
        namespace_owns_configurations: !flags.disable_namespace_ownership,
        ..Options::default()
    };
    let webhook = Webhook::new(&env.system_namespace, kinds, config, options);
    let constructors = webhook.constructors();
    let mut setup = Setup::read(component, &constructors, flags.common, env).await?;
    let span = setup.component_span();
    async {
        let admission = metrics::AdmissionMetrics::register(setup.registry_mut());
        let ctx = setup.context();
        ctx.insert(admission);
        let controllers = setup.construct(&ctx, &constructors)?;
        tracing::info!(
            address = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            "Serving admission webhooks over TLS"
        );
        // A failed run must not leave the server waiting for a signal.
        let stop_server = shutdown.child_token();
        let run = async {
            let ran = setup.run(&ctx, controllers, shutdown.clone()).await;
            stop_server.cancel();
            ran
        };
        let (served, ran) = tokio::join!(webhook.serve(&ctx, listener, stop_server.clone()), run);
        ran.and(served)
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_the_environment_and_the_webhooks_variables() {
        use clap::CommandFactory;
        let help = WebhookFlags::command().render_long_help().to_string();
        for name in [
            "SYSTEM_NAMESPACE",
            "K_THREADS_PER_CONTROLLER",
            "WEBHOOK_PORT",
            "KUBECONFIG",
        ] {
            assert!(help.contains(name), "{name}:\n{help}");
        }
    }

    /// A context whose client is never called: building controllers sends
    /// no request.
    fn offline_context() -> Context {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
        });
        Context::builder(kube::Client::new(service, "default"))
            .cluster_domain("cluster.local")
            .build()
    }

    fn webhook() -> Webhook {
        Webhook::new(
            "system",
            Vec::new(),
            ConfigValidation::sharedmain(str::to_owned),
            Options::default(),
        )
    }

    #[test]
    fn the_reconcilers_are_named_for_disable_controllers() {
        let names: Vec<&str> = webhook().constructors().iter().map(Constructor::name).collect();
        assert_eq!(
            names,
            [
                "webhookcertificates",
                "defaultingwebhook",
                "validationwebhook",
                "configmapwebhook"
            ]
        );
    }

    #[tokio::test]
    async fn a_disabled_reconciler_asks_for_no_informer() {
        let ctx = offline_context();
        let built =
            kinject_sharedmain::construct(&ctx, &webhook().constructors(), &["defaultingwebhook".to_owned()])
                .unwrap();
        assert_eq!(built.len(), 3);
        let informers = ctx.informer_descriptions();
        assert!(
            !informers
                .iter()
                .any(|i| i.contains("MutatingWebhookConfiguration")),
            "{informers:?}"
        );
        assert!(
            informers
                .iter()
                .any(|i| i.contains("ValidatingWebhookConfiguration")),
            "{informers:?}"
        );
    }

    #[tokio::test]
    async fn only_the_certificates_secret_is_watched() {
        let ctx = offline_context();
        kinject_sharedmain::construct(&ctx, &webhook().constructors(), &[]).unwrap();
        let secrets: Vec<String> = ctx
            .informer_descriptions()
            .into_iter()
            .filter(|i| i.starts_with("Secret"))
            .collect();
        assert_eq!(secrets.len(), 1, "{secrets:?}");
        assert!(secrets[0].contains("system"), "{secrets:?}");
        assert!(secrets[0].contains(&webhook().options.secret_name), "{secrets:?}");
        let rules = ctx.permissions().rules(Some("system"));
        let secret_rules: Vec<_> = rules
            .iter()
            .filter(|r| r.resources.as_deref() == Some(&["secrets".to_owned()][..]))
            .collect();
        assert!(
            secret_rules.iter().all(|r| r.resource_names.is_some()),
            "every Secret rule names its Secret: {secret_rules:?}"
        );
    }
}
