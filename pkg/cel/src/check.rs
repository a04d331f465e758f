//! The checks kube-apiserver makes on a CRD's rules when the CRD is written.

use std::fmt;

use kube_cel::cel::Program;
use serde_json::Value;

use crate::cost::{RULE_COST_LIMIT, SCHEMA_COST_LIMIT, estimate, max_size};
use crate::names::{Field, Scope, field_of, undefined_fields};

/// The reasons a rule may give, as kube-apiserver lists them.
const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// One reason kube-apiserver would refuse a CRD for its rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleProblem {
    /// Where, in the CRD:
    /// `spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`.
    pub field: String,
    /// The kind of field error.
    pub kind: ProblemKind,
    /// What is wrong, in kube-apiserver's words.
    pub detail: String,
}

/// The field error kube-apiserver answers for a [`RuleProblem`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// `Invalid value: <value>`, the value as Go prints it.
    Invalid {
        /// The rule as Go's `%#v` prints it, or the value of one of its keys.
        value: String,
    },
    /// `Forbidden` (the cost limits).
    Forbidden,
    /// `Required value`.
    Required,
    /// `Unsupported value` (a `reason` kube-apiserver does not know).
    NotSupported {
        /// The value given, quoted.
        value: String,
        /// The values kube-apiserver takes.
        allowed: Vec<String>,
    },
}

impl fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ProblemKind::Invalid { value } => {
                write!(f, "{}: Invalid value: {value}: {}", self.field, self.detail)
            }
            ProblemKind::Forbidden => write!(f, "{}: Forbidden: {}", self.field, self.detail),
            ProblemKind::Required => write!(f, "{}: Required value: {}", self.field, self.detail),
            ProblemKind::NotSupported { value, .. } => {
                write!(f, "{}: Unsupported value: {value}: {}", self.field, self.detail)
            }
        }
    }
}

struct Walk<'a> {
    root: &'a Value,
    problems: Vec<RuleProblem>,
    total_cost: u64,
}

/// Every problem kube-apiserver would find in the rules of `schema`, an
/// `openAPIV3Schema` found at `at` in its CRD. Rules that compile are also
/// checked against the schema (the fields they read), and for their cost.
pub fn check_rules(schema: &Value, at: &str) -> Vec<RuleProblem> {
    let mut walk = Walk {
        root: schema,
        problems: Vec::new(),
        total_cost: 0,
    };
    walk.node(schema, at, 1, None);
    if walk.total_cost > SCHEMA_COST_LIMIT {
        walk.problems.push(RuleProblem {
            field: at.to_owned(),
            kind: ProblemKind::Forbidden,
            detail: cost_message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                walk.total_cost,
                SCHEMA_COST_LIMIT,
            ),
        });
    }
    walk.problems
}

