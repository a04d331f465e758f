//! Validation errors that carry the path of the offending field, with Knative's
//! messages and path rules (`missing field(s): spec.serviceName`).

use std::collections::BTreeMap;
use std::fmt;

/// Field path component meaning "the field itself".
pub const CURRENT_FIELD: &str = "";

/// Whether a [`FieldError`] rejects the object or only warns about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DiagnosticLevel {
    /// Rejects the object.
    #[default]
    Error,
    /// Reported, but the object is accepted.
    Warning,
}

impl fmt::Display for DiagnosticLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DiagnosticLevel::Error => "Error",
            DiagnosticLevel::Warning => "Warning",
        })
    }
}

/// One or more validation problems, each with the field paths it concerns.
///
/// Build leaves with the constructors, prefix their paths on the way out of a
/// nested validator with [`via_field`](Self::via_field) and friends, and combine
/// several with [`also`](Self::also). An empty `FieldError` (the `Default`) means
/// no problem; [`into_result`](Self::into_result) turns it into `Ok(())`.
///
/// ```
/// use kinject_types::FieldError;
/// let err = FieldError::missing_field(["serviceName"]).via_field("spec");
/// assert_eq!(err.to_string(), "missing field(s): spec.serviceName");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldError {
    message: String,
    paths: Vec<String>,
    level: DiagnosticLevel,
    details: String,
    errors: Vec<FieldError>,
}

impl FieldError {
    /// A problem described by `message` at the given paths.
    pub fn generic(message: impl Into<String>, paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        FieldError {
            message: message.into(),
            paths: paths.into_iter().map(Into::into).collect(),
            ..FieldError::default()
        }
    }

    /// Required fields that are absent or empty.
    pub fn missing_field(paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::generic("missing field(s)", paths)
    }

    /// Fields that must not be set.
    pub fn disallowed_fields(paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::generic("must not set the field(s)", paths)
    }

    /// Deprecated fields that must not be changed.
    pub fn disallowed_update_deprecated_fields(paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::generic("must not update deprecated field(s)", paths)
    }

    /// A field holding a value it must not hold: `invalid value: -1: spec.replicas`.
    pub fn invalid_value(value: impl fmt::Display, path: impl Into<String>) -> Self {
        Self::generic(format!("invalid value: {value}"), [path])
    }

    /// An element of an array holding an invalid value: `invalid value: x: items[2]`.
    pub fn invalid_array_value(value: impl fmt::Display, field: &str, index: usize) -> Self {
        Self::invalid_value(value, CURRENT_FIELD).via_field_index(field, index)
    }

    /// None of a set of mutually exclusive fields is set.
    pub fn missing_one_of(paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::generic("expected exactly one, got neither", paths)
    }

    /// More than one of a set of mutually exclusive fields is set.
    pub fn multiple_one_of(paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::generic("expected exactly one, got both", paths)
    }

    /// A map key that is not allowed.
    pub fn invalid_key_name(key: &str, path: impl Into<String>, details: &[&str]) -> Self {
        FieldError {
            details: details.join(", "),
            ..Self::generic(format!("invalid key name {}", go_quote(key)), [path])
        }
    }

    /// A value outside `lower..=upper`: `expected 1 <= 11 <= 10`.
    pub fn out_of_bounds_value(
        value: impl fmt::Display,
        lower: impl fmt::Display,
        upper: impl fmt::Display,
        path: impl Into<String>,
    ) -> Self {
        Self::generic(format!("expected {lower} <= {value} <= {upper}"), [path])
    }

    /// Adds a longer explanation, printed on the line after the message.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The leaf message (empty for a pure aggregate).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The leaf paths.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// The leaf level.
    pub fn level(&self) -> DiagnosticLevel {
        self.level
    }

    /// True when there is no problem at all.
    pub fn is_empty(&self) -> bool {
        self.message.is_empty() && self.details.is_empty() && self.paths.is_empty() && self.errors.is_empty()
    }

    /// `Ok(())` when empty, else `Err(self)`.
    pub fn into_result(self) -> Result<(), FieldError> {
        if self.is_empty() { Ok(()) } else { Err(self) }
    }

