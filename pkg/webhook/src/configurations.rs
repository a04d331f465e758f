//! Reconcilers that keep the webhook configurations current (Knative's
//! `reconcileMutatingWebhook` / `reconcileValidatingWebhook`): the manifests
//! install them with neither rules nor `caBundle`; these fill in the rules of
//! the kinds the webhook serves, the CA from the certificates Secret, the
//! Service path, Knative's namespaceSelector and (for the mutating one)
//! `reinvocationPolicy: IfNeeded`, and write only when something changed.

use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, OwnerReference,
};
use kinject_runtime::apis::Object;
use kinject_runtime::apis::registry::CustomKind;
use kinject_runtime::controller::{Action, Error as ReconcileError, Impl, ObjectKey, Reconciler};
use kinject_runtime::informer::EventHandler;
use kinject_runtime::injection::Context;
use kinject_runtime::leader::{LeaderAware, LeaderAwareFuncs};
use kinject_runtime::lister::Lister;
use kube::Api;
use kube::api::PostParams;
use kube::core::ClusterResourceScope;

use crate::certificates::CA_CERT;

/// The label that keeps a namespace out of the resource webhooks.
pub const EXCLUDE_LABEL: &str = "webhooks.knative.dev/exclude";

/// Which webhook configuration a reconciler keeps, and what it puts in it.
#[derive(Clone, Debug)]
pub struct WebhookSpec {
    /// The configuration's name, also the name of its webhook entry
    /// (`validation.webhook.<ns>.knative.dev`).
    pub name: String,
    /// The path of the webhook Service it calls (`/resource-validation`).
    pub path: String,
    /// The rules, sorted.
    pub rules: Vec<RuleWithOperations>,
    /// Whether `webhooks.knative.dev/exclude DoesNotExist` is added to the
    /// namespaceSelector (the resource webhooks; not the ConfigMap one, whose
    /// selector the manifest sets).
    pub exclude_label: bool,
}

/// Rules for `operations` on each kind and its status subresource, sorted as
/// Knative sorts them (by first resource).
pub fn kind_rules(kinds: &[CustomKind], operations: &[&str]) -> Vec<RuleWithOperations> {
    let mut rules: Vec<RuleWithOperations> = kinds
        .iter()
        .map(|k| RuleWithOperations {
            api_groups: Some(vec![k.group.clone()]),
            api_versions: Some(vec![k.version.clone()]),
            operations: Some(operations.iter().map(|o| (*o).to_owned()).collect()),
            resources: Some(vec![k.plural.clone(), format!("{}/status", k.plural)]),
            scope: None,
        })
        .collect();
    rules.sort_by(|a, b| first_resource(a).cmp(first_resource(b)));
    rules
}

fn first_resource(rule: &RuleWithOperations) -> &str {
    rule.resources
        .as_ref()
        .and_then(|r| r.first())
        .map(String::as_str)
        .unwrap_or_default()
}

/// The ConfigMap webhook's rule: CREATE and UPDATE of namespaced ConfigMaps.
pub fn config_map_rules() -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        api_groups: Some(vec![String::new()]),
        api_versions: Some(vec!["v1".to_owned()]),
        operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
        resources: Some(vec!["configmaps/*".to_owned()]),
        scope: Some("Namespaced".to_owned()),
    }]
}

/// Knative's `EnsureLabelSelectorExpressions`: `current` with the
/// expression on `key` added unless one exists.
fn ensure_exclude(current: Option<LabelSelector>) -> LabelSelector {
    let mut selector = current.unwrap_or_default();
    let expressions = selector.match_expressions.get_or_insert_with(Vec::new);
    if !expressions.iter().any(|e| e.key == EXCLUDE_LABEL) {
        expressions.push(LabelSelectorRequirement {
            key: EXCLUDE_LABEL.to_owned(),
            operator: "DoesNotExist".to_owned(),
            values: None,
        });
    }
    selector
}

