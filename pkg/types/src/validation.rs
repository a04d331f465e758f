//! Kubernetes' string format checks (apimachinery's `util/validation`), with its
//! messages word for word, so errors read as they do from Go tooling.
//!
//! Each check returns the list of problems; an empty list means the value is
//! valid.
//!
//! ```
//! use kinject_types::validation::{is_dns1123_label, is_qualified_name};
//!
//! assert!(is_qualified_name("samples.knative.dev/v1alpha1").is_empty());
//! assert_eq!(is_dns1123_label("a.b"), ["must not contain dots"]);
//! ```

/// Longest DNS-1123 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest label value, and longest name part of a qualified name.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";
const C_IDENTIFIER_ERR: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'";

/// apimachinery's `RegexError`: the message, examples, and the pattern. Its
/// examples read `'a',  or 'b', ` with two spaces before `or`, and so do these.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        examples.join(" or ")
    )
}

/// The length message of `util/validation` (characters) …
fn max_len_chars(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// … and of `api/validate/content`, which qualified names and label values use
/// (bytes).
fn max_len_bytes(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

fn matches_dns1123_label(value: &str) -> bool {
    let b = value.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => edge(first) && edge(last) && b.iter().all(inner),
        _ => false,
    }
}

fn matches_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(matches_dns1123_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(value: &str) -> bool {
    let b = value.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() && b.iter().all(inner)
        }
        _ => false,
    }
}

/// Whether `value` is a DNS-1123 label (RFC 1123): what namespaces and most
/// names of single-segment objects must be (`IsDNS1123Label`).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_chars(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

/// Whether `value` is a DNS-1035 label: what Service names must be
/// (`IsDNS1035Label`), since they become DNS names that may not start with a
/// digit.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_chars(DNS1123_LABEL_MAX_LENGTH));
    }
    let starts_with_letter = value.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    if !(starts_with_letter && matches_dns1123_label(value)) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// Whether `value` may be a key of a ConfigMap's or Secret's data (`IsConfigMapKey`):
/// a file name in the volumes they are mounted as, so no path walking.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_chars(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if value.is_empty() || !value.chars().all(key_char) {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match value {
        "." => errs.push("must not be '.'".to_owned()),
        ".." => errs.push("must not be '..'".to_owned()),
        v if v.starts_with("..") => errs.push("must not start with '..'".to_owned()),
        _ => {}
    }
    errs
}

/// Whether `value` is a DNS-1123 subdomain: what most object names must be
/// (`IsDNS1123Subdomain`).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    subdomain(value, max_len_chars)
}

fn subdomain(value: &str, max_len: impl Fn(usize) -> String) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Which apimachinery release's words a check reports in. Kubernetes 1.35
/// moved the qualified-name and label-value checks to `api/validate/content`,
/// which calls a qualified name a label key and counts lengths in bytes; the
/// releases before (`util/validation`) say "a qualified name" and count
/// characters. The rules themselves are the same in both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wording {
    /// Kubernetes 1.34 and earlier: what a 1.33 kube-apiserver answers.
    UpTo1_34,
    /// Kubernetes 1.35 and later: what [`is_qualified_name`] and
    /// [`is_valid_label_value`] report.
    #[default]
    From1_35,
}

impl Wording {
    fn max_len(self, n: usize) -> String {
        match self {
            Self::UpTo1_34 => max_len_chars(n),
            Self::From1_35 => max_len_bytes(n),
        }
    }

    /// What a value with more than one `/` is told it must be.
    fn qualified_name(self) -> &'static str {
        match self {
            Self::UpTo1_34 => "a qualified name",
            Self::From1_35 => "a valid label key",
        }
    }
}

/// Whether `value` is a qualified name (a label key): an optional DNS-1123
/// subdomain prefix and `/`, then a name of at most 63 characters
/// (`IsQualifiedName`). API versions such as `apps/v1` are checked with it.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    is_qualified_name_worded(value, Wording::From1_35)
}