impl<'a> Walk<'a> {
    /// Checks the rules at `node` and below; `runs` is how many times a rule
    /// here can run for one object (the sizes of the lists and maps above).
    /// Checks the rules at `node` and below; `runs` is how many times a rule
    /// here can run for one object (the sizes of the lists and maps above),
    /// `uncorrelated` the list above whose items have no old values, if any.
    fn node(&mut self, node: &'a Value, path: &str, runs: u64, uncorrelated: Option<&str>) {
        if let Some(rules) = node.get("x-kubernetes-validations").and_then(Value::as_array) {
            for (i, rule) in rules.iter().enumerate() {
                let at = format!("{path}.x-kubernetes-validations[{i}]");
                self.rule(node, rule, &at, runs, uncorrelated);
            }
        }
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            for (name, child) in properties {
                self.node(child, &format!("{path}.properties[{name}]"), runs, uncorrelated);
            }
        }
        let each = runs.saturating_mul(max_size(node));
        if let Some(items) = node.get("items").filter(|i| i.is_object()) {
            // Only a map list's items meet their old selves, by key.
            let map_list = node.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
            let below = uncorrelated.or((!map_list).then_some(path));
            self.node(items, &format!("{path}.items"), each, below);
        }
        if let Some(values) = node.get("additionalProperties").filter(|a| a.is_object()) {
            self.node(
                values,
                &format!("{path}.additionalProperties"),
                each,
                uncorrelated,
            );
        }
    }

    /// The checks of one rule; `uncorrelated` is the list above whose items
    /// have no old values, where a rule reading `oldSelf` is refused, as
    /// kube-apiserver refuses it.
    fn rule(&mut self, node: &'a Value, raw: &Value, at: &str, runs: u64, uncorrelated: Option<&str>) {
        let text = raw.get("rule").and_then(Value::as_str).unwrap_or_default();
        if text.trim().is_empty() {
            self.problems.push(RuleProblem {
                field: format!("{at}.rule"),
                kind: ProblemKind::Required,
                detail: "rule is not specified".to_owned(),
            });
            return;
        }
        let shown = go_rule(raw);
        let scope = Scope::of_node(self.root, node);
        let program = match compile(text, &scope) {
            Ok(program) => program,
            Err(why) => {
                self.invalid(
                    format!("{at}.rule"),
                    shown.clone(),
                    format!("compilation failed: {why}"),
                );
                return;
            }
        };
        if let Some(expression) = raw.get("messageExpression").and_then(Value::as_str)
            && let Err(why) = compile(expression, &scope)
        {
            self.invalid(
                format!("{at}.messageExpression"),
                shown.clone(),
                format!("messageExpression compilation failed: {why}"),
            );
        }
        let uses_old_self = program.references().has_variable("oldSelf");
        if let Some(optional) = raw.get("optionalOldSelf").and_then(Value::as_bool)
            && !uses_old_self
        {
            self.invalid(
                format!("{at}.optionalOldSelf"),
                optional.to_string(),
                "may not be set if oldSelf is not used in rule".to_owned(),
            );
        }
        if let Some(path) = raw.get("fieldPath").and_then(Value::as_str)
            && !path.is_empty()
            && !valid_field_path(node, path)
        {
            self.invalid(
                format!("{at}.fieldPath"),
                go_quote(path),
                "fieldPath must be a valid path".to_owned(),
            );
        }
        self.reason(raw, at);
        let cost = estimate(program.expression(), &scope).saturating_mul(runs);
        if cost > RULE_COST_LIMIT {
            self.problems.push(RuleProblem {
                field: format!("{at}.rule"),
                kind: ProblemKind::Forbidden,
                detail: cost_message("estimated rule cost", cost, RULE_COST_LIMIT),
            });
        }
        self.total_cost = self.total_cost.saturating_add(cost);
        if let Some(list) = uncorrelated.filter(|_| uses_old_self) {
            self.invalid(
                format!("{at}.rule"),
                go_quote(text),
                format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"),
            );
        }
    }

    /// A `reason` kube-apiserver does not know is refused.
    fn reason(&mut self, raw: &Value, at: &str) {
        if let Some(reason) = raw.get("reason").and_then(Value::as_str)
            && !REASONS.contains(&reason)
        {
            let allowed: Vec<String> = REASONS.iter().map(|r| (*r).to_owned()).collect();
            self.problems.push(RuleProblem {
                field: format!("{at}.reason"),
                detail: format!(
                    "supported values: {}",
                    allowed.iter().map(|a| go_quote(a)).collect::<Vec<_>>().join(", ")
                ),
                kind: ProblemKind::NotSupported {
                    value: go_quote(reason),
                    allowed,
                },
            });
        }
    }

    fn invalid(&mut self, field: String, value: String, detail: String) {
        self.problems.push(RuleProblem {
            field,
            kind: ProblemKind::Invalid { value },
            detail,
        });
    }
}

/// The rule parsed, with every field it reads found in the schema; else
/// cel-go's message (`ERROR: <input>:1:6: undefined field 'foo'` and the
/// line with a caret).
fn compile(text: &str, scope: &Scope<'_>) -> Result<Program, String> {
    let program = Program::compile(text).map_err(|e| e.to_string())?;
    let mut undefined = Vec::new();
    undefined_fields(program.expression(), scope, &mut undefined);
    match undefined.first() {
        None => Ok(program),
        Some(field) => Err(undefined_message(text, field)),
    }
}

