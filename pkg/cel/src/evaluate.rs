//! The rules of a schema run against an object, and their failures as
//! kube-apiserver's field errors.
//!
//! Each node that carries rules is found once, when the schema is compiled;
//! an evaluation visits only those nodes, converts each value there once,
//! and runs the node's rules with `self` (and `oldSelf`) bound, as
//! kube-apiserver does. The rules' programs are the `cel` crate's, in a
//! context with kube-cel's Kubernetes libraries.

use std::fmt;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{Context, ExecutionError, Program, Value as Cel};
use serde_json::Value;

use crate::convert::{root_to_cel, to_cel};

/// The compiled rules of one version's `openAPIV3Schema`. Compile once per
/// CRD version, evaluate for every write.
pub struct Rules {
    nodes: Vec<RuleNode>,
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rules")
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
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
    /// The node the rule sits on (`spec`, `spec.ports[1]`; empty at the root).
    pub node: String,
    /// The kind of field error.
    pub kind: FailureKind,
    /// The schema type of the node (`object`), which kube-apiserver shows
    /// as the invalid value.
    pub value_type: String,
    /// The rule's message, its `messageExpression`'s result, or
    /// `failed rule: <rule>`; for a rule that could not be evaluated,
    /// cel-go's error and the rule.
    pub message: String,
}

/// How to go from a node to one below it.
#[derive(Clone, Debug)]
enum Step {
    /// A property of an object.
    Field(String),
    /// Each item of a list, correlated with an old item as the list's type
    /// allows.
    Items(ListType),
    /// Each value of a map (`additionalProperties`).
    Values,
}

/// `x-kubernetes-list-type`: what makes an item the same item on an update.
#[derive(Clone, Debug)]
enum ListType {
    /// No item is the same as an old one: kube-apiserver gives rules no
    /// `oldSelf` inside an `atomic` or a `set` list.
    Uncorrelated,
    /// The same values of the keys.
    Map(Vec<String>),
}

struct RuleNode {
    steps: Vec<Step>,
    /// The node's schema, which types the values its rules read.
    schema: Value,
    value_type: String,
    rules: Vec<CompiledRule>,
}

struct CompiledRule {
    text: String,
    program: Result<Program, String>,
    message: Option<String>,
    message_program: Option<Program>,
    kind: FailureKind,
    field_path: Option<String>,
    transition: bool,
    optional_old_self: bool,
}

thread_local! {
    /// The standard functions with kube-cel's Kubernetes libraries: built
    /// once per thread, since registering them is most of a context's cost.
    static BASE: Context<'static> = {
        let mut base = Context::default().with_all();
        base.add_function("matches", crate::functions::matches);
        base
    };
}

impl Rules {
    /// The rules of `schema`; `None` when it has none, so objects of kinds
    /// without rules pay nothing.
    pub fn of(schema: &Value) -> Option<Rules> {
        let mut nodes = Vec::new();
        collect(schema, &mut Vec::new(), &mut nodes);
        (!nodes.is_empty()).then_some(Rules { nodes })
    }

    /// Runs every rule against `object` (already defaulted, as the API server
    /// runs rules after defaulting), with `old`, the stored object on an
    /// update, as `oldSelf`. A rule that reads `oldSelf` runs only where an
    /// old value is there (a list's items only in a `map` list),
    /// unless it sets `optionalOldSelf`. On an update, the rules of a node
    /// whose value did not change do not run (kube-apiserver's ratcheting).
    /// Failures are sorted by field.
    pub fn evaluate(&self, object: &Value, old: Option<&Value>) -> Vec<RuleFailure> {
        let mut failures = Vec::new();
        BASE.with(|base| {
            for node in &self.nodes {
                visit(
                    object,
                    old,
                    &node.steps,
                    String::new(),
                    &mut |value, old_value, path| {
                        node.run(base, value, old_value, path, &mut failures);
                    },
                );
            }
        });
        failures.sort_by(|a, b| (&a.field, &a.message).cmp(&(&b.field, &b.message)));
        failures
    }
}