/// [`is_qualified_name`], its messages worded as `wording`'s release words them.
pub fn is_qualified_name_worded(value: &str, wording: Wording) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    subdomain(prefix, |n| wording.max_len(n))
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "{} {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                wording.qualified_name(),
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(format!("name part {}", wording.max_len(LABEL_VALUE_MAX_LENGTH)));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Whether `value` is a valid label value: empty, or a name part of at most 63
/// characters (`IsValidLabelValue`).
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    is_valid_label_value_worded(value, Wording::From1_35)
}

/// [`is_valid_label_value`], its messages worded as `wording`'s release words them.
pub fn is_valid_label_value_worded(value: &str, wording: Wording) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(wording.max_len(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Longest port name.
const PORT_NAME_MAX_LENGTH: usize = 15;

/// Whether `value` is a port name (an IANA service name), as a named container
/// or Service port must be (`IsValidPortName`): one message per broken rule.
pub fn is_valid_port_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > PORT_NAME_MAX_LENGTH {
        errs.push(max_len_chars(PORT_NAME_MAX_LENGTH));
    }
    let charset = |c: u8| c == b'-' || c.is_ascii_lowercase() || c.is_ascii_digit();
    if value.is_empty() || !value.bytes().all(charset) {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned());
    }
    if !value.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_owned());
    }
    if value.contains("--") {
        errs.push("must not contain consecutive hyphens".to_owned());
    }
    if value.starts_with('-') || value.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_owned());
    }
    errs
}

/// Whether `value` is a C identifier, as a `kind` must be (`IsCIdentifier`).
pub fn is_c_identifier(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let ok = b.first().is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            C_IDENTIFIER_ERR,
            C_IDENTIFIER_FMT,
            &["my_name", "MY_NAME", "MyName"],
        )]
    }
}

/// A Kubernetes API version name (`v1`, `v1alpha1`, `v2beta3`): the form
/// kube-apiserver sorts versions by, and the only one the generator accepts.
pub fn is_kube_version(value: &str) -> Vec<String> {
    if matches_kube_version(value) {
        Vec::new()
    } else {
        vec![format!(
            "must match {KUBE_VERSION_FMT} (for example 'v1', 'v1alpha1' or 'v2beta3') with no leading zeros"
        )]
    }
}

const KUBE_VERSION_FMT: &str = "v[0-9]+((alpha|beta)[0-9]+)?";

