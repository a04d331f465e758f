//! apimachinery's name, label and metadata validation, with its messages.
//!
//! `kinject-types` has the same checks for controllers and the generator; this
//! copy is deliberate. testenv stands in for kube-apiserver, the oracle the
//! framework's tests are judged against, so it depends on no framework crate: a
//! bug in the shared checks must show up as a test failure, not be agreed with.

use serde_json::Value;

use crate::status::FieldError;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// RFC 1123 subdomain (most object names).
pub(crate) fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    if s.split('.').all(is_dns_label) {
        Ok(())
    } else {
        Err(DNS1123_SUBDOMAIN_MSG.into())
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

fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// `[prefix/]name` as label keys, annotation keys and finalizers use.
pub(crate) fn check_qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        check_dns_subdomain(p).map_err(|e| format!("prefix part {e}"))?;
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".into());
    }
    if is_qualified_part(name) {
        Ok(())
    } else {
        Err(QUALIFIED_NAME_MSG.into())
    }
}

pub(crate) fn check_label_value(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    if s.is_empty() || is_qualified_part(s) {
        Ok(())
    } else {
        Err(LABEL_VALUE_MSG.into())
    }
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
            if let Err(e) = check_qualified_name(k) {
                errs.push(FieldError::invalid("metadata.labels", Value::from(k.as_str()), e));
            }
            let v = v.as_str().unwrap_or_default();
            if let Err(e) = check_label_value(v) {
                errs.push(FieldError::invalid(
                    "metadata.labels".to_string(),
                    Value::from(v),
                    e,
                ));
            }
        }
    }
    if let Some(ann) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in ann {
            total += k.len() + v.as_str().map_or(0, str::len);
            if let Err(e) = check_qualified_name(&k.to_lowercase()) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    Value::from(k.as_str()),
                    e,
                ));
            }
        }
        if total > 256 * 1024 {
            errs.push(FieldError::invalid(
                "metadata.annotations",
                Value::Null,
                "must have at most 262144 bytes",
            ));
        }
    }
    if let Some(fins) = meta.get("finalizers").and_then(Value::as_array) {
        for (i, f) in fins.iter().enumerate() {
            let f = f.as_str().unwrap_or_default();
            if let Err(e) = check_qualified_name(f) {
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
}
