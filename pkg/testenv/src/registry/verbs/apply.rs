//! Server-side apply (`application/apply-patch+yaml`).

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::object_meta::{meta_str, with_meta};
use crate::store::ObjKey;

use crate::registry::Registry;
use crate::registry::options::{WriteOpts, Written};
use crate::registry::preconditions::check_resource_version;
use crate::registry::resource::ResourceDef;

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
        let Some(manager) = opts
            .field_manager
            .clone()
            .filter(|m| opts.explicit_manager && !m.is_empty())
        else {
            return Err(ErrorStatus::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        };
        let mut applied = crate::registry::managed_fields::parse_body(body)?;
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
        let body_name = meta_str(&applied, "name").to_owned();
        if !body_name.is_empty() && body_name != name {
            return Err(ErrorStatus::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_ns = meta_str(&applied, "namespace").to_owned();
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
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            if status_only {
                return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
            }
            let a = crate::registry::managed_fields::apply(def, None, &applied, &manager, opts.force, false)?;
            let opts = WriteOpts {
                managed_fields: Some(a.managed_fields),
                ..opts.clone()
            };
            return self.create(def, def.namespaced.then_some(ns), a.object, &opts);
        };
        check_resource_version(def, name, &existing, meta_str(&applied, "resourceVersion"))?;
        let live = Self::present(def, &existing);
        let a = crate::registry::managed_fields::apply(
            def,
            Some(&live),
            &applied,
            &manager,
            opts.force,
            status_only,
        )?;
        let new = if status_only {
            let mut n = (*existing).clone();
            match a.object.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            n
        } else {
            let mut n = a.object;
            if def.status {
                match existing.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            n
        };
        let opts = WriteOpts {
            managed_fields: Some(a.managed_fields),
            ..opts.clone()
        };
        self.finish_update(def, &key, &existing, new, &opts, status_only)
    }
}
