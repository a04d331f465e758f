//! The resources the server serves: built-in kinds and those of installed CRDs.

use std::sync::Arc;

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use crate::crd::Schema;
use crate::store::ResKey;

/// A built-in kind, whose bodies are checked by a round trip through k8s-openapi.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    Namespace,
    ConfigMap,
    Secret,
    Service,
    Pod,
    ServiceAccount,
    Event,
    Deployment,
    Lease,
    EventsV1Event,
    Crd,
    PersistentVolume,
    PersistentVolumeClaim,
    /// A kind checked by its type round trip alone, with no kind-specific rules.
    Other,
}

/// Decodes a body as a k8s-openapi type and encodes it again; the error is the
/// decoder's message.
pub(crate) type Roundtrip = fn(&Value) -> Result<Value, String>;

#[derive(Clone, Debug)]
pub(crate) enum KindImpl {
    Builtin(Builtin, Roundtrip),
    Custom(Arc<Schema>),
}

/// One served group/version/resource.
#[derive(Clone, Debug)]
pub(crate) struct ResourceDef {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) kind: String,
    pub(crate) list_kind: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    /// The `status` subresource is enabled.
    pub(crate) status: bool,
    /// `metadata.generation` is maintained.
    pub(crate) generation: bool,
    /// `PUT` of a missing object creates it (leases, events).
    pub(crate) allow_create_on_update: bool,
    /// `PUT` without `metadata.resourceVersion` is allowed.
    pub(crate) allow_unconditional_update: bool,
    /// `DELETE` answers with the deleted object rather than a success `Status`.
    pub(crate) return_deleted_object: bool,
    pub(crate) deletecollection: bool,
    pub(crate) imp: KindImpl,
    /// The printer columns of `kubectl get` after Name, CRDs only.
    pub(crate) columns: Vec<Column>,
    /// The `scale` subresource, when served.
    pub(crate) scale: Option<ScalePaths>,
}

/// One of a CRD's `additionalPrinterColumns`, its JSONPath parsed.
#[derive(Clone, Debug)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) ty: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: i64,
    pub(crate) path: crate::jsonpath::JsonPath,
}

/// Where a resource keeps what its `scale` subresource shows, as JSON pointers.
#[derive(Clone, Debug)]
pub(crate) struct ScalePaths {
    pub(crate) spec_replicas: String,
    pub(crate) status_replicas: String,
    /// A string label selector, or (for Deployments) a LabelSelector object.
    pub(crate) label_selector: Option<String>,
}

/// `.spec.replicas` → `/spec/replicas` (the simple JSON paths scale subresources use).
pub(crate) fn json_path_pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, seg| format!("{acc}/{seg}"))
}

impl ResourceDef {
    /// Where objects are stored. events.k8s.io/v1 Events share core/v1's storage: in
    /// kube-apiserver they are one resource seen through two API versions.
    /// `pods`, `addressableservices.samples.knative.dev`: the resource as
    /// kubectl names it, which deterministic uids are derived from.
    pub(crate) fn resource_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn key(&self) -> ResKey {
        if self.builtin() == Some(Builtin::EventsV1Event) {
            return ResKey::new("", "events");
        }
        ResKey::new(&self.group, &self.plural)
    }

    /// Converts an object of this resource's version into its stored form.
    pub(crate) fn to_storage(&self, v: Value) -> Value {
        if self.builtin() == Some(Builtin::EventsV1Event)
            && v.get("apiVersion").and_then(Value::as_str) != Some("v1")
        {
            return convert_event(&v, EVENT_FIELDS, "v1");
        }
        v
    }

