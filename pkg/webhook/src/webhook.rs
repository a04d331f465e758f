//! The webhook of one system namespace: its admission controllers by path
//! and the reconcilers that keep its certificates and configurations.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kinject_runtime::apis::registry::CustomKind;
use kinject_runtime::injection::{Constructor, Context};
use kinject_sharedmain::MainError;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::admission::{ConfigValidation, Defaulting, Validation};
use crate::certificates::{self, CertificatesOptions, Clock};
use crate::configurations::{self, Home, WebhookSpec, config_map_rules, kind_rules};
use crate::conversion::{CONVERSION_PATH, Conversion, ConversionMetrics};
use crate::crds;
use crate::metrics;
use crate::server::{self, Routes, SecretCertResolver};

/// The path of the defaulting admission controller.
pub const DEFAULTING_PATH: &str = "/defaulting";
/// The path of the resource validation admission controller.
pub const VALIDATION_PATH: &str = "/resource-validation";
/// The path of the ConfigMap validation admission controller.
pub const CONFIG_VALIDATION_PATH: &str = "/config-validation";

/// Names and settings of the webhook (Knative's `webhook.Options`).
#[derive(Clone)]
pub struct Options {
    /// The Service the API server calls (`webhook`).
    pub service_name: String,
    /// The Secret holding the certificates (`webhook-certs`).
    pub secret_name: String,
    /// See [`WebhookFlags::drain_period`](crate::WebhookFlags::drain_period).
    pub drain: Duration,
    /// What time it is, for certificate expiry.
    pub clock: Clock,
    /// Whether the system namespace owns the webhook configurations; see
    /// [`WebhookFlags::disable_namespace_ownership`](crate::WebhookFlags::disable_namespace_ownership).
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
    conversion: Conversion,
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
            validation: Validation::new(kinds.clone()),
            conversion: Conversion::new(kinds),
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

    /// The admission controllers and the conversion webhook by path.
    pub fn routes(&self) -> Routes {
        Routes::new()
            .route(DEFAULTING_PATH, Arc::new(self.defaulting.clone()))
            .route(VALIDATION_PATH, Arc::new(self.validation.clone()))
            .route(CONFIG_VALIDATION_PATH, Arc::new(self.config.clone()))
            .conversion(CONVERSION_PATH, self.conversion.clone())
    }

    /// The reconcilers (certificates, then the three configurations, then
    /// the conversion of the CRDs of kinds with a hub, when there are any) as
    /// constructors, for `Setup::construct` (which leaves out those
    /// `--disable-controllers` names, before they ask for any informer). Each
    /// watches Secrets only in the system namespace.
    pub fn constructors(&self) -> Vec<Constructor> {
        let home = Home {
            namespace: self.namespace.clone(),
            secret: self.options.secret_name.clone(),
            namespace_owns_configurations: self.options.namespace_owns_configurations,
        };
        let converted = self.conversion.kinds();
        let certificates = CertificatesOptions {
            service: self.options.service_name.clone(),
            secret: home.secret.clone(),
            namespace: home.namespace.clone(),
            clock: self.options.clock.clone(),
            converted_crds: converted.iter().map(|k| k.crd_name.clone()).collect(),
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
        let service = self.options.service_name.clone();
        let (home_d, home_v, home_c, home_x) = (home.clone(), home.clone(), home.clone(), home);
        let conversions = (!converted.is_empty()).then(|| {
            Constructor::new(crds::QUEUE, move |ctx| {
                crds::new_controller(ctx, &converted, &service, &home_x)
            })
        });
        let mut constructors = vec![
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
        ];
        constructors.extend(conversions);
        constructors
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
        if let Some(metrics) = ctx.get::<ConversionMetrics>() {
            routes = routes.conversion_metrics((*metrics).clone());
        }
        server::serve(listener, Arc::new(tls), routes, self.options.drain, shutdown).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