/// One webhook entry, mutating or validating.
trait Entry {
    fn name(&self) -> &str;
    fn client_config(&mut self) -> &mut WebhookClientConfig;
    fn rules(&mut self) -> &mut Option<Vec<RuleWithOperations>>;
    fn namespace_selector(&mut self) -> &mut Option<LabelSelector>;
    fn reinvocation(&mut self) {}
}

impl Entry for MutatingWebhook {
    fn name(&self) -> &str {
        &self.name
    }
    fn client_config(&mut self) -> &mut WebhookClientConfig {
        &mut self.client_config
    }
    fn rules(&mut self) -> &mut Option<Vec<RuleWithOperations>> {
        &mut self.rules
    }
    fn namespace_selector(&mut self) -> &mut Option<LabelSelector> {
        &mut self.namespace_selector
    }
    fn reinvocation(&mut self) {
        self.reinvocation_policy = Some("IfNeeded".to_owned());
    }
}

impl Entry for ValidatingWebhook {
    fn name(&self) -> &str {
        &self.name
    }
    fn client_config(&mut self) -> &mut WebhookClientConfig {
        &mut self.client_config
    }
    fn rules(&mut self) -> &mut Option<Vec<RuleWithOperations>> {
        &mut self.rules
    }
    fn namespace_selector(&mut self) -> &mut Option<LabelSelector> {
        &mut self.namespace_selector
    }
}

/// A webhook configuration kind.
trait Configuration: Object<Scope = ClusterResourceScope> + PartialEq {
    type Entry: Entry;
    fn entries(&mut self) -> &mut Vec<Self::Entry>;
}

impl Configuration for MutatingWebhookConfiguration {
    type Entry = MutatingWebhook;
    fn entries(&mut self) -> &mut Vec<MutatingWebhook> {
        self.webhooks.get_or_insert_with(Vec::new)
    }
}

impl Configuration for ValidatingWebhookConfiguration {
    type Entry = ValidatingWebhook;
    fn entries(&mut self) -> &mut Vec<ValidatingWebhook> {
        self.webhooks.get_or_insert_with(Vec::new)
    }
}

/// `current` as `spec` wants it, with `ca` as the caBundle and `owner` among
/// its owner references.
fn desired<C: Configuration>(
    current: &C,
    spec: &WebhookSpec,
    ca: &[u8],
    owner: Option<&OwnerReference>,
) -> Result<C, String> {
    let mut want = current.clone();
    if let Some(owner) = owner {
        let refs = want.meta_mut().owner_references.get_or_insert_with(Vec::new);
        if !refs.iter().any(|r| r.uid == owner.uid) {
            refs.push(owner.clone());
        }
    }
    for entry in want.entries().iter_mut().filter(|e| e.name() == spec.name) {
        *entry.rules() = Some(spec.rules.clone());
        if spec.exclude_label {
            let selector = entry.namespace_selector().take();
            *entry.namespace_selector() = Some(ensure_exclude(selector));
        }
        let config = entry.client_config();
        config.ca_bundle = Some(ByteString(ca.to_vec()));
        let Some(service) = config.service.as_mut() else {
            return Err(format!("missing service reference for webhook: {}", spec.name));
        };
        service.path = Some(spec.path.clone());
        entry.reinvocation();
    }
    Ok(want)
}

/// Where a webhook lives: the system namespace, the Secret whose
/// `ca-cert.pem` becomes each configuration's caBundle, and whether that
/// namespace owns the configurations (Knative's
/// `WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP` turns this off).
#[derive(Clone, Debug)]
pub struct Home {
    /// The system namespace.
    pub namespace: String,
    /// The Secret holding the certificates.
    pub secret: String,
    /// Whether the namespace is set as the configurations' owner, so deleting
    /// it deletes them.
    pub namespace_owns_configurations: bool,
}

