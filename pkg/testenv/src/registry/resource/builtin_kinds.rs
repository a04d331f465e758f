//! The built-in kinds, read off their k8s-openapi types, and the tables of what the
//! types do not say.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::{Builtin, KindImpl, ResourceDef, Roundtrip, ScalePaths};

/// Reads a resource's scope from its k8s-openapi type, so that no table repeats it.
pub(super) trait Scope {
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// A built-in kind as its k8s-openapi type describes it.
#[derive(Clone, Debug)]
pub struct BuiltinKind {
    /// API group, `""` for core.
    pub group: &'static str,
    /// API version, e.g. `v1`.
    pub version: &'static str,
    /// The kind, e.g. `Pod`.
    pub kind: &'static str,
    /// The resource name in URLs.
    pub plural: &'static str,
    /// The kind of its lists, e.g. `PodList`.
    pub list_kind: &'static str,
    /// Objects live in a namespace (else cluster-scoped).
    pub namespaced: bool,
    /// The kind has a `status` field, and so a `status` subresource.
    pub status: bool,
    /// `metadata.generation` is kept.
    pub generation: bool,
    /// The type's `Default` value, encoded: every required field present, which
    /// kinds without kind-specific validation accept as a valid object.
    pub skeleton: Value,
    special: Builtin,
    roundtrip: Roundtrip,
    schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl BuiltinKind {
    /// `group/version`, or the version alone for the core group (`v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The kind's schema as a reference into `generator`'s definitions, which it fills
    /// with the kind's definition and every one that reaches.
    pub(crate) fn schema_ref(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.schema)(generator)
    }
}

/// Decodes a body into the k8s-openapi type and encodes it again, which checks field
/// types and drops unknown fields as kube-apiserver's decoder does.
pub(super) fn roundtrip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

fn kind<T>(special: Builtin) -> BuiltinKind
where
    T: k8s_openapi::Resource
        + k8s_openapi::ListableResource
        + DeserializeOwned
        + Serialize
        + Default
        + schemars::JsonSchema,
    T::Scope: Scope,
{
    let skeleton = serde_json::to_value(T::default()).unwrap_or(Value::Null);
    // Every status field in k8s-openapi is optional, so the default value never shows
    // it; a status that survives the round trip is one the type declares.
    let mut probe = skeleton.clone();
    probe["status"] = json!({});
    let status = roundtrip::<T>(&probe).is_ok_and(|v| v.get("status").is_some());
    BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        list_kind: T::LIST_KIND,
        namespaced: <T::Scope as Scope>::NAMESPACED,
        status,
        generation: GENERATION
            .iter()
            .any(|(g, p)| *g == T::GROUP && *p == T::URL_PATH_SEGMENT),
        skeleton,
        special,
        roundtrip: roundtrip::<T>,
        schema: schemars::SchemaGenerator::subschema_for::<T>,
    }
}

