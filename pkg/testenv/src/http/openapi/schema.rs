//! Walking OpenAPI schemas: their subschemas and the definitions they reference.

use serde_json::{Map, Value};

/// Where v3 documents keep their definitions.
pub(super) const REF_V3: &str = "#/components/schemas/";

/// Applies `f` to a schema and to each of its subschemas, outermost first. Only
/// places that hold schemas are entered, so a property named `$ref` stays a property.
pub(super) fn walk(schema: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    let Value::Object(m) = schema else {
        return;
    };
    f(m);
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for p in props.values_mut() {
            walk(p, f);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        match m.get_mut(key) {
            Some(Value::Array(items)) => items.iter_mut().for_each(|s| walk(s, f)),
            Some(s @ Value::Object(_)) => walk(s, f),
            _ => {}
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(all)) = m.get_mut(key) {
            all.iter_mut().for_each(|s| walk(s, f));
        }
    }
}

/// The definitions `names` and every one they reach through `$ref`s.
pub(super) fn closure(
    defs: &Map<String, Value>,
    names: impl IntoIterator<Item = String>,
) -> Map<String, Value> {
    let mut out = Map::new();
    let mut todo: Vec<String> = names.into_iter().collect();
    while let Some(name) = todo.pop() {
        if out.contains_key(&name) {
            continue;
        }
        let Some(def) = defs.get(&name) else {
            continue;
        };
        let mut def = def.clone();
        walk(&mut def, &mut |m| {
            if let Some(r) = m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(REF_V3))
            {
                todo.push(r.to_owned());
            }
        });
        out.insert(name, def);
    }
    out
}