impl Home {
    /// The CA the certificate reconciler wrote into the Secret, `None` until
    /// it has: at start it has not yet, and its write enqueues the keys of
    /// the reconcilers that wait for it, so waiting is no failure.
    pub(crate) fn ca_cert(&self, secrets: &Lister<Secret>) -> Result<Option<Vec<u8>>, ReconcileError> {
        let secret = secrets
            .namespaced(&self.namespace)
            .get(&self.secret)
            .map_err(|e| ReconcileError::new(e.to_string()))?;
        let ca = secret
            .as_ref()
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get(CA_CERT))
            .filter(|ca| !ca.0.is_empty())
            .map(|ca| ca.0.clone());
        if ca.is_none() {
            tracing::debug!(secret = %self.secret, "waiting for the certificate reconciler to write {CA_CERT:?}");
        }
        Ok(ca)
    }
}

struct ConfigReconciler<C: Configuration> {
    spec: WebhookSpec,
    home: Home,
    configurations: Lister<C>,
    secrets: Lister<Secret>,
    client: kube::Client,
    leadership: Arc<LeaderAwareFuncs>,
}

impl<C: Configuration> ConfigReconciler<C> {
    /// The system namespace as the configuration's owner, so deleting the
    /// namespace deletes the configuration (Knative does the same).
    async fn owner(&self) -> Result<Option<OwnerReference>, ReconcileError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        // The API error kept as the cause, so it prints as the API server
        // worded it and a conflict is still known as one.
        let namespace = api.get_opt(&self.home.namespace).await.map_err(|e| {
            ReconcileError::new(e).context(format!("cannot read namespace {}", self.home.namespace))
        })?;
        Ok(namespace.and_then(|ns| {
            Some(OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Namespace".to_owned(),
                name: self.home.namespace.clone(),
                uid: ns.metadata.uid?,
                controller: Some(false),
                block_owner_deletion: Some(true),
            })
        }))
    }
}

impl<C: Configuration> Reconciler for ConfigReconciler<C>
where
    C::Scope: kinject_runtime::client::ApiScope,
{
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        if !self.leadership.is_leader_for(key) {
            return Ok(Action::await_change());
        }
        let Some(current) = self
            .configurations
            .get_by_key("", &key.name)
            .map_err(|e| ReconcileError::new(e.to_string()))?
        else {
            tracing::warn!(
                configuration = %key.name,
                "the webhook configuration does not exist; apply it (config/500-webhook-configuration.yaml)"
            );
            return Ok(Action::await_change());
        };
        // The Secret's handler below enqueues this key once the CA is there.
        let Some(ca) = self.home.ca_cert(&self.secrets)? else {
            return Ok(Action::await_change());
        };
        let owner = if self.home.namespace_owns_configurations {
            self.owner().await?
        } else {
            None
        };
        let want = desired(current.as_ref(), &self.spec, &ca, owner.as_ref())
            .map_err(|e| ReconcileError::permanent(ReconcileError::new(e)))?;
        if want == *current {
            return Ok(Action::await_change());
        }
        tracing::info!(configuration = %key.name, "Updating the webhook configuration");
        let api: Api<C> = Api::all(self.client.clone());
        api.replace(&key.name, &PostParams::default(), &want)
            .await
            .map_err(|e| {
                ReconcileError::new(e).context(format!("cannot update webhook configuration {}", key.name))
            })?;
        Ok(Action::await_change())
    }
}

/// A leader-elected reconciler that keeps the `C` named `spec.name` as
/// `spec` says, with the `ca-cert.pem` of `home`'s Secret as its caBundle;
/// `queue` names it (and its lease). It watches that one Secret only.
fn new_controller<C>(ctx: &Context, queue: &str, spec: WebhookSpec, home: &Home) -> Impl
where
    C: Configuration,
    C::Scope: kinject_runtime::client::ApiScope,
{
    let configurations = ctx.informer::<C>();
    let secrets = ctx
        .in_namespace(home.namespace.clone())
        .named_informer::<Secret>(&home.secret);
    let key = ObjectKey::new("", spec.name.clone());
    let leadership = Arc::new(LeaderAwareFuncs::enqueuing_on_promote(key.clone()));
    let reconciler = ConfigReconciler::<C> {
        spec,
        home: home.clone(),
        configurations: configurations.lister(),
        secrets: secrets.lister(),
        client: ctx.client(),
        leadership: leadership.clone(),
    };
    let leader: Arc<dyn LeaderAware> = leadership;
    let controller = Impl::new(
        queue,
        reconciler,
        crate::controller_options::controller_options(ctx).leader_aware(leader),
    );
    let name = key.name.clone();
    configurations.add_event_handler(
        controller
            .enqueue_handler()
            .with_filter(move |c: &C| c.meta().name.as_deref() == Some(name.as_str())),
    );
    let (on_secret, secret, namespace) = (controller.clone(), home.secret.clone(), home.namespace.clone());
    secrets.add_event_handler(
        // The configuration's own informer resyncs it.
        EventHandler::all(move |_: &Secret| on_secret.enqueue_key(key.clone()))
            .skip_resyncs()
            .with_filter(move |s: &Secret| {
                s.metadata.name.as_deref() == Some(secret.as_str())
                    && s.metadata.namespace.as_deref() == Some(namespace.as_str())
            }),
    );
    controller
}

