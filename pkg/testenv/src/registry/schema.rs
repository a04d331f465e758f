//! Custom resources: structural-schema defaulting, pruning and validation.

use serde_json::{Map, Value};

use crate::errors::{FieldError, FieldErrorKind};
use crate::go_format::go_value;

/// A version's `openAPIV3Schema`, with its CEL rules compiled once.
#[derive(Debug)]
pub(crate) struct Schema {
    pub(crate) root: Value,
    pub(crate) rules: Option<kinject_cel::Rules>,
    /// Whether any node has a `default`, so reads of kinds without skip
    /// [`Schema::default_on_read`].
    has_defaults: bool,
}

impl Schema {
    pub(crate) fn new(root: Value) -> Self {
        let rules = kinject_cel::Rules::of(&root);
        let has_defaults = has_key(&root, "default");
        Schema {
            root,
            rules,
            has_defaults,
        }
    }

    /// Fills in the schema's defaults in an object read from storage, as
    /// kube-apiserver defaults on read: an object stored before a default was
    /// added reads with it. Nothing is pruned or validated.
    pub(crate) fn default_on_read(&self, obj: &mut Value) {
        if self.has_defaults {
            fill_defaults(&self.root, obj);
        }
    }

    /// The failures of the schema's CEL rules for `obj`, with `old` (the
    /// stored object) as `oldSelf` on an update. As kube-apiserver does, an
    /// update does not fail for a rule whose node it left unchanged
    /// (validation ratcheting, in `kinject-cel`), and rules do not run when a
    /// value has the wrong type.
    pub(crate) fn rule_errors(
        &self,
        obj: &Value,
        old: Option<&Value>,
        found: &[FieldError],
    ) -> Vec<FieldError> {
        let Some(rules) = &self.rules else {
            return Vec::new();
        };
        if found.iter().any(|e| e.kind == FieldErrorKind::TypeInvalid) {
            return Vec::new();
        }
        rules
            .evaluate(obj, old)
            .into_iter()
            .map(|failure| {
                use kinject_cel::FailureKind;
                match failure.kind {
                    FailureKind::Invalid => {
                        FieldError::invalid(failure.field, Value::String(failure.value_type), failure.message)
                    }
                    FailureKind::Forbidden => FieldError::forbidden(failure.field, failure.message),
                    FailureKind::Required => FieldError::required(failure.field, failure.message),
                    FailureKind::Duplicate => {
                        FieldError::invalid(failure.field, Value::String(failure.value_type), "")
                            .with_kind(FieldErrorKind::Duplicate)
                    }
                }
            })
            .collect()
    }
}

/// What applying the schema to an object found.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Paths of fields the schema does not know, pruned (`spec.foo`).
    pub(crate) unknown: Vec<String>,
    pub(crate) errors: Vec<FieldError>,
}

impl Schema {
    /// Defaults, prunes and validates `obj` in place (the custom resource, whose
    /// `apiVersion`, `kind` and `metadata` are handled by the caller).
    pub(crate) fn apply(&self, obj: &mut Value) -> Checked {
        let mut out = Checked::default();
        let Some(m) = obj.as_object_mut() else {
            return out;
        };
        let props = self.root.get("properties").and_then(Value::as_object);
        let preserve = preserves(&self.root);
        let keys: Vec<String> = m.keys().cloned().collect();
        for key in keys {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match props.and_then(|p| p.get(&key)) {
                Some(s) => {
                    if let Some(v) = m.get_mut(&key) {
                        if v.is_null() && !nullable(s) {
                            m.remove(&key);
                            continue;
                        }
                        walk(s, v, &key, &mut out);
                    }
                }
                None if preserve => {}
                None => {
                    m.remove(&key);
                    out.unknown.push(key);
                }
            }
        }
        if let Some(props) = props {
            for (key, s) in props {
                if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if !m.contains_key(key)
                    && let Some(d) = s.get("default")
                {
                    let mut d = d.clone();
                    walk(s, &mut d, key, &mut out);
                    m.insert(key.clone(), d);
                }
            }
        }
        check_required(&self.root, m, "", &mut out);
        out
    }
}

/// Whether CRD validation ratcheting drops `error` on an update from `old` to
/// `new`: the value at the error's path is unchanged (for a missing required
/// field, the object that lacks it is unchanged). kube-apiserver ratchets the
/// same way since 1.30, by default since 1.33.
pub(crate) fn ratcheted(error: &FieldError, old: &Value, new: &Value) -> bool {
    let path = if error.kind == FieldErrorKind::Required {
        error.field.rsplit_once('.').map_or("", |(parent, _)| parent)
    } else {
        error.field.as_str()
    };
    at_path(old, path) == at_path(new, path)
}

