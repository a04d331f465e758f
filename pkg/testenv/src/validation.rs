//! apimachinery's name, label and metadata validation, with its messages.
//!
//! `kinject-types` has the same checks for controllers and the generator; this
//! copy is deliberate. testenv stands in for kube-apiserver, the oracle the
//! framework's tests are judged against, so it depends on no framework crate: a
//! bug in the shared checks must show up as a test failure, not be agreed with.

use serde_json::Value;

use crate::status::{FieldError, FieldErrorKind};

/// apimachinery's `TotalAnnotationSizeLimitB`: the keys and values of an object's
/// annotations together, in bytes.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const QUALIFIED_NAME_WITH_PREFIX_MSG: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_dns_label_chars(s)
}

/// apimachinery's `dns1123LabelFmt`, which has no length limit of its own.
fn is_dns_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// apimachinery's `IsDNS1123Subdomain`: every message. Its pattern limits the whole
/// name, not each of its labels.
fn dns_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_owned());
    }
    if !s.split('.').all(is_dns_label_chars) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_owned());
    }
    errs
}

/// RFC 1123 subdomain (most object names).
pub(crate) fn check_dns_subdomain(s: &str) -> Result<(), String> {
    match dns_subdomain_errors(s).into_iter().next() {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// RFC 1123 label (namespace names).
pub(crate) fn check_dns_label(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    if is_dns_label(s) {
        Ok(())
    } else {
        Err(DNS1123_LABEL_MSG.into())
    }
}

/// RFC 1035 label (service names).
pub(crate) fn check_dns1035_label(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    if is_dns_label(s) && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase) {
        Ok(())
    } else {
        Err(DNS1035_LABEL_MSG.into())
    }
}

/// apimachinery's `qualifiedNameFmt` (no length limit of its own).
fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// apimachinery's `IsQualifiedName`: every message, as `[prefix/]name` label keys,
/// annotation keys and finalizers are checked.
pub(crate) fn qualified_name_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let name = match s.split('/').collect::<Vec<_>>().as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns_subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => return vec![QUALIFIED_NAME_WITH_PREFIX_MSG.to_owned()],
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_qualified_part(name) {
        errs.push(QUALIFIED_NAME_MSG.to_owned());
    }
    errs
}

/// `[prefix/]name`, with its messages joined as a label selector's key reports them.
pub(crate) fn check_qualified_name(s: &str) -> Result<(), String> {
    let errs = qualified_name_errors(s);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

pub(crate) fn check_label_value(s: &str) -> Result<(), String> {
    match label_value_errors(s).into_iter().next() {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// apimachinery's `IsValidLabelValue`: every message.
fn label_value_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    if !(s.is_empty() || is_qualified_part(s)) {
        errs.push(LABEL_VALUE_MSG.to_owned());
    }
    errs
}

/// How an object's name is validated.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NameRule {
    Subdomain,
    Label,
    Dns1035,
}

impl NameRule {
    pub(crate) fn check(self, name: &str) -> Result<(), String> {
        match self {
            Self::Subdomain => check_dns_subdomain(name),
            Self::Label => check_dns_label(name),
            Self::Dns1035 => check_dns1035_label(name),
        }
    }
}

/// `ValidateObjectMeta` for the fields testenv checks.
pub(crate) fn check_meta(meta: &Value, rule: NameRule, errs: &mut Vec<FieldError>) {
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
    } else if let Err(e) = rule.check(name) {
        errs.push(FieldError::invalid("metadata.name", Value::from(name), e));
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
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
    if let Some(ann) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in ann {
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
    if let Some(fins) = meta.get("finalizers").and_then(Value::as_array) {
        for (i, f) in fins.iter().enumerate() {
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
    if let Some(owners) = meta.get("ownerReferences").and_then(Value::as_array) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_dns_subdomain("a.b-c").is_ok());
        assert!(check_dns_subdomain("Foo").is_err());
        assert!(check_dns_label("a.b").is_err());
        assert!(check_dns1035_label("1abc").is_err());
        assert!(check_qualified_name("samples.knative.dev/podOwner").is_ok());
        assert!(check_qualified_name("-x").is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("a b").is_err());
    }

    #[test]
    fn qualified_names_report_every_message() {
        assert!(qualified_name_errors("samples.knative.dev/podOwner").is_empty());
        assert_eq!(
            qualified_name_errors(""),
            ["name part must be non-empty", QUALIFIED_NAME_MSG]
        );
        assert_eq!(qualified_name_errors("a/b/c"), [QUALIFIED_NAME_WITH_PREFIX_MSG]);
        assert_eq!(
            qualified_name_errors("/-x"),
            ["prefix part must be non-empty", QUALIFIED_NAME_MSG]
        );
        assert_eq!(
            qualified_name_errors(&format!("Ex.com/{}", "a".repeat(64))),
            [
                format!("prefix part {DNS1123_SUBDOMAIN_MSG}"),
                "name part must be no more than 63 characters".to_owned()
            ]
        );
        // A subdomain's pattern does not limit the length of each label.
        assert!(qualified_name_errors(&format!("{}.io/x", "a".repeat(64))).is_empty());
        assert_eq!(
            check_qualified_name("/").unwrap_err(),
            format!("prefix part must be non-empty; name part must be non-empty; {QUALIFIED_NAME_MSG}")
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
