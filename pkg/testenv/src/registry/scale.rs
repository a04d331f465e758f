//! The `scale` subresource (`autoscaling/v1` Scale) of Deployments and of custom
//! resources whose CRD declares one, as `kubectl scale` and autoscalers use it.

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::store::ObjKey;

use super::Registry;
use super::options::WriteOpts;
use super::preconditions::check_resource_version;
use super::resource::{ResourceDef, ScalePaths};

/// A LabelSelector object as its string form (`app=web,tier in (a,b)`), keys sorted as
/// apimachinery's `LabelSelectorAsSelector(...).String()` prints them.
fn selector_string(sel: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|vs| vs.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        values.sort_unstable();
        let text = match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_owned(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key.to_owned(), text));
    }
    reqs.sort();
    reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",")
}

fn to_scale(def: &ResourceDef, paths: &ScalePaths, obj: &Value) -> Value {
    let int = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let meta = |k: &str| {
        obj.pointer(&format!("/metadata/{k}"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut status = json!({"replicas": int(&paths.status_replicas)});
    if let Some(sel) = paths.label_selector.as_deref().and_then(|p| obj.pointer(p)) {
        let text = match (def.builtin(), sel) {
            // A ReplicationController's selector is a bare label map, the apps kinds'
            // a LabelSelector.
            (Some(_), s) if def.group.is_empty() => selector_string(&json!({"matchLabels": s})),
            (Some(_), s) => selector_string(s),
            (_, Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        if !text.is_empty() {
            status["selector"] = json!(text);
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta("name"),
            "namespace": meta("namespace"),
            "uid": meta("uid"),
            "resourceVersion": meta("resourceVersion"),
            "creationTimestamp": meta("creationTimestamp"),
        },
        "spec": {"replicas": int(&paths.spec_replicas)},
        "status": status,
    })
}

fn paths(def: &ResourceDef) -> Result<&ScalePaths, ErrorStatus> {
    def.scale.as_ref().ok_or_else(ErrorStatus::unknown_path)
}

/// Sets the value at a JSON pointer, creating objects on the way.
fn set_pointer(obj: &mut Value, pointer: &str, v: Value) {
    let mut cur = obj;
    let segs: Vec<&str> = pointer.split('/').skip(1).collect();
    for (i, seg) in segs.iter().enumerate() {
        let Some(m) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == segs.len() {
            m.insert((*seg).to_owned(), v);
            return;
        }
        cur = m
            .entry((*seg).to_owned())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
}

impl Registry {
    pub(crate) fn scale_get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Value, ErrorStatus> {
        let p = paths(def)?;
        let obj = self.get(def, ns, name)?;
        Ok(to_scale(def, p, &obj))
    }

    /// Writes a Scale: its `spec.replicas` goes into the object's replica field.
    pub(crate) fn scale_write(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        scale: &Value,
        opts: &WriteOpts,
    ) -> Result<Value, ErrorStatus> {
        let p = paths(def)?.clone();
        let body_name = scale
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(name);
        if body_name != name {
            return Err(ErrorStatus::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
        if replicas.as_i64().is_none_or(|r| r < 0) {
            return Err(ErrorStatus::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![FieldError::invalid(
                    "spec.replicas",
                    replicas,
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
        };
        let rv = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        check_resource_version(def, name, &existing, rv)?;
        let mut obj = Self::present(def, &existing);
        set_pointer(&mut obj, &p.spec_replicas, replicas);
        let w = self.finish_update(def, &key, &existing, obj, opts, false)?;
        Ok(to_scale(def, &p, &w.object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_sorted() {
        let sel = json!({"matchLabels": {"tier": "web", "app": "a"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]});
        assert_eq!(selector_string(&sel), "app=a,env in (dev,prod),tier=web");
    }
}