/// Every kind a kube-apiserver of the compiled Kubernetes version serves with its
/// default `--runtime-config`: each GA kind once, in its preferred version. Alpha and
/// beta versions are left out because kube-apiserver does not serve them by default
/// (and the kinds that exist only in such versions with them); so are ComponentStatus,
/// which kube-apiserver computes rather than stores, autoscaling/v1
/// HorizontalPodAutoscaler, which would need conversion to share v2's storage, and
/// apiregistration.k8s.io APIServices, which belong to the aggregator and would
/// promise APIs nobody serves.
pub fn builtin_kinds() -> Vec<BuiltinKind> {
    use Builtin as B;
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, autoscaling::v2 as autoscaling,
        batch::v1 as batch, certificates::v1 as certificates, coordination::v1 as coordination,
        core::v1 as core, discovery::v1 as discovery, events::v1 as events, flowcontrol::v1 as flowcontrol,
        networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac,
        scheduling::v1 as scheduling, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    vec![
        kind::<core::Namespace>(B::Namespace),
        kind::<core::ConfigMap>(B::ConfigMap),
        kind::<core::Secret>(B::Secret),
        kind::<core::Service>(B::Service),
        kind::<core::Pod>(B::Pod),
        kind::<core::ServiceAccount>(B::ServiceAccount),
        kind::<core::Event>(B::Event),
        kind::<core::Endpoints>(B::Other),
        kind::<core::LimitRange>(B::Other),
        kind::<core::Node>(B::Other),
        kind::<core::PersistentVolume>(B::PersistentVolume),
        kind::<core::PersistentVolumeClaim>(B::PersistentVolumeClaim),
        kind::<core::PodTemplate>(B::Other),
        kind::<core::ReplicationController>(B::Other),
        kind::<core::ResourceQuota>(B::Other),
        kind::<admission::MutatingWebhookConfiguration>(B::Other),
        kind::<admission::ValidatingWebhookConfiguration>(B::Other),
        kind::<admission::ValidatingAdmissionPolicy>(B::Other),
        kind::<admission::ValidatingAdmissionPolicyBinding>(B::Other),
        kind::<apiext::CustomResourceDefinition>(B::Crd),
        kind::<apps::Deployment>(B::Deployment),
        kind::<apps::ControllerRevision>(B::Other),
        kind::<apps::DaemonSet>(B::Other),
        kind::<apps::ReplicaSet>(B::Other),
        kind::<apps::StatefulSet>(B::Other),
        kind::<autoscaling::HorizontalPodAutoscaler>(B::Other),
        kind::<batch::CronJob>(B::Other),
        kind::<batch::Job>(B::Other),
        kind::<certificates::CertificateSigningRequest>(B::Other),
        kind::<coordination::Lease>(B::Lease),
        kind::<discovery::EndpointSlice>(B::Other),
        kind::<events::Event>(B::EventsV1Event),
        kind::<flowcontrol::FlowSchema>(B::Other),
        kind::<flowcontrol::PriorityLevelConfiguration>(B::Other),
        kind::<networking::Ingress>(B::Other),
        kind::<networking::IngressClass>(B::Other),
        kind::<networking::IPAddress>(B::Other),
        kind::<networking::NetworkPolicy>(B::Other),
        kind::<networking::ServiceCIDR>(B::Other),
        kind::<node::RuntimeClass>(B::Other),
        kind::<policy::PodDisruptionBudget>(B::Other),
        kind::<rbac::ClusterRole>(B::Other),
        kind::<rbac::ClusterRoleBinding>(B::Other),
        kind::<rbac::Role>(B::Other),
        kind::<rbac::RoleBinding>(B::Other),
        kind::<scheduling::PriorityClass>(B::Other),
        kind::<storage::CSIDriver>(B::Other),
        kind::<storage::CSINode>(B::Other),
        kind::<storage::CSIStorageCapacity>(B::Other),
        kind::<storage::StorageClass>(B::Other),
        kind::<storage::VolumeAttachment>(B::Other),
    ]
}

/// Short names and categories as `kubectl api-resources` shows them, by group and plural.
const NAMES: &[(&str, &str, &[&str], &[&str])] = &[
    ("", "namespaces", &["ns"], &[]),
    ("", "configmaps", &["cm"], &[]),
    ("", "services", &["svc"], &["all"]),
    ("", "pods", &["po"], &["all"]),
    ("", "serviceaccounts", &["sa"], &[]),
    ("", "events", &["ev"], &[]),
    ("", "endpoints", &["ep"], &[]),
    ("", "limitranges", &["limits"], &[]),
    ("", "nodes", &["no"], &[]),
    ("", "persistentvolumes", &["pv"], &[]),
    ("", "persistentvolumeclaims", &["pvc"], &[]),
    ("", "replicationcontrollers", &["rc"], &["all"]),
    ("", "resourcequotas", &["quota"], &[]),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        &[],
        &["api-extensions"],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        &[],
        &["api-extensions"],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        &[],
        &["api-extensions"],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        &[],
        &["api-extensions"],
    ),
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["crd", "crds"],
        &["api-extensions"],
    ),
    ("apps", "deployments", &["deploy"], &["all"]),
    ("apps", "daemonsets", &["ds"], &["all"]),
    ("apps", "replicasets", &["rs"], &["all"]),
    ("apps", "statefulsets", &["sts"], &["all"]),
    ("autoscaling", "horizontalpodautoscalers", &["hpa"], &["all"]),
    ("batch", "cronjobs", &["cj"], &["all"]),
    ("batch", "jobs", &[], &["all"]),
    ("certificates.k8s.io", "certificatesigningrequests", &["csr"], &[]),
    ("events.k8s.io", "events", &["ev"], &[]),
    ("networking.k8s.io", "ingresses", &["ing"], &[]),
    ("networking.k8s.io", "ipaddresses", &["ip"], &[]),
    ("networking.k8s.io", "networkpolicies", &["netpol"], &[]),
    ("policy", "poddisruptionbudgets", &["pdb"], &[]),
    ("scheduling.k8s.io", "priorityclasses", &["pc"], &[]),
    ("storage.k8s.io", "storageclasses", &["sc"], &[]),
];

