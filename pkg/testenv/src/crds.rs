//! CustomResourceDefinitions: validation, the status the apiextensions controllers set,
//! and serving (or no longer serving) their resources.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::crd::Schema;
use crate::errors::{ErrorStatus, FieldError};
use crate::object_meta::{has_finalizer, is_deleting};
use crate::resource::{Column, KindImpl, ResourceDef};
use crate::state::State;
use crate::store::{ObjKey, ResKey};
use crate::timestamps::now;

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The checks of apiextensions' CRD validation that decide whether it can be served.
pub(crate) fn validate(crd: &Value, name: &str) -> Result<(), ErrorStatus> {
    let mut errs = Vec::new();
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    }
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if s(crd, "/spec/names/kind").is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = s(crd, "/spec/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        errs.push(FieldError::not_supported(
            "spec.scope",
            json!(scope),
            &["Cluster".to_owned(), "Namespaced".to_owned()],
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    } else {
        let storage = versions
            .iter()
            .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .count();
        if storage != 1 {
            errs.push(FieldError::invalid(
                "spec.versions",
                Value::Null,
                "must have exactly one version marked as storage version",
            ));
        }
        for (i, v) in versions.iter().enumerate() {
            let name = s(v, "/name");
            let why = kinject_types::validation::is_dns1035_label(name);
            if !why.is_empty() {
                errs.push(FieldError::invalid(
                    format!("spec.versions[{i}].name"),
                    json!(name),
                    why.join(","),
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        if !versions.iter().all(|v| seen.insert(s(v, "/name"))) {
            errs.push(FieldError::invalid(
                "spec.versions",
                Value::Null,
                "must contain unique version names",
            ));
        }
        for (i, v) in versions.iter().enumerate() {
            match v.pointer("/schema/openAPIV3Schema") {
                None => errs.push(FieldError::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "schemas are required",
                )),
                Some(schema) => check_schema(
                    schema,
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    Level::Root,
                    &mut errs,
                ),
            }
        }
    }
    check_printer_columns(versions, &mut errs);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ErrorStatus::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            errs,
        ))
    }
}

/// A version's printer columns as apiextensions' internal version compares them, where
/// an absent field and its zero value are the same.
fn columns_of(version: &Value) -> Vec<(&str, &str, &str, &str, i64, &str)> {
    version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                s(c, "/name"),
                s(c, "/type"),
                s(c, "/format"),
                s(c, "/description"),
                c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                s(c, "/jsonPath"),
            )
        })
        .collect()
}

const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// `ValidateCustomResourceColumnDefinition`. The v1 CRD is validated in apiextensions'
/// internal version, which holds columns that every version shares once, at
/// `spec.additionalPrinterColumns`: the errors name that path then.
fn check_printer_columns(versions: &[Value], errs: &mut Vec<FieldError>) {
    let Some(first) = versions.first() else {
        return;
    };
    let shared = columns_of(first);
    let lists: Vec<(String, Vec<_>)> = if versions.iter().all(|v| columns_of(v) == shared) {
        vec![("spec.additionalPrinterColumns".to_owned(), shared)]
    } else {
        versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                (
                    format!("spec.versions[{i}].additionalPrinterColumns"),
                    columns_of(v),
                )
            })
            .collect()
    };
    for (path, columns) in lists {
        for (i, (name, ty, format, _, _, json_path)) in columns.into_iter().enumerate() {
            let at = format!("{path}[{i}]");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{at}.name"), ""));
            }
            if ty.is_empty() {
                errs.push(FieldError::required(
                    format!("{at}.type"),
                    format!("must be one of {COLUMN_TYPES}"),
                ));
            } else if !COLUMN_TYPES.split(',').any(|t| t == ty) {
                errs.push(FieldError::invalid(
                    format!("{at}.type"),
                    json!(ty),
                    format!("must be one of {COLUMN_TYPES}"),
                ));
            }
            if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
                errs.push(FieldError::invalid(
                    format!("{at}.format"),
                    json!(format),
                    format!("must be one of {}", COLUMN_FORMATS.join(",")),
                ));
            }
            // The internal type's Go field name, not the JSON one, names the path.
            if json_path.is_empty() {
                errs.push(FieldError::required(format!("{at}.JSONPath"), ""));
            } else if !json_path.starts_with('.') {
                errs.push(FieldError::invalid(
                    format!("{at}.JSONPath"),
                    json!(json_path),
                    "must be a simple json path starting with .",
                ));
            }
        }
    }
}

