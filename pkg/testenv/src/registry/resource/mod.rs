//! The resources the server serves, built-in kinds and those of installed CRDs: what
//! each is called, where it is stored, which subresources and printer columns it has.

mod builtin_kinds;
mod create_only;
mod events;

pub use builtin_kinds::{BuiltinKind, builtin_kinds};
pub(crate) use create_only::{CreateOnlyKind, create_only_kinds, token_request_def};

use std::sync::Arc;

use serde_json::{Value, json};

use crate::conversion::Converter;
use crate::errors::ErrorStatus;
use crate::jsonpath::JsonPath;
use crate::store::ResKey;

use super::schema::Schema;
use events::{EVENT_FIELDS, convert_event};

/// The built-in resources, as a kube-apiserver without optional groups serves them:
/// the stored kinds, then the review kinds.
pub(crate) fn builtins() -> Vec<ResourceDef> {
    let mut defs = builtin_kinds::stored_builtins();
    defs.extend(create_only_kinds().iter().map(CreateOnlyKind::resource_def));
    defs
}

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
    /// Served for `create` alone and never stored: the review kinds, whose create
    /// answers a question.
    pub(crate) create_only: bool,
    /// The `token` subresource (ServiceAccounts): a TokenRequest's create.
    pub(crate) token_request: bool,
    pub(crate) imp: KindImpl,
    /// The printer columns of `kubectl get` after Name, CRDs only.
    pub(crate) columns: Vec<Column>,
    /// The `scale` subresource, when served.
    pub(crate) scale: Option<ScalePaths>,
    /// The `apiVersion` objects are stored under, when it differs by
    /// version alone: a custom resource whose CRD converts with `None`
    /// is stored in the CRD's storage version, whatever version wrote it.
    /// `None` for built-in kinds.
    pub(crate) storage_api_version: Option<String>,
    /// The converter of a CRD that converts through a webhook, with the
    /// `apiVersion` of every version it serves.
    pub(crate) converter: Option<(Arc<dyn Converter>, Vec<String>)>,
    /// Whether that converter is the CRD's webhook, called over HTTPS: its
    /// requests run in a [`Conversions`](crate::conversion::Conversions)
    /// scope.
    pub(crate) webhook_conversion: bool,
}

/// One of a CRD's `additionalPrinterColumns`, its JSONPath parsed.
#[derive(Clone, Debug)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) ty: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: i64,
    pub(crate) path: JsonPath,
}

/// apimachinery's `ObjectMeta` documentation of `creationTimestamp`, the description of
/// the Age column a CRD without printer columns gets.
pub(crate) const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

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
    ///
    /// # Errors
    ///
    /// A CRD's converter refused the object, into the storage version or
    /// back. A registered converter is also asked for every other version
    /// served: kube-apiserver would store such an object and then fail every
    /// read of it in that version, testenv refuses the write (500, as a
    /// failed conversion webhook answers). The CRD's own webhook is asked
    /// only what kube-apiserver asks it, and the way back, which the reply
    /// shows.
    pub(crate) fn to_storage(&self, v: Value) -> Result<Value, ErrorStatus> {
        if self.builtin() == Some(Builtin::EventsV1Event)
            && v.get("apiVersion").and_then(Value::as_str) != Some("v1")
        {
            return Ok(convert_event(&v, EVENT_FIELDS, "v1"));
        }
        let Some(stored) = &self.storage_api_version else {
            return Ok(v);
        };
        let Some((converter, served)) = &self.converter else {
            let mut v = v;
            v["apiVersion"] = json!(stored);
            return Ok(v);
        };
        let from = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // The webhook's failures come worded as kube-apiserver words them.
        let failed = |input: &Value, reason: String| {
            let message = if self.webhook_conversion {
                reason
            } else {
                crate::conversion::failure(input, &reason)
            };
            ErrorStatus::new(500, "", message)
        };
        // kube-apiserver asks the webhook only for another version.
        let converted = if from == *stored {
            v
        } else {
            converter.convert(&v, stored).map_err(|e| failed(&v, e))?
        };
        let checked: Vec<&String> = if self.webhook_conversion {
            served
                .iter()
                .filter(|served| **served == from && *served != stored)
                .collect()
        } else {
            served.iter().filter(|served| *served != stored).collect()
        };
        for version in checked {
            converter
                .convert(&converted, version)
                .map_err(|e| failed(&converted, e))?;
        }
        Ok(converted)
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
            _ => self.converted(v),
        };
        if let KindImpl::Custom(schema) = &self.imp {
            schema.default_on_read(&mut out);
        }
        out["apiVersion"] = json!(self.api_version());
        out["kind"] = json!(self.kind);
        out
    }

    /// A stored object as this version reads it, to compare with or merge
    /// into a write in this version: converted when the CRD has a converter
    /// (other kinds' stored objects differ from their versions' by
    /// `apiVersion` alone).
    pub(crate) fn in_own_version<'a>(&self, v: &'a Value) -> std::borrow::Cow<'a, Value> {
        if self.converter.is_some() {
            std::borrow::Cow::Owned(self.converted(v))
        } else {
            std::borrow::Cow::Borrowed(v)
        }
    }

    /// A stored object in this version through the CRD's converter, when it
    /// has one. Every write checked that it converts with a registered
    /// converter, so a failure there means the converter changed its mind,
    /// and the object is shown unconverted. The webhook's failures are the
    /// request's to report (see [`crate::conversion`]).
    fn converted(&self, v: &Value) -> Value {
        let Some((converter, _)) = &self.converter else {
            return v.clone();
        };
        let api_version = self.api_version();
        if v.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str()) {
            return v.clone();
        }
        converter.convert(v, &api_version).unwrap_or_else(|e| {
            if self.webhook_conversion {
                return v.clone();
            }
            eprintln!(
                "testenv: a stored {} that converted when written no longer converts to {api_version}: {e}",
                self.kind
            );
            v.clone()
        })
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

    /// A custom resource's `openAPIV3Schema`.
    pub(crate) fn custom_schema(&self) -> Option<&Value> {
        match &self.imp {
            KindImpl::Custom(s) => Some(&s.root),
            KindImpl::Builtin(..) => None,
        }
    }

    pub(crate) fn builtin(&self) -> Option<Builtin> {
        match self.imp {
            KindImpl::Builtin(b, _) => Some(b),
            KindImpl::Custom(_) => None,
        }
    }

    pub(crate) fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            return vec!["create"];
        }
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