    /// Prefixes every path with `prefix`, as a validator does when it returns
    /// through the field it descended into.
    pub fn via_field(self, prefix: &str) -> Self {
        self.via_fields(&[prefix])
    }

    /// Prefixes every path with several components at once (`via_fields(&["spec", "template"])`).
    pub fn via_fields(self, prefix: &[&str]) -> Self {
        if self.is_empty() {
            return self;
        }
        let paths = self
            .paths
            .iter()
            .map(|old| {
                let mut parts: Vec<&str> = prefix.to_vec();
                parts.push(old);
                flatten(&parts)
            })
            .collect();
        let mut out = FieldError {
            paths,
            errors: Vec::new(),
            ..self.clone()
        };
        for nested in self.errors {
            out = out.also(nested.via_fields(prefix));
        }
        out
    }

    /// Attaches an index to the next field: `err.via_index(2).via_field("items")`
    /// gives `items[2]`.
    pub fn via_index(self, index: usize) -> Self {
        self.via_field(&format!("[{index}]"))
    }

    /// Shorthand for `via_index(index).via_field(field)`.
    pub fn via_field_index(self, field: &str, index: usize) -> Self {
        self.via_index(index).via_field(field)
    }

    /// Attaches a map key to the next field: `labels[app]`.
    pub fn via_key(self, key: &str) -> Self {
        self.via_field(&format!("[{key}]"))
    }

    /// Shorthand for `via_key(key).via_field(field)`.
    pub fn via_field_key(self, field: &str, key: &str) -> Self {
        self.via_key(key).via_field(field)
    }

    /// The same errors at another level.
    pub fn at(self, level: DiagnosticLevel) -> Self {
        if self.is_empty() {
            return self;
        }
        let nested = self.errors;
        let mut out = FieldError {
            level,
            errors: Vec::new(),
            ..self
        };
        for e in nested {
            out = out.also(e.at(level));
        }
        out
    }

    /// Only the errors at `level`; empty when there are none.
    pub fn filter(&self, level: DiagnosticLevel) -> Self {
        let mut out = if self.level == level && !self.message.is_empty() {
            FieldError {
                errors: Vec::new(),
                ..self.clone()
            }
        } else {
            FieldError::default()
        };
        for e in &self.errors {
            out = out.also(e.filter(level));
        }
        out
    }

    /// Both these errors and `other`'s. Accepts a `FieldError` or a validator's
    /// `Result<(), FieldError>`.
    pub fn also(self, other: impl Into<FieldError>) -> Self {
        let other = other.into();
        if other.is_empty() {
            return self;
        }
        let mut out = self;
        out.errors.push(other);
        out
    }

    /// Every leaf error, merged as Knative does: errors with the same level,
    /// message and details are combined with their paths deduplicated and sorted;
    /// the result is sorted by message, then details, then level.
    pub fn wrapped_errors(&self) -> Vec<FieldError> {
        let mut merged: BTreeMap<(String, String, DiagnosticLevel), Vec<String>> = BTreeMap::new();
        let mut leaves = Vec::new();
        self.collect_leaves(&mut leaves);
        for leaf in leaves {
            let paths = merged
                .entry((leaf.message.clone(), leaf.details.clone(), leaf.level))
                .or_default();
            for p in &leaf.paths {
                if !paths.contains(p) {
                    paths.push(p.clone());
                }
            }
        }
        merged
            .into_iter()
            .map(|((message, details, level), mut paths)| {
                paths.sort();
                FieldError {
                    message,
                    paths,
                    level,
                    details,
                    errors: Vec::new(),
                }
            })
            .collect()
    }

    fn collect_leaves<'a>(&'a self, out: &mut Vec<&'a FieldError>) {
        if !self.message.is_empty() {
            out.push(self);
        }
        for e in &self.errors {
            e.collect_leaves(out);
        }
    }
}

