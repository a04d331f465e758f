//! Server-side apply (`application/apply-patch+yaml`).

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::object_meta::{meta_str, with_meta};
use crate::registry::Registry;
use crate::registry::managed_fields::{apply as merge_applied, parse_body};
use crate::registry::options::{WriteOpts, Written};
use crate::registry::preconditions::check_resource_version;
use crate::registry::resource::ResourceDef;
use crate::store::ObjKey;

use super::status_rule;

impl Registry {
    /// Server-side apply: creates the object when missing, else merges and records
    /// field ownership.
    pub(super) fn apply(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        status_only: bool,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        let manager = apply_manager(opts)?;
        let applied = self.applied_object(def, ns, name, body)?;
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            if status_only {
                return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
            }
            let a = merge_applied(def, None, &applied, &manager, opts.force, false)?;
            let opts = WriteOpts {
                managed_fields: Some(a.managed_fields),
                ..opts.clone()
            };
            return self.create(def, def.namespaced.then_some(ns), a.object, &opts);
        };
        check_resource_version(def, name, &existing, meta_str(&applied, "resourceVersion"))?;
        let live = Self::present(def, &existing);
        let a = merge_applied(def, Some(&live), &applied, &manager, opts.force, status_only)?;
        let new = status_rule(def, &existing, a.object, status_only);
        let opts = WriteOpts {
            managed_fields: Some(a.managed_fields),
            ..opts.clone()
        };
        self.finish_update(def, &key, &existing, new, &opts, status_only)
    }

    /// The applied configuration, checked against the endpoint and named by the URL.
    fn applied_object(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
    ) -> Result<Value, ErrorStatus> {
        let mut applied = parse_body(body)?;
        if !applied.is_object() {
            return Err(ErrorStatus::bad_request(
                "the body of an apply patch must be an object",
            ));
        }
        if applied
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ErrorStatus::bad_request(format!(
                "Object 'Kind' is missing in '{}'",
                String::from_utf8_lossy(body)
            )));
        }
        self.check_type(def, &applied, true)?;
        let body_name = meta_str(&applied, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ErrorStatus::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_ns = meta_str(&applied, "namespace");
        if def.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ErrorStatus::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        with_meta(&mut applied, |m| {
            m.insert("name".into(), json!(name));
            if def.namespaced {
                m.insert("namespace".into(), json!(ns));
            }
        });
        Ok(applied)
    }
}

/// The manager an apply is made for: apply requires one named explicitly.
fn apply_manager(opts: &WriteOpts) -> Result<String, ErrorStatus> {
    opts.field_manager
        .clone()
        .filter(|m| opts.explicit_manager && !m.is_empty())
        .ok_or_else(|| {
            ErrorStatus::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            )
        })
}