    /// Converts a stored object into this resource's version.
    pub(crate) fn in_version(&self, v: &Value) -> Value {
        let mut out = match self.builtin() {
            Some(Builtin::EventsV1Event) if v.get("apiVersion").and_then(Value::as_str) == Some("v1") => {
                let reversed: Vec<(&str, &str)> = EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)).collect();
                convert_event(v, &reversed, "events.k8s.io/v1")
            }
            Some(Builtin::Event)
                if v.get("apiVersion").and_then(Value::as_str) == Some("events.k8s.io/v1") =>
            {
                convert_event(v, EVENT_FIELDS, "v1")
            }
            _ => v.clone(),
        };
        out["apiVersion"] = json!(self.api_version());
        out["kind"] = json!(self.kind);
        out
    }

    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub(crate) fn is_custom(&self) -> bool {
        matches!(self.imp, KindImpl::Custom(_))
    }

    pub(crate) fn builtin(&self) -> Option<Builtin> {
        match self.imp {
            KindImpl::Builtin(b, _) => Some(b),
            KindImpl::Custom(_) => None,
        }
    }

    pub(crate) fn verbs(&self) -> Vec<&'static str> {
        let mut v = vec!["create", "delete"];
        if self.deletecollection {
            v.push("deletecollection");
        }
        v.extend(["get", "list", "patch", "update", "watch"]);
        v
    }

    /// Whether the kind converts field labels beyond ObjectMeta's.
    pub(crate) fn has_field_labels(&self) -> bool {
        matches!(
            self.builtin(),
            Some(
                Builtin::Pod | Builtin::Event | Builtin::EventsV1Event | Builtin::Secret | Builtin::Namespace
            )
        ) || (self.builtin() == Some(Builtin::Other) && self.other_field_labels().is_some())
    }

    /// Field labels of the kinds without rules of their own, with the value a missing
    /// field reads as: kube-apiserver formats the Go zero value of the field.
    fn other_field_labels(&self) -> Option<&'static [(&'static str, &'static str, &'static str)]> {
        let table: &'static [(&'static str, &'static str, &'static str)] =
            match (self.group.as_str(), self.plural.as_str()) {
                ("batch", "jobs") => &[("status.successful", "/status/succeeded", "0")],
                ("", "nodes") => &[("spec.unschedulable", "/spec/unschedulable", "false")],
                ("apps", "replicasets") | ("", "replicationcontrollers") => {
                    &[("status.replicas", "/status/replicas", "0")]
                }
                ("certificates.k8s.io", "certificatesigningrequests") => {
                    &[("spec.signerName", "/spec/signerName", "")]
                }
                _ => return None,
            };
        Some(table)
    }

    /// What a field label reads when the object lacks the field.
    pub(crate) fn field_zero(&self, label: &str) -> &'static str {
        self.other_field_labels()
            .and_then(|t| t.iter().find(|(l, _, _)| *l == label))
            .map_or("", |(_, _, z)| *z)
    }

    /// Field selector labels beyond `metadata.name` and `metadata.namespace`, mapped to
    /// the JSON pointer they read.
    pub(crate) fn field_label(&self, label: &str) -> Option<&'static str> {
        let b = self.builtin()?;
        let table: &[(&str, &'static str)] = match b {
            Builtin::Pod => &[
                ("spec.nodeName", "/spec/nodeName"),
                ("spec.restartPolicy", "/spec/restartPolicy"),
                ("spec.schedulerName", "/spec/schedulerName"),
                ("spec.serviceAccountName", "/spec/serviceAccountName"),
                ("spec.hostNetwork", "/spec/hostNetwork"),
                ("status.phase", "/status/phase"),
                ("status.podIP", "/status/podIP"),
                ("status.nominatedNodeName", "/status/nominatedNodeName"),
            ],
            Builtin::Event => &[
                ("involvedObject.kind", "/involvedObject/kind"),
                ("involvedObject.namespace", "/involvedObject/namespace"),
                ("involvedObject.name", "/involvedObject/name"),
                ("involvedObject.uid", "/involvedObject/uid"),
                ("involvedObject.apiVersion", "/involvedObject/apiVersion"),
                (
                    "involvedObject.resourceVersion",
                    "/involvedObject/resourceVersion",
                ),
                ("involvedObject.fieldPath", "/involvedObject/fieldPath"),
                ("reason", "/reason"),
                ("reportingComponent", "/reportingComponent"),
                ("source", "/source/component"),
                ("type", "/type"),
            ],
            Builtin::EventsV1Event => &[
                ("regarding.kind", "/regarding/kind"),
                ("regarding.namespace", "/regarding/namespace"),
                ("regarding.name", "/regarding/name"),
                ("regarding.uid", "/regarding/uid"),
                ("reason", "/reason"),
                ("reportingController", "/reportingController"),
                ("type", "/type"),
            ],
            Builtin::Secret => &[("type", "/type")],
            Builtin::Namespace => &[("status.phase", "/status/phase")],
            Builtin::Other => {
                let t = self.other_field_labels()?;
                return t.iter().find(|(l, _, _)| *l == label).map(|(_, p, _)| *p);
            }
            _ => &[],
        };
        table.iter().find(|(l, _)| *l == label).map(|(_, p)| *p)
    }
}