fn undefined_message(text: &str, field: &str) -> String {
    // cel-go points at the dot that selects the field.
    let needle = format!(".{field}");
    let at = text.find(&needle).unwrap_or(0);
    let line = text[..at].matches('\n').count() + 1;
    let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let column = text[line_start..at].chars().count();
    let source_line = text.lines().nth(line - 1).unwrap_or(text);
    format!(
        "ERROR: <input>:{line}:{}: undefined field '{field}'\n | {source_line}\n | {}^",
        column + 1,
        ".".repeat(column)
    )
}

/// Whether a rule's `fieldPath` (`.spec.replicas`, `['a.b'].c`) names a
/// field of `node`'s schema.
fn valid_field_path(node: &Value, path: &str) -> bool {
    let mut schema = node;
    let mut rest = path;
    while !rest.is_empty() {
        let (name, after) = if let Some(quoted) = rest.strip_prefix("['") {
            match quoted.split_once("']") {
                Some(split) => split,
                None => return false,
            }
        } else if let Some(dotted) = rest.strip_prefix('.') {
            let end = dotted.find(['.', '[']).unwrap_or(dotted.len());
            (&dotted[..end], &dotted[end..])
        } else {
            return false;
        };
        match field_of(schema, name, false) {
            Field::Found(child) => schema = child,
            Field::Unknown => return true,
            Field::Undefined => return false,
        }
        rest = after;
    }
    true
}

/// `estimated rule cost exceeds budget by factor of 2.5x (...)`, as
/// kube-apiserver words it.
fn cost_message(name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, \
         maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// A string as Go's `%q` prints it.
fn go_quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
}