/// Resources whose kube-apiserver strategy sets `metadata.generation` to 1 on create
/// and bumps it when the object beyond metadata (and status) changes.
const GENERATION: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "replicationcontrollers"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("apps", "deployments"),
    ("apps", "daemonsets"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"),
    ("networking.k8s.io", "ingresses"),
    ("networking.k8s.io", "ingressclasses"),
    ("networking.k8s.io", "networkpolicies"),
    ("policy", "poddisruptionbudgets"),
];

/// Resources whose registry answers `DELETE` with the deleted object rather than a
/// success `Status`.
const RETURN_DELETED: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "services"),
    ("", "pods"),
    ("", "podtemplates"),
    ("", "serviceaccounts"),
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("storage.k8s.io", "storageclasses"),
];

/// The resources with a `scale` subresource; all keep `spec.replicas`,
/// `status.replicas` and a `spec.selector` object (a LabelSelector, or for
/// ReplicationControllers a plain label map).
const SCALED: &[(&str, &str)] = &[
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
];

fn listed(table: &[(&str, &str)], k: &BuiltinKind) -> bool {
    table.iter().any(|(g, p)| *g == k.group && *p == k.plural)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn resource_def(k: &BuiltinKind) -> ResourceDef {
    let (short, categories) = NAMES
        .iter()
        .find(|(g, p, _, _)| *g == k.group && *p == k.plural)
        .map(|(_, _, s, c)| (strings(s), strings(c)))
        .unwrap_or_default();
    let scale = listed(SCALED, k).then(|| ScalePaths {
        spec_replicas: "/spec/replicas".into(),
        status_replicas: "/status/replicas".into(),
        label_selector: Some("/spec/selector".into()),
    });
    ResourceDef {
        group: k.group.to_owned(),
        version: k.version.to_owned(),
        plural: k.plural.to_owned(),
        singular: k.kind.to_lowercase(),
        kind: k.kind.to_owned(),
        list_kind: k.list_kind.to_owned(),
        namespaced: k.namespaced,
        short_names: short,
        categories,
        status: k.status,
        generation: k.generation,
        allow_create_on_update: matches!(
            k.special,
            Builtin::Event | Builtin::EventsV1Event | Builtin::Lease
        ),
        allow_unconditional_update: k.special != Builtin::Crd,
        return_deleted_object: listed(RETURN_DELETED, k),
        // Namespaces have no collection delete; Services have one, and kube-apiserver
        // lists `deletecollection` among their verbs.
        deletecollection: k.special != Builtin::Namespace,
        create_only: false,
        token_request: k.group.is_empty() && k.plural == "serviceaccounts",
        imp: KindImpl::Builtin(k.special, k.roundtrip),
        columns: Vec::new(),
        scale,
        storage_api_version: None,
        converter: None,
        webhook_conversion: false,
    }
}

/// The resources of the stored built-in kinds.
pub(super) fn stored_builtins() -> Vec<ResourceDef> {
    builtin_kinds().iter().map(resource_def).collect()
}
