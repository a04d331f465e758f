//! Round trips of every version conversion of an application, on objects
//! generated from each version's CRD schema, as a property test.
//!
//! For each spoke in the registry (a version with conversions to its kind's
//! hub), [`check_round_trips`] converts generated spoke objects to the hub
//! and back, and generated hub objects to the spoke and back, and fails on
//! the first object whose trip changed it, shrunk by proptest to the
//! smallest such object. Objects come from the schema the CRD carries
//! (types, bounds, enums, formats, required fields, maps and lists), are
//! defaulted by their version's `Defaultable` as the API server's webhook
//! would, and go through [`registry::convert`], the conversion the webhook
//! serves.
//!
//! The objects are the same on every run (a fixed seed), so a failure shows
//! again on a rerun.
//!
//! An object the version's type does not decode, or that its conversion
//! refuses with a `FieldError`, is set aside; proptest fails the check when
//! it has to set aside too many, so a conversion that refuses everything is
//! not a pass. CEL rules (`x-kubernetes-validations`) are not applied to the
//! generated objects: a conversion refuses what it cannot convert.
//!
//! Written here because no crate generates objects from an OpenAPI schema
//! for proptest; the strategies are proptest's own.

use std::collections::BTreeMap;

use kinject_types::conversion::{ConversionError, RESTORE_ANNOTATION};
use kinject_types::registry::{self, CustomKind};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRng, TestRunner};
use serde_json::{Map, Value, json};

/// Objects generated per version and direction.
const CASES: u32 = 128;
/// Items in a generated list or map, at most.
const MAX_ITEMS: usize = 3;
/// Characters in a generated string without bounds, at most.
const MAX_CHARS: usize = 8;
/// Nesting beyond which generated objects stop growing.
const MAX_DEPTH: usize = 12;

/// Checks the conversions of every spoke of `kinds` (the application's
/// registry, `generated::registry::custom_kinds()`): spoke → hub → spoke and
/// hub → spoke → hub on generated objects. Returns the spokes checked, as
/// `Kind version`, or what changed on the first trip that changed an object.
pub fn check_round_trips(kinds: &[CustomKind]) -> Result<Vec<String>, String> {
    let mut checked = Vec::new();
    for spoke in kinds.iter().filter(|k| k.is_converted()) {
        let hub = kinds
            .iter()
            .find(|k| k.hub && k.group == spoke.group && k.kind == spoke.kind)
            .ok_or_else(|| {
                format!(
                    "{} {} has conversions but its kind has no hub",
                    spoke.kind, spoke.version
                )
            })?;
        round_trip(kinds, spoke, hub)?;
        round_trip(kinds, hub, spoke)?;
        checked.push(format!("{} {}", spoke.kind, spoke.version));
    }
    Ok(checked)
}

/// Objects of `from`, converted to `via` and back, come back as they were.
fn round_trip(kinds: &[CustomKind], from: &CustomKind, via: &CustomKind) -> Result<(), String> {
    let (from_version, via_version) = (api_version(from), api_version(via));
    let trip = format!(
        "{} {} → {} → {}",
        from.kind, from.version, via.version, from.version
    );
    // A fixed seed: the same objects on every run, so a failure is one a
    // rerun shows again.
    let config = Config {
        cases: CASES,
        max_global_rejects: CASES * 8,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let outcome = runner.run(&object_strategy(from), |object| {
        // As the version's type writes it, which is what the webhook answers.
        let Ok(object) = from.canonical(&object) else {
            return Err(TestCaseError::reject("the version's type does not decode it"));
        };
        let object = match from.set_defaults(&object) {
            Some(Ok(defaulted)) => defaulted,
            Some(Err(_)) => return Err(TestCaseError::reject("the version's defaults do not decode it")),
            None => object,
        };
        let there = match registry::convert(kinds, &object, &via_version) {
            Ok(there) => there,
            Err(ConversionError::Refused(_)) => {
                return Err(TestCaseError::reject("its conversion refuses it"));
            }
            Err(error) => {
                return Err(TestCaseError::fail(format!(
                    "converting it to {via_version}: {error}"
                )));
            }
        };
        let back = registry::convert(kinds, &there, &from_version).map_err(|error| {
            TestCaseError::fail(format!(
                "converting it back from {via_version}: {error}\n  there: {there}"
            ))
        })?;
        if without_restore_annotation(back.clone()) != object {
            return Err(TestCaseError::fail(format!(
                "it came back changed\n  there: {there}\n  back:  {back}"
            )));
        }
        Ok(())
    });
    match outcome {
        Ok(()) => Ok(()),
        Err(TestError::Fail(why, object)) => Err(format!("{trip}: the object\n  {object}\n{why}")),
        Err(TestError::Abort(why)) => Err(format!(
            "{trip}: too few objects to test ({why}): most generated objects did not decode or were refused by the conversion"
        )),
    }
}

fn api_version(kind: &CustomKind) -> String {
    if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    }
}

/// The object with its spoke's restore annotation dropped: the one thing a
/// trip through the hub may add.
fn without_restore_annotation(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut)
    {
        annotations.remove(RESTORE_ANNOTATION);
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    object
}

/// Whole objects of `kind`: its identity, a name, and the rest from its schema.
fn object_strategy(kind: &CustomKind) -> BoxedStrategy<Value> {
    let mut schema = kind.schema();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for identity in ["apiVersion", "kind", "metadata"] {
            properties.remove(identity);
        }
    }
    let mut metadata = json!({"name": "round-trip"});
    if kind.namespaced {
        metadata["namespace"] = json!("default");
    }
    let identity = json!({"apiVersion": api_version(kind), "kind": kind.kind, "metadata": metadata});
    value_strategy(&schema, 0)
        .prop_map(move |fields| {
            let mut object = identity.clone();
            if let (Some(object), Value::Object(fields)) = (object.as_object_mut(), fields) {
                object.extend(fields);
            }
            object
        })
        .boxed()
}