/// The value at a field path as errors print it: `spec.items[2].name`,
/// `spec.labels[key]`.
fn at_path<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut value = root;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (name, mut rest) = segment.split_once('[').map_or((segment, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            value = value.get(name)?;
        }
        while !rest.is_empty() {
            let (index, after) = rest.split_once(']')?;
            value = match value {
                Value::Array(items) => items.get(index.parse::<usize>().ok()?)?,
                other => other.get(index)?,
            };
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    Some(value)
}

/// Validates a `default` against the schema it sits in, as the apiextensions
/// validation does: type and value rules (kube-openapi names the default's own root
/// ""), and no fields the schema would prune. Errors are placed under `at`
/// (`<schema path>.default`).
pub(crate) fn check_default(schema: &Value, default: &Value, at: &str) -> Vec<FieldError> {
    let mut v = default.clone();
    let mut out = Checked::default();
    walk(schema, &mut v, "", &mut out);
    let mut errs: Vec<FieldError> = out
        .errors
        .into_iter()
        .map(|mut e| {
            e.field = if e.field.is_empty() {
                at.to_owned()
            } else if e.field.starts_with('[') {
                format!("{at}{}", e.field)
            } else {
                format!("{at}.{}", e.field)
            };
            e
        })
        .collect();
    if !out.unknown.is_empty() {
        errs.insert(
            0,
            FieldError::invalid_raw(at, go_value(default), "must not have unknown fields"),
        );
    }
    errs
}

fn has_key(schema: &Value, key: &str) -> bool {
    match schema {
        Value::Object(map) => map.contains_key(key) || map.values().any(|v| has_key(v, key)),
        Value::Array(items) => items.iter().any(|v| has_key(v, key)),
        _ => false,
    }
}

/// The missing fields of `v` that `s` has a `default` for, at every depth.
fn fill_defaults(s: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            for (key, child_schema) in props.into_iter().flatten() {
                match m.get_mut(key) {
                    Some(child) => fill_defaults(child_schema, child),
                    None => {
                        if let Some(default) = child_schema.get("default") {
                            let mut default = default.clone();
                            fill_defaults(child_schema, &mut default);
                            m.insert(key.clone(), default);
                        }
                    }
                }
            }
            if let Some(values) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for (key, child) in m.iter_mut() {
                    if !props.is_some_and(|p| p.contains_key(key)) {
                        fill_defaults(values, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                items.iter_mut().for_each(|item| fill_defaults(item_schema, item));
            }
        }
        _ => {}
    }
}

fn preserves(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn nullable(s: &Value) -> bool {
    s.get("nullable").and_then(Value::as_bool) == Some(true)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check_required(s: &Value, m: &Map<String, Value>, path: &str, out: &mut Checked) {
    if let Some(req) = s.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if !m.contains_key(r) {
                out.errors.push(FieldError::required(join(path, r), ""));
            }
        }
    }
}

/// Defaults, prunes and validates one value against its schema.
fn walk(s: &Value, v: &mut Value, path: &str, out: &mut Checked) {
    if !type_matches(s, v, path, out) {
        return;
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let names: Vec<String> = allowed
            .iter()
            .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_owned))
            .collect();
        out.errors
            .push(FieldError::not_supported(path, v.clone(), &names));
    }
    match v {
        Value::Object(m) => walk_object(s, m, path, out),
        Value::Array(items) => walk_array(s, items, path, out),
        Value::String(text) => check_string(s, text, path, out),
        Value::Number(_) => check_number(s, v, path, out),
        _ => {}
    }
}

/// Whether the value has the schema's `type` (an int-or-string either); a mismatch is
/// the value's only error.
fn type_matches(s: &Value, v: &Value, path: &str, out: &mut Checked) -> bool {
    let int_or_string = s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    let ty = s.get("type").and_then(Value::as_str).unwrap_or_default();
    let actual = type_name(v);
    let wanted = if int_or_string {
        if matches!(actual, "integer" | "string") {
            return true;
        }
        "integer,string"
    } else {
        if ty.is_empty() || ty == actual || (ty == "number" && actual == "integer") {
            return true;
        }
        ty
    };
    out.errors.push(
        FieldError::invalid(
            path,
            Value::String(actual.to_owned()),
            format!("{path} in body must be of type {wanted}: \"{actual}\""),
        )
        .with_kind(FieldErrorKind::TypeInvalid),
    );
    false
}

fn walk_array(s: &Value, items: &mut [Value], path: &str, out: &mut Checked) {
    let n = items.len() as u64;
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        out.errors.push(
            FieldError::invalid(path, Value::from(n), format!("must have at most {max} items"))
                .with_kind(FieldErrorKind::TooMany),
        );
    }
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        out.errors.push(FieldError::invalid(
            path,
            Value::from(n),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter_mut().enumerate() {
            walk(item_schema, item, &format!("{path}[{i}]"), out);
        }
    }
    check_list_type(s, items, path, out);
}

