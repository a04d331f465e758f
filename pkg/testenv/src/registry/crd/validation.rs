//! apiextensions' CustomResourceDefinition validation, for the rules that decide
//! whether a CRD can be served: names, scope, versions, structural schemas and printer
//! columns.

use kinject_types::validation::is_dns1035_label;
use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::registry::schema::check_default;

use super::s;

/// The checks of apiextensions' CRD validation that decide whether it can be served.
pub(crate) fn validate(crd: &Value, name: &str) -> Result<(), ErrorStatus> {
    let mut errs = Vec::new();
    check_names(crd, name, &mut errs);
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    check_versions(versions, &mut errs);
    check_printer_columns(versions, &mut errs);
    super::refused_unless_empty(name, errs)
}

/// The group, names and scope, and the CRD's name made of them.
fn check_names(crd: &Value, name: &str, errs: &mut Vec<FieldError>) {
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
}

/// One storage version, version names that are unique DNS-1035 labels, and a
/// structural schema for each.
fn check_versions(versions: &[Value], errs: &mut Vec<FieldError>) {
    if versions.is_empty() {
        errs.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return;
    }
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
        let why = is_dns1035_label(name);
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
        let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
        match v.pointer("/schema/openAPIV3Schema") {
            None => errs.push(FieldError::required(at, "schemas are required")),
            Some(schema) => {
                let before = errs.len();
                check_schema(schema, &at, Level::Root, errs);
                // As kube-apiserver, rules are compiled only against a
                // schema that is itself valid.
                if errs.len() == before {
                    errs.extend(
                        kinject_cel::check_rules(schema, &at)
                            .into_iter()
                            .map(rule_problem),
                    );
                }
            }
        }
    }
}

/// A problem with a CEL rule, as the field error kube-apiserver answers.
fn rule_problem(problem: kinject_cel::RuleProblem) -> FieldError {
    use kinject_cel::ProblemKind;
    match problem.kind {
        ProblemKind::Invalid { value } => FieldError::invalid_raw(problem.field, value, problem.detail),
        ProblemKind::Forbidden => FieldError::forbidden(problem.field, problem.detail),
        ProblemKind::Required => FieldError::required(problem.field, problem.detail),
        ProblemKind::NotSupported { value, allowed } => FieldError::not_supported(
            problem.field,
            Value::String(value.trim_matches('"').to_owned()),
            &allowed,
        ),
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
    check_list_type(schema, path, errs);
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
        errs.extend(check_default(schema, d, &format!("{path}.default")));
    }
}

/// `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`, as apiextensions
/// validates them: a known type; keys only for a `map` list, which needs
/// them, object items, and keys that are scalar properties of the items,
/// each required or defaulted.
fn check_list_type(schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(other) = list_type.filter(|t| !matches!(*t, "atomic" | "set" | "map")) {
        errs.push(FieldError::not_supported(
            format!("{path}.x-kubernetes-list-type"),
            json!(other),
            &["atomic".to_owned(), "set".to_owned(), "map".to_owned()],
        ));
    }
    if !keys.is_empty() {
        let why = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(FieldError::required(
                format!("{path}.x-kubernetes-list-type"),
                why,
            )),
            Some("map") => {}
            Some(other) => errs.push(FieldError::invalid(
                format!("{path}.x-kubernetes-list-type"),
                json!(other),
                why,
            )),
        }
    }
    if list_type != Some("map") {
        return;
    }
    if keys.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = schema.get("items").filter(|i| i.is_object()) else {
        errs.push(FieldError::required(
            format!("{path}.items"),
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    let items_type = s(items, "/type");
    if items_type != "object" {
        errs.push(FieldError::invalid(
            format!("{path}.items.type"),
            json!(items_type),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    check_map_keys(items, &keys, path, errs);
}

/// The keys of a `map` list: scalar properties of its items, each required
/// or defaulted, named once.
fn check_map_keys(items: &Value, keys: &[&str], path: &str, errs: &mut Vec<FieldError>) {
    let keys_go = format!(
        "[]string{{{}}}",
        keys.iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let required: Vec<&str> = items
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut seen = std::collections::HashSet::new();
    for key in keys {
        match items.pointer(&format!("/properties/{key}")) {
            Some(property) => {
                if matches!(s(property, "/type"), "array" | "object") {
                    errs.push(FieldError::invalid(
                        format!("{path}.items.properties[{key}].type"),
                        json!("object"),
                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                    ));
                }
                if !required.contains(key) && property.get("default").is_none() {
                    errs.push(FieldError::required(
                        format!("{path}.items.properties[{key}].default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a \
                         required property",
                    ));
                }
            }
            None => errs.push(FieldError::invalid_raw(
                format!("{path}.x-kubernetes-list-map-keys"),
                keys_go.clone(),
                "entries must all be names of item properties",
            )),
        }
        if !seen.insert(*key) {
            errs.push(FieldError::invalid_raw(
                format!("{path}.x-kubernetes-list-map-keys"),
                keys_go.clone(),
                "must not contain duplicate entries",
            ));
        }
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
