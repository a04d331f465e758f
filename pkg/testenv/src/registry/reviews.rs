//! The review kinds' create, as kube-apiserver's authentication and authorization
//! registries answer it: the object comes back with its status filled in, and
//! nothing is stored. The field manager has run on the request as for any create, so
//! the answer carries its `managedFields`.

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::go_format::{go_object_meta, go_value};
use crate::object_meta::{meta_str, with_meta};
use crate::registry::Registry;
use crate::registry::managed_fields::track_update;
use crate::registry::options::{WriteOpts, Written};
use crate::registry::rbac::{self, Asked, Attributes, NonResourceAttributes, User};
use crate::registry::resource::ResourceDef;
use crate::timestamps::now;

const AUTHORIZATION: &str = "authorization.k8s.io";

impl Registry {
    /// Answers the create of a review kind on behalf of `user`.
    pub(crate) fn review(
        &self,
        def: &ResourceDef,
        url_ns: Option<&str>,
        user: &User,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        self.check_type(def, &body, true)?;
        let mut obj = body;
        request_namespace(def, url_ns, &mut obj)?;
        let (mut obj, warnings) = Self::normalize(def, obj, None, opts, "")?;
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        let object = match def.kind.as_str() {
            "SelfSubjectRulesReview" => self.rules_review(&obj, user)?,
            "SelfSubjectReview" => self_subject_review(user),
            kind => {
                let (question, subject) = access_review(kind, &obj, user)?;
                let decision = rbac::decide(self, &subject, &question.asked());
                let mut status = json!({"allowed": decision.allowed});
                if !decision.reason.is_empty() {
                    status["reason"] = json!(decision.reason);
                }
                let managed = managed_fields(def, &obj, opts);
                with_meta(&mut obj, |m| {
                    m.insert("creationTimestamp".into(), Value::Null);
                    if let Some(mf) = managed {
                        m.insert("managedFields".into(), mf);
                    }
                });
                obj["status"] = status;
                obj
            }
        };
        Ok(Written {
            object,
            warnings,
            created: true,
        })
    }

    /// A SelfSubjectRulesReview's answer: a new object holding the rules alone, as
    /// kube-apiserver builds it (the spec it was asked with is not sent back).
    fn rules_review(&self, obj: &Value, user: &User) -> Result<Value, ErrorStatus> {
        let namespace = obj
            .pointer("/spec/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if namespace.is_empty() {
            return Err(ErrorStatus::bad_request("no namespace on request"));
        }
        let rules = rbac::rules_for(self, user, namespace);
        let mut status = json!({
            "resourceRules": rules.resource,
            "nonResourceRules": rules.non_resource,
            "incomplete": false,
        });
        if !rules.error.is_empty() {
            status["evaluationError"] = json!(rules.error);
        }
        Ok(json!({
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"creationTimestamp": null},
            "spec": {},
            "status": status,
        }))
    }
}

/// The field manager's record of the request: the fields it sets that an empty
/// review does not have, as kube-apiserver's field manager compares the request with
/// a new object of its kind (whose status says `allowed: false`).
fn managed_fields(def: &ResourceDef, obj: &Value, opts: &WriteOpts) -> Option<Value> {
    let manager = opts.field_manager.as_deref().unwrap_or_default();
    let empty = json!({"metadata": {}, "spec": {}, "status": {"allowed": false}});
    track_update(def, Some(&empty), obj, manager, false)
}

/// The namespace of the request on the object, as kube-apiserver's create handler
/// puts it there: a namespaced review takes the URL's (a different one is a 400), a
/// cluster-scoped one loses any.
fn request_namespace(def: &ResourceDef, url_ns: Option<&str>, obj: &mut Value) -> Result<(), ErrorStatus> {
    let url_ns = url_ns.unwrap_or_default().to_owned();
    let body_ns = meta_str(obj, "namespace").to_owned();
    if def.namespaced && !body_ns.is_empty() && body_ns != url_ns {
        return Err(ErrorStatus::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if obj.get("metadata").is_some_and(Value::is_object) || def.namespaced {
        with_meta(obj, |m| {
            if def.namespaced {
                m.insert("namespace".into(), json!(url_ns));
            } else {
                m.remove("namespace");
            }
        });
    }
    Ok(())
}

/// A SelfSubjectReview's answer: who the request was made by.
fn self_subject_review(user: &User) -> Value {
    let mut info = serde_json::Map::new();
    if !user.name.is_empty() {
        info.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        info.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        info.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        info.insert("extra".into(), json!(user.extra));
    }
    json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": now()},
        "status": {"userInfo": info},
    })
}

