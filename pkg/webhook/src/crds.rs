//! The reconciler that keeps the conversion of each CRD with a hub pointed at
//! this webhook (Knative's conversion reconciler): strategy `Webhook`, the
//! webhook Service and its [`CONVERSION_PATH`],
//! and the `ca-cert.pem` of the certificates Secret as `caBundle`, so the API
//! server trusts the serving certificate, through every rotation. It writes
//! only when something changed, and only as the leader.

use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kinject_runtime::controller::{Action, Error as ReconcileError, Impl, ObjectKey, Reconciler};
use kinject_runtime::informer::EventHandler;
use kinject_runtime::injection::Context;
use kinject_runtime::leader::{Bucket, Enqueue, LeaderAware, LeaderAwareFuncs, PromoteHook};
use kinject_runtime::lister::Lister;
use kinject_runtime::rbac::Verb;
use kube::Api;
use kube::api::PostParams;

use crate::configurations::Home;
use crate::conversion::{CONVERSION_PATH, ConvertedKind};

/// The queue (and lease) name of the reconciler, for `--disable-controllers`.
pub const QUEUE: &str = "conversionwebhook";

/// `current` with its conversion through the webhook `service` (in
/// `namespace`), trusting `ca`.
pub fn desired(
    current: &CustomResourceDefinition,
    service: &str,
    namespace: &str,
    ca: &[u8],
) -> CustomResourceDefinition {
    let mut want = current.clone();
    let review_versions = current
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .map(|w| w.conversion_review_versions.clone())
        .filter(|versions| versions.iter().any(|v| v == "v1"))
        .unwrap_or_else(|| vec!["v1".to_owned()]);
    want.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                ca_bundle: Some(ByteString(ca.to_vec())),
                service: Some(ServiceReference {
                    name: service.to_owned(),
                    namespace: namespace.to_owned(),
                    path: Some(CONVERSION_PATH.to_owned()),
                    port: Some(443),
                }),
                url: None,
            }),
            conversion_review_versions: review_versions,
        }),
    });
    want
}

struct CrdReconciler {
    service: String,
    home: Home,
    crds: Vec<Lister<CustomResourceDefinition>>,
    secrets: Lister<Secret>,
    client: kube::Client,
    leadership: Arc<LeaderAwareFuncs>,
}

impl Reconciler for CrdReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        if !self.leadership.is_leader_for(key) {
            return Ok(Action::await_change());
        }
        let mut current = None;
        for crds in &self.crds {
            if let Some(crd) = crds
                .get_by_key("", &key.name)
                .map_err(|e| ReconcileError::new(e.to_string()))?
            {
                current = Some(crd);
            }
        }
        let Some(current) = current else {
            tracing::warn!(
                crd = %key.name,
                "the CRD does not exist; apply it (hack/update-codegen.sh writes it into config/)"
            );
            return Ok(Action::await_change());
        };
        // The certificate reconciler's first write enqueues this key.
        let Some(ca) = self.home.ca_cert(&self.secrets)? else {
            return Ok(Action::await_change());
        };
        let want = desired(&current, &self.service, &self.home.namespace, &ca);
        if want == *current {
            return Ok(Action::await_change());
        }
        tracing::info!(crd = %key.name, "Updating the CRD's conversion webhook");
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        api.replace(&key.name, &PostParams::default(), &want)
            .await
            .map_err(|e| {
                ReconcileError::new(e).context(format!("cannot update the conversion of CRD {}", key.name))
            })?;
        Ok(Action::await_change())
    }
}

/// A leader-elected reconciler that keeps the conversion of each CRD of
/// `kinds` through the webhook `service`, trusting the CA of `home`'s
/// Secret. It watches those CRDs and that Secret by name only, so its RBAC
/// names them.
pub fn new_controller(ctx: &Context, kinds: &[ConvertedKind], service: &str, home: &Home) -> Impl {
    let crd_informers: Vec<_> = kinds
        .iter()
        .map(|k| {
            ctx.needs_named::<CustomResourceDefinition>(&k.crd_name, &[Verb::Get, Verb::Update]);
            ctx.named_informer::<CustomResourceDefinition>(&k.crd_name)
        })
        .collect();
    let secrets = ctx
        .in_namespace(home.namespace.clone())
        .named_informer::<Secret>(&home.secret);
    let keys: Vec<ObjectKey> = kinds
        .iter()
        .map(|k| ObjectKey::new("", k.crd_name.clone()))
        .collect();
    let promoted = keys.clone();
    let on_promote: PromoteHook = Arc::new(move |bucket: &dyn Bucket, enqueue: Option<&Enqueue>| {
        if let Some(enqueue) = enqueue {
            for key in &promoted {
                enqueue(bucket, key.clone());
            }
        }
    });
    let leadership = Arc::new(LeaderAwareFuncs::new(Some(on_promote), None));
    let reconciler = CrdReconciler {
        service: service.to_owned(),
        home: home.clone(),
        crds: crd_informers.iter().map(|i| i.lister()).collect(),
        secrets: secrets.lister(),
        client: ctx.client(),
        leadership: leadership.clone(),
    };
    let leader: Arc<dyn LeaderAware> = leadership;
    let controller = Impl::new(
        QUEUE,
        reconciler,
        crate::controller_options::controller_options(ctx).leader_aware(leader),
    );
    for informer in &crd_informers {
        informer.add_event_handler(controller.enqueue_handler());
    }
    let (on_secret, secret, namespace) = (controller.clone(), home.secret.clone(), home.namespace.clone());
    secrets.add_event_handler(
        EventHandler::all(move |_: &Secret| {
            for key in &keys {
                on_secret.enqueue_key(key.clone());
            }
        })
        .skip_resyncs()
        .with_filter(move |s: &Secret| {
            s.metadata.name.as_deref() == Some(secret.as_str())
                && s.metadata.namespace.as_deref() == Some(namespace.as_str())
        }),
    );
    controller
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversion_names_the_service_path_and_ca_and_a_second_pass_changes_nothing() {
        let mut current = CustomResourceDefinition::default();
        current.metadata.name = Some("widgets.tutorial.example.com".into());
        let want = desired(&current, "webhook", "knative-samples", b"CA");
        let conversion = want.spec.conversion.as_ref().unwrap();
        assert_eq!(conversion.strategy, "Webhook");
        let webhook = conversion.webhook.as_ref().unwrap();
        assert_eq!(webhook.conversion_review_versions, ["v1"]);
        let config = webhook.client_config.as_ref().unwrap();
        assert_eq!(config.ca_bundle, Some(ByteString(b"CA".to_vec())));
        assert_eq!(
            config.service,
            Some(ServiceReference {
                name: "webhook".into(),
                namespace: "knative-samples".into(),
                path: Some("/resource-conversion".into()),
                port: Some(443),
            })
        );
        assert_eq!(
            desired(&want, "webhook", "knative-samples", b"CA"),
            want,
            "idempotent"
        );
        let rotated = desired(&want, "webhook", "knative-samples", b"CA2");
        assert_eq!(
            rotated
                .spec
                .conversion
                .unwrap()
                .webhook
                .unwrap()
                .client_config
                .unwrap()
                .ca_bundle,
            Some(ByteString(b"CA2".to_vec()))
        );
    }
}