/// The nodes of `schema` that carry rules, with the steps to them.
fn collect(schema: &Value, steps: &mut Vec<Step>, out: &mut Vec<RuleNode>) {
    let rules: Vec<CompiledRule> = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(compile)
        .collect();
    if !rules.is_empty() {
        out.push(RuleNode {
            steps: steps.clone(),
            schema: schema.clone(),
            value_type: schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("object")
                .to_owned(),
            rules,
        });
    }
    for (name, child) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        steps.push(Step::Field(name.clone()));
        collect(child, steps, out);
        steps.pop();
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        let list = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListType::Map(
                schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            ),
            _ => ListType::Uncorrelated,
        };
        steps.push(Step::Items(list));
        collect(items, steps, out);
        steps.pop();
    }
    if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        steps.push(Step::Values);
        collect(values, steps, out);
        steps.pop();
    }
}

fn compile(raw: &Value) -> CompiledRule {
    let text = raw
        .get("rule")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let program = Program::compile(&text).map_err(|e| format!("compilation failed: {e}"));
    let transition = program
        .as_ref()
        .is_ok_and(|p| p.references().has_variable("oldSelf"));
    let key = |name: &str| {
        raw.get(name)
            .and_then(Value::as_str)
            .filter(|v| !v.trim().is_empty())
    };
    let message_program = key("messageExpression").and_then(|e| Program::compile(e).ok());
    CompiledRule {
        message_program,
        message: key("message").map(|m| m.trim().to_owned()),
        kind: match key("reason") {
            Some("FieldValueForbidden") => FailureKind::Forbidden,
            Some("FieldValueRequired") => FailureKind::Required,
            Some("FieldValueDuplicate") => FailureKind::Duplicate,
            _ => FailureKind::Invalid,
        },
        field_path: key("fieldPath").map(str::to_owned),
        optional_old_self: raw.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
        transition,
        program,
        text,
    }
}

/// Calls `run` with each value the steps lead to in `value`, the old value
/// that corresponds to it, and its path.
fn visit(
    value: &Value,
    old: Option<&Value>,
    steps: &[Step],
    path: String,
    run: &mut dyn FnMut(&Value, Option<&Value>, &str),
) {
    let Some((step, rest)) = steps.split_first() else {
        run(value, old, &path);
        return;
    };
    match step {
        Step::Field(name) => {
            if let Some(child) = value.get(name) {
                let at = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                visit(child, old.and_then(|o| o.get(name)), rest, at, run);
            }
        }
        Step::Items(list) => {
            let old_items = old.and_then(Value::as_array);
            for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                let old_item = old_items.and_then(|olds| same_item(list, item, olds));
                visit(item, old_item, rest, format!("{path}[{i}]"), run);
            }
        }
        Step::Values => {
            for (key, child) in value.as_object().into_iter().flatten() {
                visit(
                    child,
                    old.and_then(|o| o.get(key)),
                    rest,
                    format!("{path}[{key}]"),
                    run,
                );
            }
        }
    }
}

/// The old item that is `item` on an update, as the list's type says.
fn same_item<'a>(list: &ListType, item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    match list {
        ListType::Uncorrelated => None,
        ListType::Map(keys) => olds
            .iter()
            .find(|old| keys.iter().all(|key| old.get(key) == item.get(key))),
    }
}

