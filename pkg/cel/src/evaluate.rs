//! The rules of a schema run against an object, and their failures as
//! kube-apiserver's field errors.

use std::fmt;

use kube_cel::{CompiledSchema, ErrorKind, compile_schema, validate_compiled};
use serde_json::Value;

/// The compiled rules of one version's `openAPIV3Schema`. Compile once per
/// CRD version, evaluate for every write.
pub struct Rules {
    compiled: CompiledSchema,
    schema: Value,
    /// Each rule with a `fieldPath`, and that path as kube-cel joins it to
    /// the node's, so a failure can be traced back to its node.
    field_paths: Vec<(String, String)>,
    /// Each rule with a `message`, which kube-apiserver names a rule by in
    /// an evaluation error.
    messages: Vec<(String, String)>,
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rules").finish_non_exhaustive()
    }
}

/// The field error kube-apiserver answers when a rule fails, by the rule's
/// `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// `Invalid value: "<type>"` (no reason, or `FieldValueInvalid`).
    Invalid,
    /// `Forbidden` (`FieldValueForbidden`).
    Forbidden,
    /// `Required value` (`FieldValueRequired`).
    Required,
    /// `Duplicate value: "<type>"` (`FieldValueDuplicate`).
    Duplicate,
}

/// One rule that refused an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleFailure {
    /// Where the error points: the rule's node (`spec`), with its
    /// `fieldPath` (`spec.max`); `<nil>` for a rule at the root, as
    /// kube-apiserver prints an empty path.
    pub field: String,
    /// The node the rule sits on (`spec`; empty at the root), which decides
    /// whether the failure is ratcheted on an update that left it unchanged.
    pub node: String,
    /// The kind of field error.
    pub kind: FailureKind,
    /// The schema type of the node (`object`), which kube-apiserver shows
    /// as the invalid value.
    pub value_type: String,
    /// The rule's message, its `messageExpression`'s result, or
    /// `failed rule: <rule>`.
    pub message: String,
}

impl Rules {
    /// The rules of `schema`; `None` when it has none, so objects of kinds
    /// without rules pay nothing.
    pub fn of(schema: &Value) -> Option<Rules> {
        if !has_rules(schema) {
            return None;
        }
        let mut field_paths = Vec::new();
        collect_rule_keys(schema, "fieldPath", &mut field_paths);
        for (_, path) in &mut field_paths {
            *path = path.trim_start_matches('.').to_owned();
        }
        let mut messages = Vec::new();
        collect_rule_keys(schema, "message", &mut messages);
        Some(Rules {
            compiled: compile_schema(schema),
            schema: schema.clone(),
            field_paths,
            messages,
        })
    }

    /// Runs every rule against `object`, with `old` (the stored object, on
    /// an update) as `oldSelf`. Transition rules run only with an `old`,
    /// unless they set `optionalOldSelf`. Failures are sorted by field.
    pub fn evaluate(&self, object: &Value, old: Option<&Value>) -> Vec<RuleFailure> {
        let Err(errors) = validate_compiled(&self.compiled, object, old) else {
            return Vec::new();
        };
        let mut failures: Vec<RuleFailure> = errors
            .into_iter()
            .map(|error| {
                let field = error.field_path.trim_start_matches('.').to_owned();
                let node = self.node_of(&error.rule, &field);
                let value_type = type_at(&self.schema, &node);
                let (kind, message) = match error.kind {
                    ErrorKind::ValidationFailure => (kind_of(error.reason.as_deref()), error.message),
                    ErrorKind::EvaluationError => (FailureKind::Invalid, self.evaluation_error(&error)),
                    // A function this build lacks: kube-cel's message names it.
                    _ => (
                        FailureKind::Invalid,
                        format!("{}: {}", error.rule.trim(), error.message),
                    ),
                };
                RuleFailure {
                    field: if field.is_empty() {
                        "<nil>".to_owned()
                    } else {
                        field
                    },
                    node,
                    kind,
                    value_type,
                    message,
                }
            })
            .collect();
        failures.sort_by(|a, b| (&a.field, &a.message).cmp(&(&b.field, &b.message)));
        failures
    }

    /// kube-apiserver's words for a rule that failed to evaluate: cel-go's
    /// error (`no such key: max`), then `evaluating rule:` and the rule's
    /// message, or the rule.
    fn evaluation_error(&self, error: &kube_cel::ValidationError) -> String {
        let cause =
            std::error::Error::source(error).map_or_else(|| error.message.clone(), ToString::to_string);
        let mut chars = cause.chars();
        let cause = chars
            .next()
            .map(|first| first.to_lowercase().chain(chars).collect::<String>())
            .unwrap_or_default();
        let named = self
            .messages
            .iter()
            .find(|(rule, _)| *rule == error.rule)
            .map_or(error.rule.trim(), |(_, message)| message.trim());
        if cause.starts_with("no such overload") {
            format!(
                "'{cause}': call arguments did not match a supported operator, function or macro signature for \
                 rule: {named}"
            )
        } else {
            format!("{cause} evaluating rule: {named}")
        }
    }