/// `x-kubernetes-list-type`: a `set` holds each value once, a `map` each
/// combination of its `x-kubernetes-list-map-keys` once; a repeat is
/// kube-apiserver's `Duplicate value` at its index (the keys of a map item as
/// Go prints a `map[string]interface {}`).
fn check_list_type(s: &Value, items: &[Value], path: &str, out: &mut Checked) {
    let keys: Vec<&str> = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => Vec::new(),
        Some("map") => s
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect(),
        _ => return,
    };
    let identity = |item: &Value| -> Value {
        if keys.is_empty() {
            item.clone()
        } else {
            Value::Object(
                keys.iter()
                    .filter_map(|key| item.get(*key).map(|v| ((*key).to_owned(), v.clone())))
                    .collect(),
            )
        }
    };
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let id = identity(item);
        if seen.contains(&id) {
            let mut error = if keys.is_empty() {
                FieldError::invalid(format!("{path}[{i}]"), id, "")
            } else {
                FieldError::invalid_raw(format!("{path}[{i}]"), go_value(&id), "")
            };
            error.kind = FieldErrorKind::Duplicate;
            out.errors.push(error);
        } else {
            seen.push(id);
        }
    }
}

fn check_string(s: &Value, text: &str, path: &str, out: &mut Checked) {
    let v = &Value::String(text.to_owned());
    let n = text.chars().count() as u64;
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
        && n > max
    {
        out.errors.push(
            FieldError::invalid(path, v.clone(), format!("may not be more than {max} bytes"))
                .with_kind(FieldErrorKind::TooLong),
        );
        return;
    }
    if let Some(min) = s.get("minLength").and_then(Value::as_u64)
        && n < min
    {
        out.errors.push(FieldError::invalid(
            path,
            v.clone(),
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(format) = s.get("format").and_then(Value::as_str)
        && !crate::formats::is_valid(format, text)
    {
        out.errors.push(
            FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body must be of type {format}: \"{text}\""),
            )
            .with_kind(FieldErrorKind::TypeInvalid),
        );
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(p) {
            Ok(re) if !re.is_match(text) => out.errors.push(FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body should match '{p}'"),
            )),
            _ => {}
        }
    }
}

fn check_number(s: &Value, v: &Value, path: &str, out: &mut Checked) {
    let x = v.as_f64().unwrap_or_default();
    let excl_max = s.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
    let excl_min = s.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
    if let Some(max) = s.get("maximum").and_then(Value::as_f64)
        && (x > max || (excl_max && x >= max))
    {
        let rel = if excl_max {
            "less than"
        } else {
            "less than or equal to"
        };
        out.errors.push(FieldError::invalid(
            path,
            v.clone(),
            format!("{path} in body should be {rel} {max}"),
        ));
    }
    if let Some(min) = s.get("minimum").and_then(Value::as_f64)
        && (x < min || (excl_min && x <= min))
    {
        let rel = if excl_min {
            "greater than"
        } else {
            "greater than or equal to"
        };
        out.errors.push(FieldError::invalid(
            path,
            v.clone(),
            format!("{path} in body should be {rel} {min}"),
        ));
    }
}

fn walk_object(s: &Value, m: &mut Map<String, Value>, path: &str, out: &mut Checked) {
    let embedded = s.get("x-kubernetes-embedded-resource").and_then(Value::as_bool) == Some(true);
    let props = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    let preserve = preserves(s);
    let keys: Vec<String> = m.keys().cloned().collect();
    for key in keys {
        if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_path = join(path, &key);
        let child = props
            .and_then(|p| p.get(&key))
            .or_else(|| additional.filter(|a| a.is_object()));
        match child {
            Some(cs) => {
                if m.get(&key).is_some_and(Value::is_null) && !nullable(cs) {
                    m.remove(&key);
                    continue;
                }
                if let Some(cv) = m.get_mut(&key) {
                    walk(cs, cv, &child_path, out);
                }
            }
            None if preserve || additional.and_then(Value::as_bool) == Some(true) => {}
            None => {
                m.remove(&key);
                out.unknown.push(child_path);
            }
        }
    }
    if let Some(props) = props {
        for (key, cs) in props {
            if !m.contains_key(key)
                && let Some(d) = cs.get("default")
            {
                let mut d = d.clone();
                walk(cs, &mut d, &join(path, key), out);
                m.insert(key.clone(), d);
            }
        }
    }
    let n = m.len() as u64;
    if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
        && n > max
    {
        out.errors.push(
            FieldError::invalid(path, Value::from(n), format!("must have at most {max} items"))
                .with_kind(FieldErrorKind::TooMany),
        );
    }
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64)
        && n < min
    {
        out.errors.push(FieldError::invalid(
            path,
            Value::from(n),
            format!("{path} in body should have at least {min} properties"),
        ));
    }
    check_required(s, m, path, out);
}