/// The columns kube-apiserver's table convertor serves for a version: Age when the
/// version has none; otherwise the columns up to the first whose JSONPath does not
/// parse, as kube-apiserver keeps the convertor it had built when it gave up.
fn printer_columns(version: &Value) -> Vec<Column> {
    let given = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if given.is_empty() {
        return crate::jsonpath::JsonPath::parse("{.metadata.creationTimestamp}")
            .map(|path| Column {
                name: "Age".into(),
                ty: "date".into(),
                format: String::new(),
                description: crate::table::CREATION_TIMESTAMP_DESCRIPTION.into(),
                priority: 0,
                path,
            })
            .into_iter()
            .collect();
    }
    given
        .iter()
        .map_while(|c| {
            let json_path = s(c, "/jsonPath");
            let path = crate::jsonpath::JsonPath::parse(&format!("{{{json_path}}}")).ok()?;
            let description = match s(c, "/description") {
                "" => format!("Custom resource definition column (in JSONPath format): {json_path}"),
                d => d.to_owned(),
            };
            Some(Column {
                name: s(c, "/name").to_owned(),
                ty: s(c, "/type").to_owned(),
                format: s(c, "/format").to_owned(),
                description,
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path,
            })
        })
        .collect()
}

/// Where a schema sits in its structural schema, which words a missing `type`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Field,
    Item,
}

/// The structural-schema rules v1 CRDs must meet, as far as testenv checks them:
/// every node has a `type` (unless it is int-or-string or preserves unknown fields),
/// the root is an object, embedded resources are objects, every `pattern` compiles,
/// and every `default` is valid for its schema and pruned.
fn check_schema(schema: &Value, path: &str, lvl: Level, errs: &mut Vec<FieldError>) {
    let flag = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
    let ty = s(schema, "/type");
    let embedded = flag("x-kubernetes-embedded-resource");
    if embedded && ty != "object" {
        let msg = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if ty.is_empty() {
            FieldError::required(format!("{path}.type"), msg)
        } else {
            FieldError::invalid(format!("{path}.type"), json!(ty), msg)
        });
    } else if ty.is_empty()
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Field => "must not be empty for specified object fields",
            Level::Item => "must not be empty for specified array items",
        };
        errs.push(FieldError::required(format!("{path}.type"), msg));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            json!(ty),
            "must be object at the root",
        ));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str)
        && !p.is_empty()
        && let Err(e) = regex::Regex::new(p)
    {
        errs.push(FieldError::invalid(
            format!("{path}.pattern"),
            json!(p),
            format!(
                "must be a valid regular expression, but isn't: error parsing regexp: {}",
                regexp_error(p, &e)
            ),
        ));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            check_schema(sub, &format!("{path}.properties[{k}]"), Level::Field, errs);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        check_schema(items, &format!("{path}.items"), Level::Item, errs);
    }
    if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        check_schema(add, &format!("{path}.additionalProperties"), Level::Field, errs);
    }
    if let Some(d) = schema.get("default") {
        errs.extend(crate::crd::check_default(schema, d, &format!("{path}.default")));
    }
}

/// The reason Go's `regexp` gives for a pattern the `regex` crate refuses, for the
/// common mistakes; otherwise the `regex` crate's own words.
fn regexp_error(p: &str, e: &regex::Error) -> String {
    let text = e.to_string();
    let why = text
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or(text.as_str());
    if why.contains("unclosed group") {
        format!("missing closing ): `{p}`")
    } else if why.contains("unopened group") {
        format!("unexpected ): `{p}`")
    } else if why.contains("unclosed character class") {
        let from = p.rfind('[').unwrap_or(0);
        format!("missing closing ]: `{}`", &p[from..])
    } else if why.contains("repetition operator missing expression") {
        let op = p
            .char_indices()
            .find(|(_, c)| matches!(c, '*' | '+' | '?'))
            .map_or("", |(i, c)| &p[i..i + c.len_utf8()]);
        format!("missing argument to repetition operator: `{op}`")
    } else if why.contains("look-around") {
        let at = p.find("(?").unwrap_or(0);
        let end = p[at..].char_indices().nth(3).map_or(p.len(), |(i, _)| at + i);
        format!("invalid or unsupported Perl syntax: `{}`", &p[at..end])
    } else {
        why.to_owned()
    }
}