/// Values of one schema.
fn value_strategy(schema: &Value, depth: usize) -> BoxedStrategy<Value> {
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    if let Some(choices) = schema
        .get("enum")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    {
        return proptest::sample::select(choices.clone()).boxed();
    }
    if flag("x-kubernetes-int-or-string") {
        return prop_oneof![
            (0_i64..1000).prop_map(Value::from),
            string_strategy(schema).prop_map(Value::from),
        ]
        .boxed();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") if depth < MAX_DEPTH => object_fields_strategy(schema, depth),
        Some("array") if depth < MAX_DEPTH => array_strategy(schema, depth),
        Some("string") => string_strategy(schema).prop_map(Value::from).boxed(),
        Some("integer") => integer_strategy(schema),
        Some("number") => number_strategy(schema),
        Some("boolean") => any::<bool>().prop_map(Value::from).boxed(),
        Some("array") => Just(json!([])).boxed(),
        _ => Just(json!({})).boxed(),
    }
}

/// An object's properties (each optional one present or not), or a map's
/// entries (`additionalProperties`).
fn object_fields_strategy(schema: &Value, depth: usize) -> BoxedStrategy<Value> {
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        return proptest::collection::btree_map(
            "[a-z][a-z0-9]{0,4}",
            value_strategy(values, depth + 1),
            0..=MAX_ITEMS,
        )
        .prop_map(|entries| Value::Object(entries.into_iter().collect()))
        .boxed();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Just(json!({})).boxed();
    };
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = properties
        .iter()
        .map(|(name, property)| {
            let name = name.clone();
            let value = value_strategy(property, depth + 1);
            if required.contains(&name.as_str()) {
                value.prop_map(move |v| Some((name.clone(), v))).boxed()
            } else {
                proptest::option::of(value.prop_map(move |v| (name.clone(), v))).boxed()
            }
        })
        .collect();
    fields
        .prop_map(|fields| Value::Object(fields.into_iter().flatten().collect::<Map<String, Value>>()))
        .boxed()
}

/// A list; a `set` without duplicates, a `map` without two items of one key.
fn array_strategy(schema: &Value, depth: usize) -> BoxedStrategy<Value> {
    let items = schema.get("items").cloned().unwrap_or_else(|| json!({}));
    let list_type = schema
        .get("x-kubernetes-list-type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let keys: Vec<String> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let min = schema
        .get("minItems")
        .and_then(Value::as_u64)
        .map_or(0, |n| usize::try_from(n).unwrap_or(0));
    let max = schema
        .get("maxItems")
        .and_then(Value::as_u64)
        .map_or(MAX_ITEMS, |n| {
            usize::try_from(n).unwrap_or(MAX_ITEMS).min(MAX_ITEMS)
        });
    proptest::collection::vec(
        value_strategy(&items, depth + 1),
        min.min(max)..=max.max(min.min(max)),
    )
    .prop_map(move |list| {
        let mut seen = BTreeMap::new();
        let unique = |item: &Value| match list_type.as_deref() {
            Some("set") => Some(item.clone()),
            Some("map") => Some(Value::Array(
                keys.iter()
                    .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
                    .collect(),
            )),
            _ => None,
        };
        let list: Vec<Value> = list
            .into_iter()
            .filter(|item| unique(item).is_none_or(|key| seen.insert(key.to_string(), ()).is_none()))
            .collect();
        Value::Array(list)
    })
    .boxed()
}

fn string_strategy(schema: &Value) -> BoxedStrategy<String> {
    match schema.get("format").and_then(Value::as_str) {
        Some("date-time") => {
            return proptest::sample::select(vec![
                "2026-01-01T00:00:00Z".to_owned(),
                "2026-12-07T12:30:05Z".to_owned(),
            ])
            .boxed();
        }
        Some("byte") => {
            return proptest::sample::select(vec![String::new(), "a2luamVjdA==".to_owned()]).boxed();
        }
        _ => {}
    }
    let length = |key: &str| {
        schema
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let min = length("minLength").unwrap_or(0);
    let max = length("maxLength").unwrap_or(MAX_CHARS).min(min.max(MAX_CHARS));
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && let Ok(matching) = proptest::string::string_regex(pattern)
    {
        return matching
            .prop_filter("within the length bounds", move |s| {
                (min..=max.max(min)).contains(&s.chars().count())
            })
            .boxed();
    }
    proptest::string::string_regex(&format!("[a-z0-9]{{{min},{}}}", max.max(min)))
        .map_or_else(|_| Just(String::new()).boxed(), Strategy::boxed)
}

fn integer_strategy(schema: &Value) -> BoxedStrategy<Value> {
    let (low, high) = match schema.get("format").and_then(Value::as_str) {
        Some("int32") => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    };
    let bound = |key: &str| schema.get(key).and_then(Value::as_i64);
    let low = bound("minimum").unwrap_or(low).max(low);
    let high = bound("maximum").unwrap_or(high).min(high);
    if low > high {
        return Just(Value::from(low)).boxed();
    }
    (low..=high).prop_map(Value::from).boxed()
}

fn number_strategy(schema: &Value) -> BoxedStrategy<Value> {
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    let low = bound("minimum").unwrap_or(-1e6);
    let high = bound("maximum").unwrap_or(1e6);
    if low >= high {
        return Just(json!(low)).boxed();
    }
    (low..high).prop_map(|n| json!(n)).boxed()
}
