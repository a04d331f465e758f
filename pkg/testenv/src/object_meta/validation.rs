//! kube-apiserver's `ValidateObjectMeta`, for the fields testenv checks, on the name
//! and label rules of `kinject_types::validation` worded as Kubernetes 1.33 words them.

use kinject_types::validation::{
    Wording, is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_qualified_name_worded,
    is_valid_label_value_worded,
};
use serde_json::{Map, Value};

use crate::errors::{FieldError, FieldErrorKind};

/// testenv answers as Kubernetes 1.33.
const WORDING: Wording = Wording::UpTo1_34;

/// apimachinery's `TotalAnnotationSizeLimitB`: the keys and values of an object's
/// annotations together, in bytes.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// apimachinery's `IsQualifiedName`, as label keys, annotation keys and finalizers
/// are checked.
pub(crate) fn qualified_name_errors(s: &str) -> Vec<String> {
    is_qualified_name_worded(s, WORDING)
}

/// apimachinery's `IsValidLabelValue`.
pub(crate) fn label_value_errors(s: &str) -> Vec<String> {
    is_valid_label_value_worded(s, WORDING)
}

/// How an object's name is validated.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NameRule {
    Subdomain,
    Label,
    Dns1035,
}

impl NameRule {
    /// Every rule `name` breaks, one message each.
    pub(crate) fn errors(self, name: &str) -> Vec<String> {
        match self {
            Self::Subdomain => is_dns1123_subdomain(name),
            Self::Label => is_dns1123_label(name),
            Self::Dns1035 => is_dns1035_label(name),
        }
    }
}

/// `ValidateObjectMeta` for the fields testenv checks.
pub(crate) fn check_meta(meta: &Value, rule: NameRule, errs: &mut Vec<FieldError>) {
    check_name(meta, rule, errs);
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        check_labels(labels, errs);
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        check_annotations(annotations, errs);
    }
    if let Some(finalizers) = meta.get("finalizers").and_then(Value::as_array) {
        check_finalizers(finalizers, errs);
    }
    if let Some(owners) = meta.get("ownerReferences").and_then(Value::as_array) {
        check_owner_references(owners, errs);
    }
}

fn check_name(meta: &Value, rule: NameRule, errs: &mut Vec<FieldError>) {
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
    let generate = meta
        .get("generateName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name.is_empty() {
        if generate.is_empty() {
            errs.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        }
        return;
    }
    for e in rule.errors(name) {
        errs.push(FieldError::invalid("metadata.name", Value::from(name), e));
    }
}

fn check_labels(labels: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    for (k, v) in labels {
        for e in qualified_name_errors(k) {
            errs.push(FieldError::invalid("metadata.labels", Value::from(k.as_str()), e));
        }
        let v = v.as_str().unwrap_or_default();
        for e in label_value_errors(v) {
            errs.push(FieldError::invalid("metadata.labels", Value::from(v), e));
        }
    }
}

fn check_annotations(annotations: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    let mut total = 0;
    for (k, v) in annotations {
        total += k.len() + v.as_str().map_or(0, str::len);
        // Annotation keys are qualified names whatever their case.
        for e in qualified_name_errors(&k.to_lowercase()) {
            errs.push(FieldError::invalid(
                "metadata.annotations",
                Value::from(k.as_str()),
                e,
            ));
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError {
            kind: FieldErrorKind::TooLong,
            field: "metadata.annotations".into(),
            value: None,
            raw: None,
            detail: format!("may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        });
    }
}

fn check_finalizers(finalizers: &[Value], errs: &mut Vec<FieldError>) {
    for (i, f) in finalizers.iter().enumerate() {
        let f = f.as_str().unwrap_or_default();
        for e in qualified_name_errors(f) {
            errs.push(FieldError::invalid(
                format!("metadata.finalizers[{i}]"),
                Value::from(f),
                e,
            ));
        }
    }
}

fn check_owner_references(owners: &[Value], errs: &mut Vec<FieldError>) {
    let mut controllers = 0;
    for o in owners {
        // apimachinery reports these without an index, and calls apiVersion "version".
        for (field, what) in [
            ("apiVersion", "version"),
            ("kind", "kind"),
            ("name", "name"),
            ("uid", "uid"),
        ] {
            if o.get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .is_empty()
            {
                errs.push(FieldError::invalid(
                    format!("metadata.ownerReferences.{field}"),
                    Value::from(""),
                    format!("{what} must not be empty"),
                ));
            }
        }
        if o.get("controller").and_then(Value::as_bool) == Some(true) {
            controllers += 1;
        }
    }
    if controllers > 1 {
        errs.push(FieldError::invalid(
            "metadata.ownerReferences",
            Value::Null,
            "Only one reference can have Controller set to true",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    fn name_errors(meta: Value, rule: NameRule) -> Vec<String> {
        let mut errs = Vec::new();
        check_meta(&meta, rule, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn names_report_every_broken_rule() {
        assert!(name_errors(serde_json::json!({"name": "a.b-c"}), NameRule::Subdomain).is_empty());
        assert_eq!(
            name_errors(serde_json::json!({"name": "a.b"}), NameRule::Label),
            ["metadata.name: Invalid value: \"a.b\": must not contain dots"]
        );
        let long = format!("{}_", "a".repeat(63));
        assert_eq!(
            name_errors(serde_json::json!({"name": long}), NameRule::Dns1035).len(),
            2,
            "too long and not a DNS-1035 label"
        );
    }

    #[test]
    fn qualified_names_are_worded_as_kubernetes_1_33() {
        assert!(qualified_name_errors("samples.knative.dev/podOwner").is_empty());
        assert_eq!(
            qualified_name_errors(""),
            ["name part must be non-empty", QUALIFIED_NAME_MSG]
        );
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert_eq!(
            qualified_name_errors(&format!("x/{}", "a".repeat(64))),
            ["name part must be no more than 63 characters"]
        );
        // A subdomain's pattern does not limit the length of each label.
        assert!(qualified_name_errors(&format!("{}.io/x", "a".repeat(64))).is_empty());
        assert_eq!(
            label_value_errors(&"v".repeat(64)),
            ["must be no more than 63 characters"]
        );
    }

    #[test]
    fn annotations_are_limited_in_total_size_and_key() {
        let check = |ann: Value| {
            let mut errs = Vec::new();
            check_meta(
                &serde_json::json!({"name": "x", "annotations": ann}),
                NameRule::Subdomain,
                &mut errs,
            );
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        let at_limit = "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
        assert!(check(serde_json::json!({"k": at_limit})).is_empty());
        let over = "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        assert_eq!(
            check(serde_json::json!({"k": over})),
            ["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        // Spread over several annotations, keys included.
        let half = "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT / 2);
        assert_eq!(check(serde_json::json!({"a": half, "b": half})).len(), 1);
        // Case does not matter in an annotation key.
        assert!(check(serde_json::json!({"Example.COM/Key": "v"})).is_empty());
        assert_eq!(
            check(serde_json::json!({"a b": "v"})),
            [format!(
                "metadata.annotations: Invalid value: \"a b\": {QUALIFIED_NAME_MSG}"
            )]
        );
    }
}