/// Sets the status the apiextensions controllers would: names accepted, established.
pub(crate) fn accept(crd: &mut Value) {
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let kind = s(crd, "/spec/names/kind").to_owned();
    if s(&names, "/singular").is_empty() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if s(&names, "/listKind").is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let t = now();
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": t,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ],
        "storedVersions": storage,
    });
}

/// The resource definitions a CRD serves, one per served version.
pub(crate) fn defs(crd: &Value) -> Vec<ResourceDef> {
    let group = s(crd, "/spec/group");
    let kind = s(crd, "/spec/names/kind");
    let plural = s(crd, "/spec/names/plural");
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        x => x.to_owned(),
    };
    let list_kind = match s(crd, "/spec/names/listKind") {
        "" => format!("{kind}List"),
        x => x.to_owned(),
    };
    let strings = |ptr: &str| -> Vec<String> {
        crd.pointer(ptr)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
        .map(|v| {
            let columns = printer_columns(v);
            ResourceDef {
                group: group.to_owned(),
                version: s(v, "/name").to_owned(),
                plural: plural.to_owned(),
                singular: singular.clone(),
                kind: kind.to_owned(),
                list_kind: list_kind.clone(),
                namespaced: s(crd, "/spec/scope") == "Namespaced",
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status: v.pointer("/subresources/status").is_some(),
                generation: true,
                allow_create_on_update: false,
                allow_unconditional_update: false,
                return_deleted_object: false,
                deletecollection: true,
                imp: KindImpl::Custom(Arc::new(Schema {
                    root: v.pointer("/schema/openAPIV3Schema").cloned().unwrap_or_else(
                        || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                    ),
                })),
                columns,
                scale: v
                    .pointer("/subresources/scale")
                    .map(|sc| crate::resource::ScalePaths {
                        spec_replicas: crate::resource::json_path_pointer(s(sc, "/specReplicasPath")),
                        status_replicas: crate::resource::json_path_pointer(s(sc, "/statusReplicasPath")),
                        label_selector: Some(s(sc, "/labelSelectorPath"))
                            .filter(|p| !p.is_empty())
                            .map(crate::resource::json_path_pointer),
                    }),
            }
        })
        .collect()
}

impl State {
    /// Serves what a stored CRD defines, replacing what it defined before.
    pub(crate) fn sync_crd(&mut self, crd: &Value) {
        let group = s(crd, "/spec/group").to_owned();
        let plural = s(crd, "/spec/names/plural").to_owned();
        self.resources
            .retain(|d| !(d.is_custom() && d.group == group && d.plural == plural));
        self.resources.extend(defs(crd).into_iter().map(Arc::new));
        self.store.open_window(&ResKey::new(&group, &plural));
    }

    /// Deletes every instance of a CRD's resource and stops serving it.
    pub(crate) fn drop_crd(&mut self, crd: &Value) {
        let group = s(crd, "/spec/group").to_owned();
        let plural = s(crd, "/spec/names/plural").to_owned();
        let res = ResKey::new(&group, &plural);
        let keys: Vec<ObjKey> = self.store.iter(&res).map(|(k, _)| k.clone()).collect();
        for k in keys {
            self.store.remove(&res, &k);
        }
        self.store.drop_resource(&res);
        self.resources
            .retain(|d| !(d.is_custom() && d.group == group && d.plural == plural));
    }
}