impl RuleNode {
    fn run(
        &self,
        base: &Context<'_>,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        out: &mut Vec<RuleFailure>,
    ) {
        if old == Some(value) {
            return;
        }
        let convert = |v: &Value| {
            if self.steps.is_empty() {
                root_to_cel(v, &self.schema)
            } else {
                to_cel(v, Some(&self.schema))
            }
        };
        let old_cel = old.map(convert);
        // Binding a value converts it into the `cel` crate's own form, which
        // costs about as much as the conversion from JSON: once per node.
        let mut scope = base.new_inner_scope();
        scope.add_variable_from_value("self", convert(value));
        let mut plain_old = scope.new_inner_scope();
        if let Some(old) = &old_cel {
            plain_old.add_variable_from_value("oldSelf", old.clone());
        }
        for rule in &self.rules {
            if rule.transition && old.is_none() && !rule.optional_old_self {
                continue;
            }
            let mut optional_old;
            let rule_scope = if rule.optional_old_self {
                optional_old = scope.new_inner_scope();
                let old_self = match &old_cel {
                    Some(old) => OptionalValue::of(old.clone()),
                    None => OptionalValue::none(),
                };
                optional_old.add_variable_from_value("oldSelf", Cel::Opaque(Arc::new(old_self)));
                &optional_old
            } else {
                &plain_old
            };
            if let Some((kind, message)) = rule.check(rule_scope) {
                out.push(RuleFailure {
                    field: rule.field(path),
                    node: path.to_owned(),
                    kind,
                    value_type: self.value_type.clone(),
                    message,
                });
            }
        }
    }
}

impl CompiledRule {
    /// `None` when the rule holds; else the error's kind and message.
    fn check(&self, scope: &Context<'_>) -> Option<(FailureKind, String)> {
        let program = match &self.program {
            Ok(program) => program,
            Err(why) => {
                return Some((
                    FailureKind::Invalid,
                    format!("{why} evaluating rule: {}", self.named()),
                ));
            }
        };
        match program.execute(scope) {
            Ok(Cel::Bool(true)) => None,
            Ok(Cel::Bool(false)) => Some((self.kind, self.message(scope))),
            Ok(other) => Some((
                FailureKind::Invalid,
                format!(
                    "rule did not evaluate to a bool but to {:?} evaluating rule: {}",
                    other.type_of(),
                    self.named()
                ),
            )),
            Err(error) => Some((FailureKind::Invalid, self.evaluation_error(&error))),
        }
    }

    /// The message of a rule that is false: the `messageExpression`'s
    /// result, else the `message`, else `failed rule: <rule>`.
    fn message(&self, scope: &Context<'_>) -> String {
        if let Some(Ok(Cel::String(text))) = self.message_program.as_ref().map(|p| p.execute(scope))
            && !text.trim().is_empty()
        {
            return text.trim().to_owned();
        }
        match &self.message {
            Some(message) => message.clone(),
            None => format!("failed rule: {}", self.text.trim()),
        }
    }

    /// How kube-apiserver names the rule in an error: its message, or its text.
    fn named(&self) -> &str {
        self.message.as_deref().unwrap_or(self.text.trim())
    }

    /// kube-apiserver's words for a rule that failed to evaluate: cel-go's
    /// error (`no such key: max`), then `evaluating rule:` and the rule's
    /// message, or the rule. A function the `cel` crate lacks is named.
    fn evaluation_error(&self, error: &ExecutionError) -> String {
        if let ExecutionError::UndeclaredReference(name) = error {
            return format!(
                "'{name}' is not available to testenv's CEL (the `cel` crate and kube-cel lack it) evaluating rule: {}",
                self.named()
            );
        }
        let text = error.to_string();
        let mut chars = text.chars();
        let cause: String = chars
            .next()
            .map(|first| first.to_lowercase().chain(chars).collect())
            .unwrap_or_default();
        if cause.starts_with("no such overload") {
            format!(
                "'{cause}': call arguments did not match a supported operator, function or macro signature for \
                 rule: {}",
                self.named()
            )
        } else {
            format!("{cause} evaluating rule: {}", self.named())
        }
    }