fn matches_kube_version(value: &str) -> bool {
    let Some(rest) = value.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return false;
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return true;
    }
    let Some(n) = tail.strip_prefix("alpha").or_else(|| tail.strip_prefix("beta")) else {
        return false;
    };
    !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_labels() {
        assert!(is_dns1123_label("my-name").is_empty());
        assert!(is_dns1123_label("123-abc").is_empty());
        assert_eq!(is_dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(
            is_dns1123_label("Bad"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
              and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', \
              regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(is_dns1123_label("").len() == 1);
        assert_eq!(
            is_dns1123_label(&"a".repeat(64))[0],
            "must be no more than 63 characters"
        );
    }

    #[test]
    fn dns1035_labels() {
        assert!(is_dns1035_label("my-name").is_empty());
        assert!(is_dns1035_label("abc-123").is_empty());
        for bad in ["123-abc", "Bad_Name", "a.b", "-a", "a-", ""] {
            assert_eq!(
                is_dns1035_label(bad),
                [
                    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
                     alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
                     regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                ],
                "{bad:?}"
            );
        }
        assert_eq!(
            is_dns1035_label(&"a".repeat(64))[0],
            "must be no more than 63 characters"
        );
    }

    #[test]
    fn dns1123_subdomains() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert!(!is_dns1123_subdomain("example..com").is_empty());
        assert!(!is_dns1123_subdomain("-example.com").is_empty());
        assert!(is_dns1123_subdomain("example.com.").len() == 1);
        assert_eq!(
            is_dns1123_subdomain("A"),
            [
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
              or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
              used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
    }

    #[test]
    fn qualified_names() {
        for ok in ["v1", "apps/v1", "samples.knative.dev/v1alpha1", "My_Name.x"] {
            assert!(is_qualified_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            is_qualified_name(""),
            [
                "name part must be non-empty",
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and \
                 end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex \
                 used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        assert_eq!(is_qualified_name("/v1")[0], "prefix part must be non-empty");
        assert!(
            is_qualified_name("Bad_Prefix/v1")[0].starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(is_qualified_name("a/b/c")[0].starts_with("a valid label key must consist of"));
        assert!(
            is_qualified_name("a/b/c")[0]
                .ends_with("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
        );
    }

    #[test]
    fn label_values_and_c_identifiers() {
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("my_value").is_empty());
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            ["must be no more than 63 bytes"]
        );
        assert!(is_valid_label_value("-x")[0].starts_with("a valid label must be an empty string"));
        assert!(is_c_identifier("AddressableService").is_empty());
        assert!(is_c_identifier("_x1").is_empty());
        assert_eq!(
            is_c_identifier("1x"),
            [
                "a valid C identifier must start with alphabetic character or '_', followed by a string of \
              alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used \
              for validation is '[A-Za-z_][A-Za-z0-9_]*')"
            ]
        );
    }

    #[test]
    fn releases_before_1_35_word_qualified_names_and_label_values_their_way() {
        let old = Wording::UpTo1_34;
        assert!(is_qualified_name_worded("samples.knative.dev/podOwner", old).is_empty());
        assert!(is_qualified_name_worded("a/b/c", old)[0].starts_with("a qualified name must consist of"));
        assert_eq!(
            is_qualified_name_worded(&format!("x/{}", "a".repeat(64)), old),
            ["name part must be no more than 63 characters"]
        );
        assert_eq!(
            is_qualified_name_worded(&format!("{}/x", "a".repeat(254)), old)[0],
            "prefix part must be no more than 253 characters"
        );
        assert_eq!(
            is_valid_label_value_worded(&"a".repeat(64), old),
            ["must be no more than 63 characters"]
        );
        for value in ["", "a/b/c", "-x", "Bad_Prefix/v1", &"a".repeat(70)] {
            assert_eq!(
                is_qualified_name_worded(value, Wording::From1_35),
                is_qualified_name(value),
                "{value}"
            );
        }
    }

    #[test]
    fn port_names() {
        for ok in ["http", "h2c", "web-8080"] {
            assert!(is_valid_port_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            is_valid_port_name("8080"),
            ["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            is_valid_port_name("-Web--x-"),
            [
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must not contain consecutive hyphens",
                "must not begin or end with a hyphen"
            ]
        );
        assert_eq!(
            is_valid_port_name(""),
            [
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must contain at least one letter (a-z)"
            ]
        );
        assert_eq!(
            is_valid_port_name("a-very-long-port-name"),
            ["must be no more than 15 characters"]
        );
    }

    #[test]
    fn kube_versions() {
        for ok in ["v1", "v1alpha1", "v2beta3", "v10"] {
            assert!(is_kube_version(ok).is_empty(), "{ok}");
        }
        for bad in [
            "v0", "v1alpha", "v1gamma1", "V1", "v_1", "1", "v01", "v1beta01", "",
        ] {
            assert_eq!(is_kube_version(bad).len(), 1, "{bad}");
        }
    }

    #[test]
    fn config_map_keys() {
        assert!(is_config_map_key("key.name_1-A").is_empty());
        assert_eq!(
            is_config_map_key("a/b"),
            [
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(is_config_map_key(".."), ["must not be '..'"]);
        assert_eq!(is_config_map_key("..x"), ["must not start with '..'"]);
    }
}
