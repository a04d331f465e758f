//! A CEL validation rule the API server enforces (`x-kubernetes-validations`),
//! as a value `#[rule(...)]` markers expand to.
//!
//! A rule is added to the schema where its marker sits: on a struct, the
//! rule's `self` is a value of the struct; on a field, the field's value.
//! `#[rules]` (from `kinject-macros`) turns the markers of a
//! `#[derive(JsonSchema)]` struct into `#[schemars(transform = ...)]`
//! attributes with these values, and `#[derive(Kind)]` adds those on a kind
//! itself (at the root) and on its `spec` and `status` fields.
//!
//! ```
//! use kinject_types::Rule;
//! use schemars::{JsonSchema, json_schema};
//!
//! #[derive(JsonSchema)]
//! #[schemars(transform = Rule::new("self.min <= self.max").message("min must not be above max"))]
//! struct Range {
//!     min: i32,
//!     max: i32,
//! }
//! let schema = schemars::schema_for!(Range);
//! assert_eq!(
//!     schema.get("x-kubernetes-validations"),
//!     Some(&serde_json::json!([{"rule": "self.min <= self.max", "message": "min must not be above max"}]))
//! );
//! ```

use schemars::Schema;
use schemars::transform::Transform;
use serde_json::{Map, Value};

/// The key under which a rule carries the place of its marker, read by the
/// CRD generator to name `file:line` in an error and removed from every CRD
/// (see [`crate::schema`]).
pub const DEFINED_AT: &str = "x-kinject-defined-at";

/// One `x-kubernetes-validations` entry: kube-apiserver's `ValidationRule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rule {
    /// The CEL expression, true when the value is valid: `self.min <= self.max`.
    pub rule: &'static str,
    /// What the API server answers when the rule is false.
    pub message: Option<&'static str>,
    /// A CEL expression that computes the message from the value.
    pub message_expression: Option<&'static str>,
    /// The reason of the field error: `FieldValueInvalid` (the default),
    /// `FieldValueForbidden`, `FieldValueRequired` or `FieldValueDuplicate`.
    pub reason: Option<&'static str>,
    /// The field the error points at, from the rule's node: `.max`.
    pub field_path: Option<&'static str>,
    /// Whether a transition rule also runs on create, with `oldSelf` null
    /// (else it runs only on updates).
    pub optional_old_self: Option<bool>,
    /// `file:line` of the marker, for the generator's errors.
    pub defined_at: Option<&'static str>,
}

impl Rule {
    /// A rule with only its expression.
    #[must_use]
    pub const fn new(rule: &'static str) -> Self {
        Rule {
            rule,
            message: None,
            message_expression: None,
            reason: None,
            field_path: None,
            optional_old_self: None,
            defined_at: None,
        }
    }

    /// With the message the API server answers when the rule is false.
    #[must_use]
    pub const fn message(mut self, message: &'static str) -> Self {
        self.message = Some(message);
        self
    }

    /// With a CEL expression computing the message.
    #[must_use]
    pub const fn message_expression(mut self, expression: &'static str) -> Self {
        self.message_expression = Some(expression);
        self
    }

    /// With the reason of the field error (`FieldValueForbidden`, ...).
    #[must_use]
    pub const fn reason(mut self, reason: &'static str) -> Self {
        self.reason = Some(reason);
        self
    }

    /// With the field the error points at, from the rule's node (`.max`).
    #[must_use]
    pub const fn field_path(mut self, path: &'static str) -> Self {
        self.field_path = Some(path);
        self
    }

    /// With `optionalOldSelf`.
    #[must_use]
    pub const fn optional_old_self(mut self, optional: bool) -> Self {
        self.optional_old_self = Some(optional);
        self
    }

    /// With the place of its marker (`apis/src/widget_types.rs:12`).
    #[must_use]
    pub const fn defined_at(mut self, place: &'static str) -> Self {
        self.defined_at = Some(place);
        self
    }

    /// The rule as a CRD carries it (with the place of its marker under
    /// [`DEFINED_AT`], which the CRD builders remove).
    pub fn to_json(&self) -> Value {
        let mut rule = Map::new();
        let mut text = |key: &str, value: Option<&str>| {
            if let Some(value) = value {
                rule.insert(key.to_owned(), Value::from(value));
            }
        };
        text("rule", Some(self.rule));
        text("message", self.message);
        text("messageExpression", self.message_expression);
        text("reason", self.reason);
        text("fieldPath", self.field_path);
        text(DEFINED_AT, self.defined_at);
        if let Some(optional) = self.optional_old_self {
            rule.insert("optionalOldSelf".to_owned(), Value::Bool(optional));
        }
        Value::Object(rule)
    }

    /// Appends the rule to `schema`'s `x-kubernetes-validations`.
    pub fn add_to(&self, schema: &mut Value) {
        if let Some(object) = schema.as_object_mut() {
            self.push_to(object);
        }
    }

    fn push_to(&self, object: &mut Map<String, Value>) {
        let rules = object
            .entry("x-kubernetes-validations")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(rules) = rules {
            rules.push(self.to_json());
        }
    }
}

impl Transform for Rule {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            self.push_to(object);
        }
    }
}