/// events.k8s.io/v1 field → core/v1 field (apis/events/v1 conversion).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("action", "action"),
    ("reason", "reason"),
    ("type", "type"),
];

fn convert_event(v: &Value, fields: &[(&str, &str)], api_version: &str) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    if let Some(m) = v.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    for (from, to) in fields {
        if let Some(x) = v.get(*from).filter(|x| !x.is_null()) {
            out.insert((*to).to_owned(), x.clone());
        }
    }
    Value::Object(out)
}

/// Reads a resource's scope from its k8s-openapi type, so that no table repeats it.
trait Scope {
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
    pub version: &'static str,
    pub kind: &'static str,
    /// The resource name in URLs.
    pub plural: &'static str,
    pub list_kind: &'static str,
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
}

impl BuiltinKind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Decodes a body into the k8s-openapi type and encodes it again, which checks field
/// types and drops unknown fields as kube-apiserver's decoder does.
fn roundtrip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

fn kind<T>(special: Builtin) -> BuiltinKind
where
    T: k8s_openapi::Resource + k8s_openapi::ListableResource + DeserializeOwned + Serialize + Default,
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
        deletecollection: !matches!(k.special, Builtin::Namespace | Builtin::Service),
        imp: KindImpl::Builtin(k.special, k.roundtrip),
        columns: Vec::new(),
        scale,
    }
}

/// The built-in resources, as a kube-apiserver without optional groups serves them.
pub(crate) fn builtins() -> Vec<ResourceDef> {
    builtin_kinds().iter().map(resource_def).collect()
}

impl Builtin {
    /// Where the kind keeps `metav1.MicroTime`s (JSON pointers).
    pub(crate) fn micro_time_paths(self) -> &'static [&'static str] {
        match self {
            Self::Lease => &["/spec/acquireTime", "/spec/renewTime"],
            Self::Event | Self::EventsV1Event => &["/eventTime", "/series/lastObservedTime"],
            _ => &[],
        }
    }
}

impl Builtin {
    /// Defaults kube-apiserver fills in on create (a subset: the fields controllers
    /// commonly compare against).
    pub(crate) fn default_on_create(self, obj: &mut Value) {
        match self {
            Self::Namespace => {
                let name = obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
                obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
            }
            Self::Secret if obj.get("type").is_none_or(Value::is_null) => {
                obj["type"] = json!("Opaque");
            }
            Self::Service => {
                default_service(obj);
                obj["status"] = json!({"loadBalancer": {}});
            }
            Self::Pod => {
                if let Some(spec) = obj.get_mut("spec") {
                    default_pod_spec(spec);
                }
                let qos = pod_qos(obj);
                obj["status"] = json!({"phase": "Pending", "qosClass": qos});
            }
            Self::Deployment => {
                if let Some(spec) = obj.get_mut("spec") {
                    set_default(spec, "replicas", json!(1));
                    set_default(spec, "revisionHistoryLimit", json!(10));
                    set_default(spec, "progressDeadlineSeconds", json!(600));
                    set_default(
                        spec,
                        "strategy",
                        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
                    );
                    if let Some(pod) = spec.pointer_mut("/template/spec") {
                        default_pod_spec(pod);
                    }
                }
                obj["status"] = json!({});
            }
            // The strategy clears the status, and the v1 defaults that run when the
            // object is read back fill in the phase.
            Self::PersistentVolume => {
                if let Some(spec) = obj.get_mut("spec") {
                    set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
                    set_default(spec, "volumeMode", json!("Filesystem"));
                }
                obj["status"] = json!({"phase": "Pending"});
            }
            Self::PersistentVolumeClaim => {
                if let Some(spec) = obj.get_mut("spec") {
                    set_default(spec, "volumeMode", json!("Filesystem"));
                }
                obj["status"] = json!({"phase": "Pending"});
            }
            _ => {}
        }
    }
}

/// The v1 defaults of the workload kinds without rules of their own, which
/// controllers comparing their desired spec with the stored one run into.
pub(crate) fn default_workload(def: &ResourceDef, obj: &mut Value) {
    if def.builtin() != Some(Builtin::Other) {
        return;
    }
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    let template = match (def.group.as_str(), def.plural.as_str()) {
        ("apps", "replicasets") => {
            set_default(spec, "replicas", json!(1));
            "/template/spec"
        }
        ("apps", "statefulsets") => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            "/template/spec"
        }
        ("apps", "daemonsets") => {
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
            "/template/spec"
        }
        ("batch", "jobs") => {
            default_job_spec(spec);
            "/template/spec"
        }
        ("batch", "cronjobs") => {
            set_default(spec, "concurrencyPolicy", json!("Allow"));
            set_default(spec, "suspend", json!(false));
            set_default(spec, "successfulJobsHistoryLimit", json!(3));
            set_default(spec, "failedJobsHistoryLimit", json!(1));
            if let Some(job) = spec.pointer_mut("/jobTemplate/spec") {
                default_job_spec(job);
            }
            "/jobTemplate/spec/template/spec"
        }
        _ => return,
    };
    if let Some(pod) = spec.pointer_mut(template) {
        default_pod_spec(pod);
    }
}