/// The attributes an access review asks about, owned.
enum Question {
    /// verb, group, resource, subresource, namespace, name.
    Resource([String; 6]),
    /// verb, path.
    NonResource([String; 2]),
}

impl Question {
    fn asked(&self) -> Asked<'_> {
        match self {
            Self::Resource([verb, group, resource, subresource, namespace, name]) => {
                Asked::Resource(Attributes {
                    verb,
                    group,
                    resource,
                    subresource,
                    namespace,
                    name,
                })
            }
            Self::NonResource([verb, path]) => Asked::NonResource(NonResourceAttributes { verb, path }),
        }
    }
}

/// What an access review of `kind` asks, and about whom (`user` for the self
/// review, the spec's user and groups otherwise); kube-apiserver's validation
/// first, whose 422 names no kind (the decoded object's kind is empty there).
fn access_review(kind: &str, obj: &Value, user: &User) -> Result<(Question, User), ErrorStatus> {
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let field = |k: &str| spec.get(k).filter(|v| !v.is_null());
    let (resource, non_resource) = (field("resourceAttributes"), field("nonResourceAttributes"));
    let mut errs = Vec::new();
    if let (Some(_), Some(n)) = (resource, non_resource) {
        errs.push(FieldError::invalid_raw(
            "spec.nonResourceAttributes",
            non_resource_struct(n),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if resource.is_none() && non_resource.is_none() {
        errs.push(FieldError::invalid(
            "spec.resourceAttributes",
            json!("null"),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let subject = if kind == "SelfSubjectAccessReview" {
        user.clone()
    } else {
        let groups: Vec<String> = field("groups")
            .and_then(Value::as_array)
            .map(|g| g.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        if text(&spec, "user").is_empty() && groups.is_empty() {
            errs.push(FieldError::invalid(
                "spec.user",
                json!(text(&spec, "user")),
                "at least one of user or group must be specified",
            ));
        }
        User::new(text(&spec, "user"), groups)
    };
    check_metadata(kind, obj, resource, non_resource, &mut errs);
    if !errs.is_empty() {
        return Err(ErrorStatus::invalid(AUTHORIZATION, "", "", errs));
    }
    let question = match (resource, non_resource) {
        (Some(r), _) => Question::Resource(
            ["verb", "group", "resource", "subresource", "namespace", "name"].map(|k| text(r, k)),
        ),
        (None, n) => Question::NonResource(["verb", "path"].map(|k| text(n.unwrap_or(&Value::Null), k))),
    };
    Ok((question, subject))
}

/// Access reviews carry no metadata (a LocalSubjectAccessReview its namespace, which
/// its question must be in, and no question about a path).
fn check_metadata(
    kind: &str,
    obj: &Value,
    resource: Option<&Value>,
    non_resource: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    let mut meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let local = kind == "LocalSubjectAccessReview";
    let namespace = meta_str(obj, "namespace").to_owned();
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
        if local {
            m.remove("namespace");
        }
    }
    if meta.as_object().is_some_and(|m| !m.is_empty()) {
        let mut shown = meta.clone();
        if local {
            shown["namespace"] = json!(namespace);
        }
        let detail = if local {
            "must be empty except for namespace"
        } else {
            "must be empty"
        };
        errs.push(FieldError::invalid_raw(
            "metadata",
            go_object_meta(&shown),
            detail,
        ));
    }
    if !local {
        return;
    }
    if let Some(r) = resource {
        let asked = r.get("namespace").and_then(Value::as_str).unwrap_or_default();
        if asked != namespace {
            errs.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                json!(asked),
                "must match metadata.namespace",
            ));
        }
    }
    if let Some(n) = non_resource {
        errs.push(FieldError::invalid_raw(
            "spec.nonResourceAttributes",
            non_resource_struct(n),
            "disallowed on this kind of request",
        ));
    }
}

/// `NonResourceAttributes` as Go's `%#v` prints the internal struct.
fn non_resource_struct(n: &Value) -> String {
    let text = |k: &str| go_value(&json!(n.get(k).and_then(Value::as_str).unwrap_or_default()));
    format!(
        "authorization.NonResourceAttributes{{Path:{}, Verb:{}}}",
        text("path"),
        text("verb")
    )
}
