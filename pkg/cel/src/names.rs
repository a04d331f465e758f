//! Which schema node a rule's expression reads, as far as a walk over its
//! syntax tree can tell: `self.spec.replicas` from the node a rule sits on,
//! `x.name` inside `self.items.all(x, ...)`. kube-apiserver knows this from
//! its type checker; the `cel` crate has none, so the walk is here, and it
//! stays silent wherever it cannot be sure (a value built in the rule, a
//! field of a schema that preserves unknown fields).

use std::sync::OnceLock;

use kube_cel::cel::common::ast::{Expr, IdedExpr};
use serde_json::{Value, json};

/// What a schema says of one field of an object.
pub(crate) enum Field<'a> {
    /// The field's schema.
    Found(&'a Value),
    /// The object's schema lists its fields, and this is not one.
    Undefined,
    /// The schema cannot say (no properties, unknown fields kept).
    Unknown,
}

/// The variables a rule can name, each with the schema of its value.
#[derive(Clone, Debug)]
pub(crate) struct Scope<'a> {
    /// The schema at the top of the object (its `metadata` is special).
    pub(crate) root: &'a Value,
    bindings: Vec<(String, &'a Value)>,
}

impl<'a> Scope<'a> {
    /// `self` and `oldSelf` bound to `node`.
    pub(crate) fn of_node(root: &'a Value, node: &'a Value) -> Self {
        Scope {
            root,
            bindings: vec![("self".to_owned(), node), ("oldSelf".to_owned(), node)],
        }
    }

    /// The same scope with `name` bound to `schema` (a comprehension's
    /// variable shadows any other of its name).
    pub(crate) fn with(&self, name: &str, schema: Option<&'a Value>) -> Self {
        let mut scope = self.clone();
        scope.bindings.retain(|(bound, _)| bound != name);
        if let Some(schema) = schema {
            scope.bindings.push((name.to_owned(), schema));
        }
        scope
    }

    fn lookup(&self, name: &str) -> Option<&'a Value> {
        self.bindings
            .iter()
            .rev()
            .find(|(bound, _)| bound == name)
            .map(|(_, schema)| *schema)
    }
}

/// The schema of the value `expr` computes, when it is a path of fields
/// and indexes from a bound variable.
pub(crate) fn schema_of<'a>(expr: &IdedExpr, scope: &Scope<'a>) -> Option<&'a Value> {
    match &expr.expr {
        Expr::Ident(name) => scope.lookup(name),
        Expr::Select(select) => {
            let operand = schema_of(&select.operand, scope)?;
            match field_of(operand, &select.field, std::ptr::eq(operand, scope.root)) {
                Field::Found(schema) => Some(schema),
                Field::Undefined | Field::Unknown => None,
            }
        }
        Expr::Call(call) if call.func_name == "_[_]" && call.args.len() == 2 => {
            element_of(schema_of(&call.args[0], scope)?)
        }
        _ => None,
    }
}

/// The schema of an element a comprehension over `collection` visits: a
/// list's item, or a map's key.
pub(crate) fn element_of(collection: &Value) -> Option<&Value> {
    match collection.get("type").and_then(Value::as_str) {
        Some("array") => collection.get("items"),
        Some("object") if is_map(collection) => collection.get("additionalProperties"),
        _ => None,
    }
}

/// The schema of a key of a map, for comprehensions over maps.
pub(crate) fn key_schema() -> &'static Value {
    static STRING: OnceLock<Value> = OnceLock::new();
    STRING.get_or_init(|| json!({"type": "string"}))
}

/// What `object`'s schema says of `field` (a CEL name, escaped as
/// kube-apiserver escapes property names that are not CEL identifiers).
pub(crate) fn field_of<'a>(object: &'a Value, field: &str, at_root: bool) -> Field<'a> {
    let name = unescape(field);
    if let Some(schema) = object.get("properties").and_then(|p| p.get(&name)) {
        return Field::Found(schema);
    }
    if at_root {
        // kube-apiserver gives rules at the root an object's apiVersion, kind
        // and only the name and generateName of its metadata.
        static METADATA: OnceLock<Value> = OnceLock::new();
        match name.as_str() {
            "apiVersion" | "kind" => return Field::Found(key_schema()),
            "metadata" => {
                return Field::Found(METADATA.get_or_init(|| {
                    json!({"type": "object", "properties": {
                        "name": {"type": "string"},
                        "generateName": {"type": "string"},
                    }})
                }));
            }
            _ => {}
        }
    }
    if let Some(additional) = object.get("additionalProperties").filter(|a| a.is_object()) {
        return Field::Found(additional);
    }
    let open = object
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
        || object.get("additionalProperties").and_then(Value::as_bool) == Some(true)
        || object.get("x-kubernetes-int-or-string").is_some();
    if !open && object.get("type").and_then(Value::as_str) == Some("object") {
        return Field::Undefined;
    }
    Field::Unknown
}