    /// The field a failure points at: the node's path with the rule's `fieldPath`.
    fn field(&self, node: &str) -> String {
        let joined = match self.field_path.as_deref() {
            None => node.to_owned(),
            Some(path) if path.starts_with('[') => format!("{node}{path}"),
            Some(path) if node.is_empty() => path.trim_start_matches('.').to_owned(),
            Some(path) => format!("{node}.{}", path.trim_start_matches('.')),
        };
        if joined.is_empty() {
            "<nil>".to_owned()
        } else {
            joined
        }
    }
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
        json!({"apiVersion": "t.example.com/v1", "kind": "Widget",
               "metadata": {"name": name, "labels": {"a": "b"}},
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
    fn transition_rules_run_only_on_an_update_and_unchanged_nodes_are_ratcheted() {
        let rules = rules();
        assert_eq!(rules.evaluate(&widget("w1", 1, 2, "big"), None), vec![]);
        let old = widget("w1", 1, 2, "small");
        let failures = rules.evaluate(&widget("w1", 1, 2, "big"), Some(&old));
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert_eq!(failures[0].field, "spec.size");
        assert_eq!(failures[0].kind, FailureKind::Forbidden);
        assert_eq!(failures[0].value_type, "string");
        assert_eq!(failures[0].message, "size is immutable");
        // Stored before the rule: an update that leaves the spec alone passes.
        let stored = widget("w1", 3, 2, "big");
        let mut relabelled = stored.clone();
        relabelled["metadata"]["labels"]["a"] = json!("c");
        assert_eq!(rules.evaluate(&relabelled, Some(&stored)), vec![]);
    }

    #[test]
    fn items_of_a_map_list_see_their_old_selves_by_key_and_optional_old_self_is_optional() {
        let schema = json!({"type": "object", "properties": {"ports": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                "x-kubernetes-validations": [
                    {"rule": "self.port == oldSelf.port", "message": "a port keeps its number"},
                    {"rule": "!oldSelf.hasValue() || self.name == oldSelf.value().name", "optionalOldSelf": true},
                ]},
        }}});
        let rules = Rules::of(&schema).unwrap();
        let old = json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]});
        // Reordered and one added: each item meets its old self by name.
        let new =
            json!({"ports": [{"name": "c", "port": 3}, {"name": "b", "port": 2}, {"name": "a", "port": 1}]});
        assert_eq!(rules.evaluate(&new, Some(&old)), vec![]);
        let changed = json!({"ports": [{"name": "a", "port": 9}]});
        let failures = rules.evaluate(&changed, Some(&old));
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert_eq!(
            (failures[0].field.as_str(), failures[0].message.as_str()),
            ("ports[0]", "a port keeps its number")
        );
    }

    #[test]
    fn matches_keeps_its_patterns_and_names_a_bad_one() {
        let schema = json!({"type": "object", "properties": {"zone": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.matches('^[a-z]+-[0-9]+$')", "message": "a zone is name-number"},
            {"rule": "self == 'never' || !self.matches('[')"},
        ]}}});
        let rules = Rules::of(&schema).unwrap();
        for _ in 0..3 {
            let failures = rules.evaluate(&json!({"zone": "eu-1"}), None);
            assert_eq!(failures.len(), 1, "{failures:#?}");
            assert!(
                failures[0].message.contains("'[' not a valid regex"),
                "{failures:#?}"
            );
        }
        let failures = rules.evaluate(&json!({"zone": "never"}), None);
        assert_eq!(failures[0].message, "a zone is name-number");
    }

    #[test]
    fn bad_input_gets_kube_apiservers_answers() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"},
                           "tags": {"type": "array", "items": {"type": "string"}}},
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not be above max"},
                {"rule": "!has(self.min) || self.min >= 0"},
                {"rule": "!has(self.min) || self.min < 100", "message": "min is small", "messageExpression": "'min ' + self.nosuch"},
                {"rule": "!has(self.tags) || self.tags.sortBy(x, x) == self.tags", "message": "sorted"},
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
        // A function the cel crate lacks is named, and the write refused.
        let unsupported = rules.evaluate(&json!({"spec": {"min": 1, "max": 2, "tags": ["a"]}}), None);
        assert_eq!(unsupported.len(), 1, "{unsupported:#?}");
        assert!(
            unsupported[0].message.contains("'sortBy' is not available"),
            "{unsupported:#?}"
        );
    }
}
