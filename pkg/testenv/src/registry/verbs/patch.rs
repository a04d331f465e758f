//! `PATCH` of an object or its `status` with a JSON, merge or strategic merge patch.

use kinject_types::go_quote;
use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::go_format::go_map_string;
use crate::object_meta::meta_str;
use crate::patches::{self, PatchError, PatchType};
use crate::registry::Registry;
use crate::registry::builtin_rules::merge_keys::list_strategy;
use crate::registry::options::{FieldValidation, WriteOpts, Written};
use crate::registry::preconditions::check_resource_version;
use crate::registry::resource::ResourceDef;
use crate::store::ObjKey;

use super::status_rule;

impl Registry {
    /// `PATCH` of an object or its `status`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        status_only: bool,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        if ptype == PatchType::Apply {
            return self.apply(def, ns, name, body, status_only, opts);
        }
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
        };
        let current = Self::present(def, &existing);
        let patched = match ptype {
            PatchType::Json => {
                patches::json_patch(&current, body, opts.validation != FieldValidation::Ignore)
            }
            PatchType::Merge => patches::merge_patch(&current, body),
            PatchType::Strategic => match def.builtin() {
                Some(b) => patches::strategic_merge_patch(&|path| list_strategy(b, path), &current, body),
                None => return Err(unsupported_patch_type(def)),
            },
            PatchType::Apply => unreachable_apply(),
        }?;
        if let Some(b) = def.builtin()
            && let Err(e) =
                crate::timestamps::normalize_micro_times(&mut patched.clone(), b.micro_time_paths())
        {
            return Err(patch_decode_error(ptype, &patched, body, &e));
        }
        if meta_str(&patched, "name") != name {
            return Err(ErrorStatus::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&patched, "name")
            )));
        }
        if def.namespaced && meta_str(&patched, "namespace") != ns {
            return Err(ErrorStatus::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        self.check_type(def, &patched, false)?;
        check_resource_version(def, name, &existing, meta_str(&patched, "resourceVersion"))?;
        let uid = meta_str(&patched, "uid");
        if uid != meta_str(&existing, "uid") {
            return Err(ErrorStatus::invalid(
                &def.group,
                &def.kind,
                name,
                vec![FieldError::invalid(
                    "metadata.uid",
                    json!(uid),
                    "field is immutable",
                )],
            ));
        }
        let new = status_rule(def, &existing, patched, status_only);
        self.finish_update(def, &key, &existing, new, opts, status_only)
    }
}

/// kube-apiserver's answer when a patched built-in does not decode: a 422 about the
/// field `patch`, quoting the patched object (JSON and merge patches) or the patch as Go
/// prints a map (strategic merge patches).
fn patch_decode_error(ptype: PatchType, patched: &Value, body: &[u8], why: &str) -> ErrorStatus {
    let shown = match ptype {
        PatchType::Strategic => serde_json::from_slice::<Value>(body)
            .map(|p| go_map_string(&p))
            .unwrap_or_default(),
        _ => patched.to_string(),
    };
    ErrorStatus::invalid(
        "",
        "",
        "",
        vec![FieldError::invalid_raw("patch", go_quote(&shown), why)],
    )
}

/// Apply patches are routed to `Registry::apply` before the patch-type dispatch.
fn unreachable_apply() -> Result<Value, PatchError> {
    Err(PatchError::Decode("apply patches are handled separately".into()))
}

/// The 415 for a patch type the resource does not take.
pub(crate) fn unsupported_patch_type(def: &ResourceDef) -> ErrorStatus {
    let mut types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if !def.is_custom() {
        types.push("application/strategic-merge-patch+json");
    }
    ErrorStatus::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        types.join(", ")
    ))
}