fn default_job_spec(spec: &mut Value) {
    // Completions default to 1 only when parallelism was not given either.
    if spec.get("parallelism").is_none_or(Value::is_null) {
        set_default(spec, "completions", json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    let policy = if spec.get("podFailurePolicy").is_some_and(|p| !p.is_null()) {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    set_default(spec, "podReplacementPolicy", json!(policy));
}

/// A Job without `manualSelector: true` gets a selector on its own uid, and its pod
/// template the labels that selector matches; kube-apiserver does this once the uid
/// is known.
pub(crate) fn select_job_pods(def: &ResourceDef, obj: &mut Value) {
    if def.builtin() != Some(Builtin::Other) || def.group != "batch" || def.plural != "jobs" {
        return;
    }
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let uid = obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
    let name = obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set_default(
        spec,
        "selector",
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    let Some(template) = spec.get_mut("template").filter(|t| t.is_object()) else {
        return;
    };
    if !template.get("metadata").is_some_and(Value::is_object) {
        template["metadata"] = json!({});
    }
    let meta = &mut template["metadata"];
    if !meta.get("labels").is_some_and(Value::is_object) {
        meta["labels"] = json!({});
    }
    let labels = &mut meta["labels"];
    set_default(labels, "batch.kubernetes.io/controller-uid", uid.clone());
    set_default(labels, "batch.kubernetes.io/job-name", name.clone());
    set_default(labels, "controller-uid", uid);
    set_default(labels, "job-name", name);
}

fn set_default(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.to_owned(), value);
    }
}

fn default_pod_spec(spec: &mut Value) {
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "enableServiceLinks", json!(true));
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    set_default(spec, "priority", json!(0));
    set_default(spec, "serviceAccountName", json!("default"));
    let sa = spec.get("serviceAccountName").cloned();
    if let Some(sa) = sa {
        set_default(spec, "serviceAccount", sa);
    }
    for list in ["initContainers", "containers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
                let last = image.rsplit('/').next().unwrap_or_default();
                let policy = if image.contains('@') || (last.contains(':') && !last.ends_with(":latest")) {
                    "IfNotPresent"
                } else {
                    "Always"
                };
                set_default(c, "imagePullPolicy", json!(policy));
                set_default(c, "resources", json!({}));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

fn pod_qos(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let has = |c: &Value, what: &str| {
        c.pointer(&format!("/resources/{what}"))
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
    };
    if containers
        .iter()
        .all(|c| !has(c, "requests") && !has(c, "limits"))
    {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        match lim {
            Some(l) if l.contains_key("cpu") && l.contains_key("memory") => {
                req.is_none_or(|r| r.iter().all(|(k, v)| l.get(k) == Some(v)))
            }
            _ => false,
        }
    });
    if guaranteed { "Guaranteed" } else { "Burstable" }
}

fn default_service(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
    if !external {
        // A stable address derived from the name keeps tests deterministic.
        let h = name
            .bytes()
            .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        let ip = format!("10.96.{}.{}", (h >> 8) % 256, h % 254 + 1);
        set_default(spec, "clusterIP", json!(ip));
        let cip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        if cip.as_str() != Some("None") {
            set_default(spec, "clusterIPs", json!([cip]));
        } else {
            set_default(spec, "clusterIPs", json!(["None"]));
        }
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            // Defaulting treats an empty protocol and a zero or empty targetPort as unset.
            if let Some(m) = p.as_object_mut() {
                if m.get("protocol").is_some_and(|v| v == "") {
                    m.remove("protocol");
                }
                if m.get("targetPort").is_some_and(|v| v == 0 || v == "") {
                    m.remove("targetPort");
                }
            }
            set_default(p, "protocol", json!("TCP"));
            let port = p.get("port").cloned().unwrap_or(Value::Null);
            set_default(p, "targetPort", port);
        }
    }
}