/// The finalizer with which kube-apiserver holds a deleted CRD until its instances are gone.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// apiextensions' `SetCRDCondition`: the transition time moves only when the status does.
/// Returns whether anything changed.
fn set_condition(crd: &mut Value, kind: &str, status: &str, reason: &str, message: &str) -> bool {
    let Some(top) = crd.as_object_mut() else {
        return false;
    };
    let block = top.entry("status").or_insert_with(|| json!({}));
    if !block.is_object() {
        *block = json!({});
    }
    let Some(block) = block.as_object_mut() else {
        return false;
    };
    let conds = block.entry("conditions").or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(conds) = conds.as_array_mut() else {
        return false;
    };
    let wanted = |t: String| {
        json!({"type": kind, "status": status, "lastTransitionTime": t,
        "reason": reason, "message": message})
    };
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    {
        Some(c) => {
            let same_status = c.get("status").and_then(Value::as_str) == Some(status);
            let t = if same_status {
                c.get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .map_or_else(now, str::to_owned)
            } else {
                now()
            };
            let new = wanted(t);
            if *c == new {
                return false;
            }
            *c = new;
        }
        None => conds.push(wanted(now())),
    }
    true
}

/// Whether a CRD is being torn down: kube-apiserver then refuses new instances.
pub(crate) fn is_terminating(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Terminating")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

impl State {
    /// The first `DELETE` of a CRD, as the CRD registry answers it: only the deletion
    /// timestamp, the cleanup finalizer and a `Terminating` condition are written (no
    /// grace period, no new generation); the finalizer controller does the rest.
    pub(crate) fn mark_crd_deleted(
        &mut self,
        def: &ResourceDef,
        key: &ObjKey,
        existing: &Value,
        dry_run: bool,
    ) -> Value {
        let mut crd = existing.clone();
        if let Some(meta) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("deletionTimestamp".into(), json!(now()));
            let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(list) = fins.as_array_mut()
                && !list.iter().any(|f| f == CLEANUP_FINALIZER)
            {
                list.push(json!(CLEANUP_FINALIZER));
            }
        }
        set_condition(
            &mut crd,
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        );
        if dry_run {
            return Self::present(def, &crd);
        }
        let stored = self.store.put(&def.key(), key.clone(), crd);
        Self::present(def, &stored)
    }

    /// apiextensions' CRD finalizer controller (part of kube-apiserver): deletes the
    /// instances of a deleted CRD, then removes the cleanup finalizer, which deletes the
    /// CRD and stops serving it. Instances held by their own finalizers keep it waiting.
    pub(crate) fn crd_finalizer_pass(&mut self) {
        let crd_res = ResKey::new("apiextensions.k8s.io", "customresourcedefinitions");
        let Some(crd_def) = self.resources.iter().find(|d| d.key() == crd_res).cloned() else {
            return;
        };
        let pending: Vec<(ObjKey, Arc<Value>)> = self
            .store
            .iter(&crd_res)
            .filter(|(_, v)| is_deleting(v) && has_finalizer(v, CLEANUP_FINALIZER))
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        for (key, stored) in pending {
            let mut crd = (*stored).clone();
            if set_condition(
                &mut crd,
                "Terminating",
                "True",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            ) {
                self.store.put(&crd_res, key.clone(), crd.clone());
            }
            let res = ResKey::new(s(&crd, "/spec/group"), s(&crd, "/spec/names/plural"));
            let instance_def = self
                .resources
                .iter()
                .find(|d| d.is_custom() && d.key() == res)
                .cloned();
            if let Some(idef) = instance_def {
                let live: Vec<ObjKey> = self
                    .store
                    .iter(&res)
                    .filter(|(_, v)| !is_deleting(v))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in live {
                    let _ = self.delete(&idef, &k.namespace, &k.name, &crate::state::DeleteOpts::default());
                }
            }
            if self.store.iter(&res).next().is_some() {
                continue;
            }
            set_condition(
                &mut crd,
                "Terminating",
                "False",
                "InstanceDeletionCompleted",
                "removed all instances",
            );
            let mut remaining = Vec::new();
            if let Some(fins) = crd
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                fins.retain(|f| f != CLEANUP_FINALIZER);
                remaining.clone_from(fins);
            }
            if remaining.is_empty() {
                // Emptying the finalizers of a deleted object deletes it as it was stored.
                self.remove(&crd_def, &key);
            } else {
                let stored = self.store.put(&crd_res, key, crd);
                self.sync_crd(&stored);
            }
        }
    }
}