    fn node_of(&self, rule: &str, field: &str) -> String {
        self.field_paths
            .iter()
            .filter(|(text, _)| text == rule)
            .find_map(|(_, suffix)| field.strip_suffix(suffix.as_str()))
            .map_or_else(|| field.to_owned(), |node| node.trim_end_matches('.').to_owned())
    }
}

fn kind_of(reason: Option<&str>) -> FailureKind {
    match reason {
        Some("FieldValueForbidden") => FailureKind::Forbidden,
        Some("FieldValueRequired") => FailureKind::Required,
        Some("FieldValueDuplicate") => FailureKind::Duplicate,
        _ => FailureKind::Invalid,
    }
}

fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|rules| !rules.is_empty())
                || map.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// Each rule of `schema` that sets `key`, with that key's value.
fn collect_rule_keys(schema: &Value, key: &str, out: &mut Vec<(String, String)>) {
    match schema {
        Value::Object(map) => {
            for rule in map
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(text), Some(value)) = (
                    rule.get("rule").and_then(Value::as_str),
                    rule.get(key).and_then(Value::as_str).filter(|v| !v.is_empty()),
                ) {
                    out.push((text.to_owned(), value.to_owned()));
                }
            }
            map.values().for_each(|child| collect_rule_keys(child, key, out));
        }
        Value::Array(items) => items.iter().for_each(|child| collect_rule_keys(child, key, out)),
        _ => {}
    }
}

/// The schema type at a node path (`spec.ports[0]`), `object` when unsure.
fn type_at(schema: &Value, path: &str) -> String {
    let mut node = schema;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (name, indexes) = segment.split_once('[').unwrap_or((segment, ""));
        if !name.is_empty() {
            node = match node
                .get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
            {
                Some(child) => child,
                None => return "object".to_owned(),
            };
        }
        for _ in indexes.split('[') {
            if let Some(items) = node.get("items") {
                node = items;
            }
        }
    }
    node.get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{FailureKind, Rules};

    fn rules() -> Rules {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer"},
                "size": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "size is immutable", "reason": "FieldValueForbidden"},
                ]},
            },
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' is above max ' + string(self.max)", "fieldPath": ".min"},
            ],
        }}, "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')"}]});
        Rules::of(&schema).unwrap()
    }

    fn widget(name: &str, min: i64, max: i64, size: &str) -> serde_json::Value {
        json!({"apiVersion": "t.example.com/v1", "kind": "Widget", "metadata": {"name": name},
               "spec": {"min": min, "max": max, "size": size}})
    }

    #[test]
    fn a_schema_without_rules_has_nothing_to_run() {
        assert!(Rules::of(&json!({"type": "object", "properties": {"spec": {"type": "object"}}})).is_none());
    }

    #[test]
    fn failures_carry_the_place_kind_type_and_message_kube_apiserver_reports() {
        let rules = rules();
        assert_eq!(rules.evaluate(&widget("w1", 1, 2, "s"), None), vec![]);
        let failures = rules.evaluate(&widget("x1", 3, 2, "s"), None);
        assert_eq!(failures.len(), 2, "{failures:#?}");
        assert_eq!(failures[0].field, "<nil>");
        assert_eq!(failures[0].node, "");
        assert_eq!(
            failures[0].message,
            "failed rule: self.metadata.name.startsWith('w')"
        );
        assert_eq!(failures[1].field, "spec.min");
        assert_eq!(failures[1].node, "spec");
        assert_eq!(failures[1].kind, FailureKind::Invalid);
        assert_eq!(failures[1].value_type, "object");
        assert_eq!(failures[1].message, "min 3 is above max 2");
    }

    #[test]
    fn bad_input_gets_kube_apiservers_answers() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not be above max"},
                {"rule": "!has(self.min) || self.min >= 0"},
                {"rule": "!has(self.min) || self.min < 100", "message": "min is small", "messageExpression": "'min ' + self.nosuch"},
            ],
        }}});
        let rules = Rules::of(&schema).unwrap();
        // A plain access to a field the object lacks fails to evaluate;
        // `has()` guards it.
        let missing = rules.evaluate(&json!({"spec": {"max": 1}}), None);
        assert_eq!(missing.len(), 1, "{missing:#?}");
        assert_eq!(
            missing[0].message,
            "no such key: min evaluating rule: min must not be above max"
        );
        // A messageExpression that fails falls back to the message.
        let fallback = rules.evaluate(&json!({"spec": {"min": 100, "max": 200}}), None);
        assert_eq!(fallback.len(), 1, "{fallback:#?}");
        assert_eq!(fallback[0].message, "min is small");
        let negative = rules.evaluate(&json!({"spec": {"min": -1, "max": 2}}), None);
        assert_eq!(
            negative[0].message,
            "failed rule: !has(self.min) || self.min >= 0"
        );
    }

    #[test]
    fn transition_rules_run_only_on_an_update() {
        let rules = rules();
        assert_eq!(rules.evaluate(&widget("w1", 1, 2, "big"), None), vec![]);
        let old = widget("w1", 1, 2, "small");
        let failures = rules.evaluate(&widget("w1", 1, 2, "big"), Some(&old));
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert_eq!(failures[0].field, "spec.size");
        assert_eq!(failures[0].kind, FailureKind::Forbidden);
        assert_eq!(failures[0].value_type, "string");
        assert_eq!(failures[0].message, "size is immutable");
    }
}