impl From<Result<(), FieldError>> for FieldError {
    fn from(result: Result<(), FieldError>) -> Self {
        result.err().unwrap_or_default()
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.wrapped_errors().iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}: {}", e.message, e.paths.join(", "))?;
            if !e.details.is_empty() {
                write!(f, "\n{}", e.details)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

/// Joins path components with dots, attaching `[i]` and `[key]` components to the
/// component before them and dropping empty (current-field) components.
fn flatten(parts: &[&str]) -> String {
    let mut out: Vec<String> = Vec::new();
    for part in parts {
        for p in part.split('.') {
            if p == CURRENT_FIELD {
                continue;
            }
            match out.last_mut() {
                Some(last) if p.starts_with('[') && p.ends_with(']') => last.push_str(p),
                _ => out.push(p.to_owned()),
            }
        }
    }
    out.join(".")
}

/// Quotes a string the way Go's `%q` does, so messages match Knative's byte for byte.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_field_via_spec() {
        let err = FieldError::missing_field(["serviceName"]).via_field("spec");
        assert_eq!(err.to_string(), "missing field(s): spec.serviceName");
    }

    #[test]
    fn invalid_value_message() {
        let err = FieldError::invalid_value(-1, "replicas").via_field("spec");
        assert_eq!(err.to_string(), "invalid value: -1: spec.replicas");
    }

    #[test]
    fn indexes_and_keys_attach_to_the_previous_component() {
        let err = FieldError::missing_field(["name"])
            .via_index(0)
            .via_field("containers")
            .via_field("spec");
        assert_eq!(err.to_string(), "missing field(s): spec.containers[0].name");
        let err = FieldError::invalid_array_value("x", "args", 2).via_field("spec");
        assert_eq!(err.to_string(), "invalid value: x: spec.args[2]");
        let err = FieldError::missing_field([CURRENT_FIELD]).via_field_key("labels", "app");
        assert_eq!(err.to_string(), "missing field(s): labels[app]");
        let err = FieldError::missing_field(["a"]).via_fields(&["spec", "template"]);
        assert_eq!(err.to_string(), "missing field(s): spec.template.a");
    }

    #[test]
    fn aggregation_merges_equal_messages_and_sorts() {
        let err = FieldError::default()
            .also(FieldError::missing_field(["b"]))
            .also(FieldError::invalid_value(3, "c"))
            .also(FieldError::missing_field(["a", "b"]))
            .via_field("spec");
        assert_eq!(
            err.to_string(),
            "invalid value: 3: spec.c\nmissing field(s): spec.a, spec.b"
        );
    }

    #[test]
    fn details_follow_on_the_next_line() {
        let err = FieldError::invalid_key_name("Bad Key", "labels", &["must be a qualified name"]);
        assert_eq!(
            err.to_string(),
            "invalid key name \"Bad Key\": labels\nmust be a qualified name"
        );
    }

    #[test]
    fn empty_errors_are_ok_and_vanish_when_combined() {
        assert!(FieldError::default().into_result().is_ok());
        assert!(FieldError::default().via_field("spec").is_empty());
        let err = FieldError::default().also(Ok(())).also(FieldError::default());
        assert!(err.is_empty());
        let err = FieldError::default().also(Err(FieldError::missing_field(["x"])));
        assert_eq!(err.into_result().unwrap_err().to_string(), "missing field(s): x");
    }

    #[test]
    fn levels_filter_and_relabel() {
        let err = FieldError::missing_field(["a"])
            .also(FieldError::invalid_value(1, "b").at(DiagnosticLevel::Warning));
        assert_eq!(
            err.filter(DiagnosticLevel::Warning).to_string(),
            "invalid value: 1: b"
        );
        assert_eq!(
            err.filter(DiagnosticLevel::Error).to_string(),
            "missing field(s): a"
        );
        assert!(
            FieldError::missing_field(["a"])
                .filter(DiagnosticLevel::Warning)
                .is_empty()
        );
    }

    #[test]
    fn out_of_bounds_and_one_of() {
        assert_eq!(
            FieldError::out_of_bounds_value(11, 1, 10, "buckets").to_string(),
            "expected 1 <= 11 <= 10: buckets"
        );
        assert_eq!(
            FieldError::multiple_one_of(["a", "b"]).to_string(),
            "expected exactly one, got both: a, b"
        );
    }

    #[test]
    fn go_quote_escapes_like_go() {
        assert_eq!(go_quote("webhook"), "\"webhook\"");
        assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_quote("héllo"), "\"héllo\"");
    }
}