fn is_map(schema: &Value) -> bool {
    schema.get("additionalProperties").is_some_and(Value::is_object)
}

/// The reserved words of CEL, which a property name escapes as `__in__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property name as CEL spells it, as kube-apiserver escapes it: `__` is
/// `__underscores__`, `.` `__dot__`, `-` `__dash__`, `/` `__slash__`, and a
/// reserved word `__in__`.
pub(crate) fn escape(name: &str) -> String {
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    if !name.contains(['_', '.', '-', '/']) {
        return name.to_owned();
    }
    name.replace("__", "__underscores__")
        .replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__")
}

/// A property name from its CEL spelling: `__dash__` is `-`, `__dot__` is
/// `.`, `__slash__` is `/`, `__underscores__` is `__`, and `__in__` (any
/// reserved word between double underscores) is the word.
pub(crate) fn unescape(name: &str) -> String {
    if !name.contains("__") {
        return name.to_owned();
    }
    if let Some(word) = name.strip_prefix("__").and_then(|n| n.strip_suffix("__"))
        && RESERVED.contains(&word)
    {
        return word.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find("__") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (text, used) = [
            ("__underscores__", "__"),
            ("__dot__", "."),
            ("__dash__", "-"),
            ("__slash__", "/"),
        ]
        .iter()
        .find(|(token, _)| tail.starts_with(token))
        .map_or(("__", 2), |(token, text)| (*text, token.len()));
        out.push_str(text);
        rest = &tail[used..];
    }
    out.push_str(rest);
    out
}

/// Every field a rule reads that its schema does not have, in the order
/// they appear.
pub(crate) fn undefined_fields(expr: &IdedExpr, scope: &Scope<'_>, out: &mut Vec<String>) {
    match &expr.expr {
        Expr::Select(select) => {
            if let Some(operand) = schema_of(&select.operand, scope)
                && let Field::Undefined = field_of(operand, &select.field, std::ptr::eq(operand, scope.root))
            {
                out.push(select.field.clone());
            }
            undefined_fields(&select.operand, scope, out);
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                undefined_fields(target, scope, out);
            }
            for arg in &call.args {
                undefined_fields(arg, scope, out);
            }
        }
        Expr::Comprehension(comprehension) => {
            undefined_fields(&comprehension.iter_range, scope, out);
            undefined_fields(&comprehension.accu_init, scope, out);
            let element = schema_of(&comprehension.iter_range, scope).and_then(|range| {
                if range.get("type").and_then(Value::as_str) == Some("object") {
                    Some(key_schema())
                } else {
                    element_of(range)
                }
            });
            let mut inner = scope
                .with(&comprehension.iter_var, element)
                .with(&comprehension.accu_var, None);
            if let Some(second) = &comprehension.iter_var2 {
                inner = inner.with(second, None);
            }
            for part in [
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ] {
                undefined_fields(part, &inner, out);
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                undefined_fields(element, scope, out);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let kube_cel::cel::common::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                    undefined_fields(&entry.key, scope, out);
                    undefined_fields(&entry.value, scope, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::{escape, unescape};

    #[test]
    fn escaped_property_names_read_back_as_kubernetes_writes_them() {
        for name in ["plain", "foo-bar", "a.b/c", "x__y", "snake_case", "namespace"] {
            assert_eq!(unescape(&escape(name)), name);
        }
        assert_eq!(escape("snake_case"), "snake_case");
        assert_eq!(escape("a.b"), "a__dot__b");
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape("foo__dash__bar"), "foo-bar");
        assert_eq!(unescape("a__dot__b__slash__c"), "a.b/c");
        assert_eq!(unescape("x__underscores__y"), "x__y");
        assert_eq!(unescape("__namespace__"), "namespace");
        assert_eq!(unescape("odd__name"), "odd__name");
    }
}
