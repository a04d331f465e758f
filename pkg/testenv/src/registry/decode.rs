//! Request bodies decoded as kube-apiserver decodes them: `apiVersion` and `kind`
//! checked against the endpoint, a typed round trip for built-in kinds, the structural
//! schema for custom resources, unknown fields reported.

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::object_meta::meta_str;

use super::Registry;
use super::options::{FieldValidation, WriteOpts};
use super::resource::{KindImpl, ResourceDef};
use super::schema::Schema;

impl Registry {
    /// Checks `apiVersion`/`kind` in a body against the endpoint. `request_body` is
    /// true for a create or update body (the handler's API version check, a 400), false
    /// for the result of a patch (only the validation of custom resources sees it).
    pub(super) fn check_type(
        &self,
        def: &ResourceDef,
        body: &Value,
        request_body: bool,
    ) -> Result<(), ErrorStatus> {
        if !body.is_object() {
            return Err(ErrorStatus::bad_request(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (expected a {} object)",
                def.kind
            )));
        }
        let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
        let av_mismatch = if def.is_custom() && request_body {
            av != def.api_version()
        } else {
            !av.is_empty() && av != def.api_version()
        };
        if av_mismatch && (request_body || !def.is_custom()) {
            return Err(ErrorStatus::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                def.api_version()
            )));
        }
        if def.is_custom() {
            // The custom resource validator's type check: a 422 about `kind` and
            // `apiVersion`, reported for the kind the object claims to be.
            let mut errs = Vec::new();
            if kind != def.kind {
                errs.push(FieldError::invalid(
                    "kind",
                    json!(kind),
                    format!("must be {}", def.kind),
                ));
            }
            if av != def.api_version() {
                errs.push(FieldError::invalid(
                    "apiVersion",
                    json!(av),
                    format!("must be {}", def.api_version()),
                ));
            }
            if !errs.is_empty() {
                let claimed = if kind.is_empty() { def.kind.as_str() } else { kind };
                return Err(ErrorStatus::invalid(
                    &def.group,
                    claimed,
                    meta_str(body, "name"),
                    errs,
                ));
            }
            return Ok(());
        }
        if !kind.is_empty() && kind != def.kind {
            // The decoder builds the kind the body names and fails to convert it to the
            // endpoint's type.
            let (group, version) = if av.is_empty() {
                (def.group.as_str(), def.version.as_str())
            } else {
                av.rsplit_once('/').unwrap_or(("", av))
            };
            let why = match self.find_kind(av_or(av, def).as_str(), kind) {
                Some(_) => format!(
                    "converting ({version}.{kind}) to ({}.{}): unknown conversion",
                    internal_package(&def.group),
                    def.kind
                ),
                None => format!(
                    "no kind \"{kind}\" is registered for version \"{}\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\"",
                    if group.is_empty() {
                        version.to_owned()
                    } else {
                        format!("{group}/{version}")
                    }
                ),
            };
            return Err(ErrorStatus::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {}: {why}",
                def.kind
            )));
        }
        Ok(())
    }

    /// Decodes like kube-apiserver: typed round trip for built-ins, structural schema for
    /// custom resources; unknown fields warn, fail (Strict) or vanish (Ignore). On an
    /// update, `old` is the stored object: schema errors at values the update left as
    /// they were are ratcheted away (CRDValidationRatcheting, GA in 1.33), so an object
    /// stored before its schema tightened can still have its status written.
    pub(super) fn normalize(
        def: &ResourceDef,
        obj: Value,
        old: Option<&Value>,
        opts: &WriteOpts,
        name: &str,
    ) -> Result<(Value, Vec<String>), ErrorStatus> {
        let (out, unknown, errors) = match &def.imp {
            KindImpl::Builtin(b, roundtrip) => {
                let mut obj = obj;
                crate::timestamps::normalize_micro_times(&mut obj, b.micro_time_paths()).map_err(|e| {
                    ErrorStatus::bad_request(format!(
                        "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
                        kind = def.kind,
                        v = def.version
                    ))
                })?;
                let out = roundtrip(&obj)
                    .and_then(|out| {
                        // k8s-openapi keeps a quantity as any string; Go's decoder parses it.
                        match crate::registry::builtin_rules::validation::unparsable_quantity(&obj) {
                            Some(why) => Err(why.to_owned()),
                            None => Ok(out),
                        }
                    })
                    .map_err(|e| {
                        ErrorStatus::bad_request(format!(
                            "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
                            kind = def.kind,
                            v = def.version
                        ))
                    })?;
                let mut unknown = Vec::new();
                unknown_fields(&obj, &out, "", &mut unknown);
                (out, unknown, Vec::new())
            }
            KindImpl::Custom(schema) => {
                let (out, unknown, mut errors) = Self::normalize_custom(def, schema, obj)?;
                if let Some(old) = old {
                    errors.retain(|e| !crate::registry::schema::ratcheted(e, old, &out));
                }
                let rule_errors = schema.rule_errors(&out, old, &errors);
                errors.extend(rule_errors);
                (out, unknown, errors)
            }
        };
        if !errors.is_empty() && !opts.skip_validation {
            return Err(ErrorStatus::invalid(&def.group, &def.kind, name, errors));
        }
        let msgs: Vec<String> = unknown.iter().map(|u| format!("unknown field \"{u}\"")).collect();
        match opts.validation {
            FieldValidation::Strict if !msgs.is_empty() => Err(ErrorStatus::bad_request(format!(
                "strict decoding error: {}",
                msgs.join(", ")
            ))),
            FieldValidation::Warn => Ok((out, msgs)),
            _ => Ok((out, Vec::new())),
        }
    }

    fn normalize_custom(
        def: &ResourceDef,
        schema: &Schema,
        mut obj: Value,
    ) -> Result<(Value, Vec<String>, Vec<FieldError>), ErrorStatus> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let meta_in = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let meta: ObjectMeta = serde_json::from_value(meta_in.clone()).map_err(|e| {
            ErrorStatus::bad_request(format!(
                "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
                kind = def.kind,
                v = def.version
            ))
        })?;
        let meta_out = serde_json::to_value(meta).unwrap_or_else(|_| json!({}));
        let mut unknown = Vec::new();
        unknown_fields(&meta_in, &meta_out, "metadata", &mut unknown);
        obj["metadata"] = meta_out;
        let checked = schema.apply(&mut obj);
        unknown.extend(checked.unknown);
        Ok((obj, unknown, checked.errors))
    }
}

/// Keys present in `input` but dropped by the typed round trip: unknown fields.
fn unknown_fields(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match o.get(k) {
                    Some(ov) => unknown_fields(v, ov, &p, out),
                    None if !v.is_null() => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (n, (iv, ov)) in i.iter().zip(o).enumerate() {
                unknown_fields(iv, ov, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// A body's apiVersion, defaulted from the endpoint when absent.
fn av_or(av: &str, def: &ResourceDef) -> String {
    if av.is_empty() {
        def.api_version()
    } else {
        av.to_owned()
    }
}

/// The Go package of a built-in group's internal types, as conversion errors name it.
fn internal_package(group: &str) -> &str {
    match group {
        "" | "events.k8s.io" => "core",
        "apiextensions.k8s.io" => "apiextensions",
        g => g.split('.').next().unwrap_or(g),
    }
}