/// A rule as Go's `%#v` prints kube-apiserver's `ValidationRule`.
fn go_rule(raw: &Value) -> String {
    let text = |key: &str| go_quote(raw.get(key).and_then(Value::as_str).unwrap_or_default());
    let reason = match raw.get("reason").and_then(Value::as_str) {
        Some(reason) => format!("(*apiextensions.FieldValueErrorReason)({})", go_quote(reason)),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_owned(),
    };
    let optional = match raw.get("optionalOldSelf").and_then(Value::as_bool) {
        Some(flag) => format!("(*bool)({flag})"),
        None => "(*bool)(nil)".to_owned(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, \
         FieldPath:{}, OptionalOldSelf:{optional}}}",
        text("rule"),
        text("message"),
        text("messageExpression"),
        text("fieldPath"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check_rules;

    const AT: &str = "spec.versions[0].schema.openAPIV3Schema";

    fn widget(spec_rules: serde_json::Value) -> serde_json::Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer"},
                "size": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "ports": {"type": "array", "maxItems": 10, "items": {"type": "object", "properties": {
                    "name": {"type": "string", "maxLength": 15},
                }}},
            },
            "x-kubernetes-validations": spec_rules,
        }}})
    }

    fn problems(rules: serde_json::Value) -> Vec<String> {
        check_rules(&widget(rules), AT)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn rules_that_compile_and_read_known_fields_pass() {
        let found = problems(json!([
            {"rule": "self.min <= self.max", "message": "min must not be above max"},
            {"rule": "!has(self.size) || self.size == oldSelf.size", "optionalOldSelf": true},
            {"rule": "self.ports.all(p, p.name.size() > 0)", "fieldPath": ".ports", "reason": "FieldValueForbidden"},
            {"rule": "self.tags.all(t, t != '')", "messageExpression": "'tags: ' + self.tags.join(',')"},
        ]));
        assert_eq!(found, Vec::<String>::new());
    }

    #[test]
    fn a_syntax_error_is_refused_with_the_parsers_position() {
        let found = problems(json!([{"rule": "self.min <="}]));
        assert_eq!(found.len(), 1);
        let at = format!("{AT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ");
        assert!(found[0].starts_with(&at), "{}", found[0]);
        assert!(
            found[0].contains(
                "apiextensions.ValidationRule{Rule:\"self.min <=\", Message:\"\", MessageExpression:\"\", \
                 Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: \
                 compilation failed: ERROR: <input>:1:"
            ),
            "{}",
            found[0]
        );
    }

    #[test]
    fn a_field_the_schema_lacks_is_refused_as_cel_go_words_it() {
        let found = problems(json!([{"rule": "self.min <= self.maximum"}]));
        assert_eq!(found.len(), 1);
        assert!(
            found[0].ends_with(
                "compilation failed: ERROR: <input>:1:17: undefined field 'maximum'\n | self.min <= self.maximum\n | ................^"
            ),
            "{}",
            found[0]
        );
        let inside = problems(json!([{"rule": "self.ports.all(p, p.nmae != '')"}]));
        assert!(inside[0].contains("undefined field 'nmae'"), "{inside:?}");
        let root = check_rules(
            &json!({"type": "object", "x-kubernetes-validations": [
                {"rule": "self.metadata.name.size() < 20"},
                {"rule": "self.metadata.labels.size() < 20"},
            ]}),
            AT,
        );
        assert_eq!(root.len(), 1, "{root:?}");
        assert!(root[0].detail.contains("undefined field 'labels'"), "{root:?}");
    }

    #[test]
    fn the_keys_of_a_rule_are_checked_as_kube_apiserver_checks_them() {
        let found = problems(json!([
            {"rule": "self.min <= self.max", "optionalOldSelf": true},
            {"rule": "self.min <= self.max", "fieldPath": ".minimum"},
            {"rule": "self.min <= self.max", "reason": "FieldValueWrong"},
            {"rule": "self.min <= self.max", "messageExpression": "'too big: ' +"},
            {"rule": "  "},
        ]));
        let at = format!("{AT}.properties[spec].x-kubernetes-validations");
        assert_eq!(found.len(), 5, "{found:#?}");
        assert_eq!(
            found[0],
            format!(
                "{at}[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
            )
        );
        assert_eq!(
            found[1],
            format!("{at}[1].fieldPath: Invalid value: \".minimum\": fieldPath must be a valid path")
        );
        assert!(found[2].starts_with(&format!("{at}[2].reason: Unsupported value: \"FieldValueWrong\"")));
        assert!(
            found[3].contains("messageExpression compilation failed: ERROR"),
            "{}",
            found[3]
        );
        assert_eq!(
            found[4],
            format!("{at}[4].rule: Required value: rule is not specified")
        );
    }

    #[test]
    fn old_self_is_refused_where_no_old_value_can_be_found() {
        let schema = |list_type: &str| {
            json!({"type": "object", "properties": {"ports": {
                "type": "array", "maxItems": 10, "x-kubernetes-list-type": list_type, "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}},
                    "x-kubernetes-validations": [{"rule": "self.name == oldSelf.name"}]},
            }}})
        };
        let refused = check_rules(&schema("atomic"), AT);
        assert_eq!(refused.len(), 1, "{refused:#?}");
        assert_eq!(
            refused[0].to_string(),
            format!(
                "{AT}.properties[ports].items.x-kubernetes-validations[0].rule: Invalid value: \"self.name == oldSelf.name\": \
                 oldSelf cannot be used on the uncorrelatable portion of the schema within {AT}.properties[ports]"
            )
        );
        assert_eq!(check_rules(&schema("set"), AT).len(), 1);
        assert_eq!(check_rules(&schema("map"), AT), vec![]);
    }

    #[test]
    fn nested_loops_over_unbounded_lists_cost_too_much_and_bounds_fix_them() {
        let found = problems(json!([{"rule": "self.tags.all(a, self.tags.all(b, a == b))"}]));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].ends_with(
                ".rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try \
                 simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and \
                 strings are declared)"
            ),
            "{}",
            found[0]
        );
        assert!(found[1].starts_with(&format!(
            "{AT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema"
        )));
        // The same loops over a list of at most ten.
        let bounded = problems(json!([{"rule": "self.ports.all(a, self.ports.all(b, a.name == b.name))"}]));
        assert_eq!(bounded, Vec::<String>::new());
        // One loop over an unbounded list is allowed, as kube-apiserver allows it.
        assert_eq!(
            problems(json!([{"rule": "self.tags.all(t, t.size() < 64)"}])),
            Vec::<String>::new()
        );
    }
}