/// The reconciler of the MutatingWebhookConfiguration `spec.name`.
pub fn mutating_controller(ctx: &Context, queue: &str, spec: WebhookSpec, home: &Home) -> Impl {
    new_controller::<MutatingWebhookConfiguration>(ctx, queue, spec, home)
}

/// The reconciler of the ValidatingWebhookConfiguration `spec.name`.
pub fn validating_controller(ctx: &Context, queue: &str, spec: WebhookSpec, home: &Home) -> Impl {
    new_controller::<ValidatingWebhookConfiguration>(ctx, queue, spec, home)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;

    fn rule(plural: &str) -> RuleWithOperations {
        RuleWithOperations {
            api_groups: Some(vec!["samples.knative.dev".into()]),
            api_versions: Some(vec!["v1alpha1".into()]),
            operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
            resources: Some(vec![plural.into(), format!("{plural}/status")]),
            scope: None,
        }
    }

    fn configuration(name: &str) -> MutatingWebhookConfiguration {
        MutatingWebhookConfiguration {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            webhooks: Some(vec![MutatingWebhook {
                name: name.into(),
                admission_review_versions: vec!["v1".into()],
                side_effects: "None".into(),
                client_config: WebhookClientConfig {
                    service: Some(ServiceReference {
                        name: "webhook".into(),
                        namespace: "knative-samples".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            }]),
        }
    }

    #[test]
    fn the_entry_gets_rules_ca_path_selector_and_reinvocation_and_a_second_pass_changes_nothing() {
        let spec = WebhookSpec {
            name: "defaulting.webhook.knative-samples.knative.dev".into(),
            path: "/defaulting".into(),
            rules: vec![rule("addressableservices")],
            exclude_label: true,
        };
        let current = configuration(&spec.name);
        let want = desired(&current, &spec, b"CA", None).unwrap();
        let entry = &want.webhooks.as_ref().unwrap()[0];
        assert_eq!(entry.rules.as_ref().unwrap(), &spec.rules);
        assert_eq!(entry.client_config.ca_bundle, Some(ByteString(b"CA".to_vec())));
        assert_eq!(
            entry.client_config.service.as_ref().unwrap().path.as_deref(),
            Some("/defaulting")
        );
        assert_eq!(entry.reinvocation_policy.as_deref(), Some("IfNeeded"));
        let selector = entry.namespace_selector.as_ref().unwrap();
        assert_eq!(
            selector.match_expressions.as_ref().unwrap()[0],
            LabelSelectorRequirement {
                key: EXCLUDE_LABEL.into(),
                operator: "DoesNotExist".into(),
                values: None
            }
        );
        assert_eq!(desired(&want, &spec, b"CA", None).unwrap(), want, "idempotent");
    }

    #[test]
    fn an_entry_without_a_service_is_an_error() {
        let spec = WebhookSpec {
            name: "x".into(),
            path: "/defaulting".into(),
            rules: Vec::new(),
            exclude_label: false,
        };
        let mut current = configuration("x");
        current.webhooks.as_mut().unwrap()[0].client_config.service = None;
        assert_eq!(
            desired(&current, &spec, b"CA", None).unwrap_err(),
            "missing service reference for webhook: x"
        );
    }
}
