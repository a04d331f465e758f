//! The spec fields of a scaffolded kind: `--field replicas:int32` (as many
//! as wanted), or, without any, one example field, `description`, with a
//! length limit that shows a validation rule end to end. Every file that
//! names a spec field (the types, the defaults test, the validation, the
//! table test, the example object) takes them from here, so the fields are
//! given once, on the command line.
//!
//! A field is named as Kubernetes writes it (`successfulJobsHistoryLimit`)
//! or as Rust does (`successful_jobs_history_limit`); the JSON name is the
//! camelCase one either way. Its type is a scalar, a list or map of them,
//! a Kubernetes type by its name (`JobTemplateSpec`, `Quantity`, ...) or
//! any k8s-openapi path, and optional with a `?` after it (or Go's `*`
//! before it, or `Option<...>` around it).

use crate::model::validation::is_dns1123_label;

/// One `--field NAME:TYPE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    /// The Rust name, snake_case (`min_replicas`).
    pub(crate) name: String,
    /// The JSON name, camelCase (`minReplicas`).
    pub(crate) json: String,
    pub(crate) ty: FieldType,
}

/// A field's type: what the Rust declaration, the example value and the
/// example object say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldType {
    String,
    Int32,
    Int64,
    Bool,
    Float64,
    /// A Go duration in text (`30s`, `1h30m`), as `metav1.Duration` is on
    /// the wire.
    Duration,
    /// A list of another type.
    List(Box<FieldType>),
    /// A map from strings to strings (labels, annotations, settings).
    StringMap,
    /// A k8s-openapi type, by its path.
    Kubernetes(String),
    /// Absent unless set.
    Optional(Box<FieldType>),
}

/// Scalars by their OpenAPI (and Go) names and their Rust ones.
const SCALARS: [(&str, &str, FieldType); 6] = [
    ("string", "String", FieldType::String),
    ("int32", "i32", FieldType::Int32),
    ("int64", "i64", FieldType::Int64),
    ("bool", "bool", FieldType::Bool),
    ("float64", "f64", FieldType::Float64),
    ("Duration", "Duration", FieldType::Duration),
];

/// Kubernetes types by name alone, with their k8s-openapi module; any other
/// is named by its path (`k8s_openapi::api::core::v1::Affinity`).
const KUBERNETES_TYPES: [(&str, &str); 22] = [
    ("Affinity", "api::core::v1"),
    ("Container", "api::core::v1"),
    ("EnvVar", "api::core::v1"),
    ("LocalObjectReference", "api::core::v1"),
    ("ObjectReference", "api::core::v1"),
    ("PodSpec", "api::core::v1"),
    ("PodTemplateSpec", "api::core::v1"),
    ("Probe", "api::core::v1"),
    ("ResourceRequirements", "api::core::v1"),
    ("SecretKeySelector", "api::core::v1"),
    ("ConfigMapKeySelector", "api::core::v1"),
    ("SecurityContext", "api::core::v1"),
    ("ServicePort", "api::core::v1"),
    ("Toleration", "api::core::v1"),
    ("Volume", "api::core::v1"),
    ("VolumeMount", "api::core::v1"),
    ("JobTemplateSpec", "api::batch::v1"),
    ("JobSpec", "api::batch::v1"),
    ("DeploymentStrategy", "api::apps::v1"),
    ("LabelSelector", "apimachinery::pkg::apis::meta::v1"),
    ("Quantity", "apimachinery::pkg::api::resource"),
    ("IntOrString", "apimachinery::pkg::util::intstr"),
];

const QUANTITY: &str = "k8s_openapi::apimachinery::pkg::api::resource::Quantity";
const INT_OR_STRING: &str = "k8s_openapi::apimachinery::pkg::util::intstr::IntOrString";

/// The pattern of a Go duration, as `time.ParseDuration` reads it.
const GO_DURATION_PATTERN: &str = r"^-?([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$|^0$";

impl FieldType {
    /// Reads a type as written after the colon.
    fn parse(text: &str) -> Option<FieldType> {
        let text = text.trim();
        let optional = text
            .strip_suffix('?')
            .or_else(|| text.strip_prefix('*'))
            .or_else(|| text.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')));
        if let Some(inner) = optional {
            return match FieldType::parse(inner)? {
                FieldType::Optional(_) => None,
                inner => Some(FieldType::Optional(Box::new(inner))),
            };
        }
        let list = text
            .strip_prefix("[]")
            .or_else(|| text.strip_prefix("Vec<").and_then(|t| t.strip_suffix('>')));
        if let Some(item) = list {
            return match FieldType::parse(item)? {
                FieldType::Optional(_) => None,
                item => Some(FieldType::List(Box::new(item))),
            };
        }
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if [
            "map[string]string",
            "BTreeMap<String,String>",
            "HashMap<String,String>",
        ]
        .contains(&compact.as_str())
        {
            return Some(FieldType::StringMap);
        }
        if let Some((_, _, ty)) = SCALARS.iter().find(|(go, rust, _)| *go == text || *rust == text) {
            return Some(ty.clone());
        }
        if let Some((name, module)) = KUBERNETES_TYPES.iter().find(|(name, _)| *name == text) {
            return Some(FieldType::Kubernetes(format!("k8s_openapi::{module}::{name}")));
        }
        let is_path = text.starts_with("k8s_openapi::")
            && text
                .split("::")
                .all(|segment| syn::parse_str::<syn::Ident>(segment).is_ok());
        is_path.then(|| FieldType::Kubernetes(text.to_owned()))
    }

    /// The type as Rust code.
    fn rust(&self) -> String {
        match self {
            FieldType::String | FieldType::Duration => "String".to_owned(),
            FieldType::Int32 => "i32".to_owned(),
            FieldType::Int64 => "i64".to_owned(),
            FieldType::Bool => "bool".to_owned(),
            FieldType::Float64 => "f64".to_owned(),
            FieldType::List(item) => format!("Vec<{}>", item.rust()),
            FieldType::StringMap => "std::collections::BTreeMap<String, String>".to_owned(),
            FieldType::Kubernetes(path) => path.clone(),
            FieldType::Optional(inner) => format!("Option<{}>", inner.rust()),
        }
    }

    /// An example value as Rust code.
    fn example_rust(&self) -> String {
        match self {
            FieldType::String => "\"example\".into()".to_owned(),
            FieldType::Duration => "\"30s\".into()".to_owned(),
            FieldType::Int32 | FieldType::Int64 => "1".to_owned(),
            FieldType::Bool => "true".to_owned(),
            FieldType::Float64 => "0.5".to_owned(),
            FieldType::List(item) => format!("vec![{}]", item.example_rust()),
            FieldType::StringMap => "[(\"example\".to_owned(), \"value\".to_owned())].into()".to_owned(),
            FieldType::Kubernetes(path) if path == QUANTITY => format!("{QUANTITY}(\"1\".into())"),
            FieldType::Kubernetes(path) if path == INT_OR_STRING => format!("{INT_OR_STRING}::Int(1)"),
            FieldType::Kubernetes(_) => "Default::default()".to_owned(),
            FieldType::Optional(inner) => format!("Some({})", inner.example_rust()),
        }
    }

    /// The same example value in YAML.
    fn example_yaml(&self) -> String {
        match self {
            FieldType::String => "example".to_owned(),
            FieldType::Duration => "30s".to_owned(),
            FieldType::Int32 | FieldType::Int64 => "1".to_owned(),
            FieldType::Bool => "true".to_owned(),
            FieldType::Float64 => "0.5".to_owned(),
            FieldType::List(item) => format!("[{}]", item.example_yaml()),
            FieldType::StringMap => "{example: value}".to_owned(),
            FieldType::Kubernetes(path) if path == QUANTITY => "\"1\"".to_owned(),
            FieldType::Kubernetes(path) if path == INT_OR_STRING => "1".to_owned(),
            FieldType::Kubernetes(_) => "{}".to_owned(),
            FieldType::Optional(inner) => inner.example_yaml(),
        }
    }

    /// The attributes above the field: how serde reads an absent value, and
    /// what the schema says beyond the type.
    fn attributes(&self) -> String {
        match self {
            FieldType::Optional(inner) => {
                let mut attributes =
                    "    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n".to_owned();
                if **inner == FieldType::Duration {
                    attributes.push_str(&duration_pattern());
                }
                attributes
            }
            // Empty is no duration; written back as "" it would break the pattern.
            FieldType::Duration => format!(
                "    #[serde(default, skip_serializing_if = \"String::is_empty\")]\n{}",
                duration_pattern()
            ),
            _ => "    #[serde(default)]\n".to_owned(),
        }
    }
}

fn duration_pattern() -> String {
    format!("    #[schemars(regex(pattern = r\"{GO_DURATION_PATTERN}\"))]\n")
}

/// The types `--field` takes, for its errors.
fn type_names() -> String {
    let scalars = SCALARS.iter().map(|(go, _, _)| *go);
    let kubernetes = KUBERNETES_TYPES.iter().map(|(name, _)| *name);
    let mut names: Vec<&str> = scalars.collect();
    names.extend(["[]T", "map[string]string"]);
    names.extend(kubernetes);
    format!(
        "{}, a k8s_openapi:: path, and T? for an optional one",
        names.join(", ")
    )
}

/// Parses every `--field`; each malformed one is a problem of its own.
pub(crate) fn parse(fields: &[String], problems: &mut Vec<String>) -> Vec<Field> {
    let mut parsed: Vec<Field> = Vec::new();
    for given in fields {
        let Some((name, ty)) = given.split_once(':') else {
            problems.push(format!(
                "--field {given:?} has no type; write NAME:TYPE, e.g. replicas:int32 (types: {})",
                type_names()
            ));
            continue;
        };
        let (name, ty) = (name.trim(), ty.trim());
        let Some(ty) = FieldType::parse(ty) else {
            problems.push(format!(
                "--field {given:?}: {ty:?} is not a type it takes; write one of {}",
                type_names()
            ));
            continue;
        };
        let Some((name, json)) = names_of(name) else {
            problems.push(format!(
                "--field {given:?}: {name:?} is not a field name; write it as Kubernetes does \
                 (minReplicas) or as Rust does (min_replicas)"
            ));
            continue;
        };
        if parsed.iter().any(|f| f.name == name) {
            problems.push(format!("--field {name:?} is given twice"));
            continue;
        }
        parsed.push(Field { name, json, ty });
    }
    parsed
}

/// The Rust and JSON names of a field written either way, or `None` for a
/// name neither Kubernetes nor Rust would give a field.
fn names_of(given: &str) -> Option<(String, String)> {
    let (snake, json) = if given.contains('_') {
        (given.to_owned(), camel_json(given))
    } else {
        (snake_of(given), given.to_owned())
    };
    let label = snake.replace('_', "-");
    let valid = is_dns1123_label(&label).is_empty()
        && snake.starts_with(|c: char| c.is_ascii_lowercase())
        && !snake.contains("__")
        && json.starts_with(|c: char| c.is_ascii_lowercase())
        && json.chars().all(|c| c.is_ascii_alphanumeric())
        && syn::parse_str::<syn::Ident>(&snake).is_ok();
    valid.then_some((snake, json))
}

/// `minReplicas` → `min_replicas`; a run of capitals is one word
/// (`podIP` → `pod_ip`).
fn snake_of(camel: &str) -> String {
    let chars: Vec<char> = camel.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let after_lower = i > 0 && chars[i - 1].is_ascii_lowercase();
            let starts_word = i > 0
                && chars[i - 1].is_ascii_uppercase()
                && chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if after_lower || starts_word {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl FieldType {
    /// True for a Kubernetes object type, whose schema (with every one of
    /// its descriptions) goes into the CRD whole.
    fn embeds_kubernetes_object(&self) -> bool {
        match self {
            FieldType::Kubernetes(path) => path != QUANTITY && path != INT_OR_STRING,
            FieldType::List(inner) | FieldType::Optional(inner) => inner.embeds_kubernetes_object(),
            _ => false,
        }
    }
}

/// The description limit of a kind whose spec embeds Kubernetes objects: a
/// `JobTemplateSpec` alone brings 320 KB of descriptions, past the 256 KiB
/// of the annotation plain `kubectl apply` keeps a copy of the CRD in; cut
/// to 120 bytes each, it takes 182 KB.
pub(crate) const EMBEDDED_DESCRIPTION_LIMIT: usize = 120;

/// The `#[kind]` options and the comment above them that `fields` need.
pub(crate) fn kind_options(fields: &[Field]) -> (String, String) {
    if !fields.iter().any(|f| f.ty.embeds_kubernetes_object()) {
        return (String::new(), String::new());
    }
    (
        format!(", max_description_len = {EMBEDDED_DESCRIPTION_LIMIT}"),
        "// The Kubernetes types in the spec bring their descriptions into the CRD;\n\
         // cut short, the CRD fits the 256 KiB `kubectl apply` keeps a copy in.\n"
            .to_owned(),
    )
}

/// What the templates say about the spec's fields.
pub(crate) struct SpecText {
    /// The fields of `<Kind>Spec`, as Rust.
    pub(crate) declarations: String,
    /// A `<Kind>Spec` literal with an example value in every field.
    pub(crate) example: String,
    /// The example object's `spec:` lines.
    pub(crate) sample: String,
}

/// The example field's text when `fields` is empty.
pub(crate) fn spec_text(kind: &str, fields: &[Field], max_description: usize) -> SpecText {
    if fields.is_empty() {
        return SpecText {
            declarations: format!(
                "    /// What this {kind} is for, in words, for the people who read it; at\n    \
                 /// most {max_description} characters.\n    \
                 #[serde(default, skip_serializing_if = \"String::is_empty\")]\n    \
                 #[schemars(length(max = {max_description}))]\n    \
                 pub description: String,\n"
            ),
            example: format!("{kind}Spec {{\n        description: \"written by its user\".into(),\n    }}"),
            sample: format!("  description: An example {kind}, from hack/new-kind.sh.\n"),
        };
    }
    let declarations = fields
        .iter()
        .map(|f| {
            // `rename_all = "camelCase"` gives `podIp` for `pod_ip`.
            let rename = if camel_json(&f.name) == f.json {
                String::new()
            } else {
                format!("    #[serde(rename = \"{}\")]\n", f.json)
            };
            format!(
                "    /// `{}`: what it asks of the {kind}. This comment is the field's\n    \
                 /// description in the CRD.\n{rename}{}    \
                 pub {}: {},\n",
                f.json,
                f.ty.attributes(),
                f.name,
                f.ty.rust()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let values: String = fields
        .iter()
        .map(|f| format!("        {}: {},\n", f.name, f.ty.example_rust()))
        .collect();
    let sample: String = fields
        .iter()
        .map(|f| format!("  {}: {}\n", f.json, f.ty.example_yaml()))
        .collect();
    SpecText {
        declarations,
        example: format!("{kind}Spec {{\n{values}    }}"),
        sample,
    }
}

/// `min_replicas` → `minReplicas`, as `#[serde(rename_all = "camelCase")]`.
fn camel_json(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_parse_by_go_or_rust_type_and_bad_ones_say_how_to_fix() {
        let mut problems = Vec::new();
        let fields = parse(
            &[
                "replicas:int32".into(),
                "min_ready:i64".into(),
                "tags:[]string".into(),
            ],
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(fields[1].ty, FieldType::Int64);
        assert_eq!(fields[2].ty.rust(), "Vec<String>");
        parse(
            &[
                "replicas".into(),
                "Replicas:int32".into(),
                "size:uint8".into(),
                "a:bool".into(),
                "a:bool".into(),
                "b:int32??".into(),
            ],
            &mut problems,
        );
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(
            problems[0].contains("write NAME:TYPE, e.g. replicas:int32"),
            "{}",
            problems[0]
        );
        assert!(problems[1].contains("is not a field name"), "{}", problems[1]);
        assert!(
            problems[2].contains("is not a type it takes; write one of string, int32"),
            "{}",
            problems[2]
        );
        assert!(problems[3].contains("given twice"), "{}", problems[3]);
        assert!(
            problems[4].contains("\"int32??\" is not a type"),
            "{}",
            problems[4]
        );
    }

    #[test]
    fn names_are_taken_as_kubernetes_or_rust_writes_them() {
        let fields = parse(
            &[
                "successfulJobsHistoryLimit:int32".into(),
                "failed_jobs_history_limit:int32".into(),
                "podIP:string".into(),
                "x:string".into(),
            ],
            &mut Vec::new(),
        );
        let names: Vec<(&str, &str)> = fields
            .iter()
            .map(|f| (f.name.as_str(), f.json.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("successful_jobs_history_limit", "successfulJobsHistoryLimit"),
                ("failed_jobs_history_limit", "failedJobsHistoryLimit"),
                ("pod_ip", "podIP"),
                ("x", "x"),
            ]
        );
        let text = spec_text("Cron", &fields, 256);
        assert!(
            text.declarations.contains("    #[serde(rename = \"podIP\")]\n"),
            "{}",
            text.declarations
        );
        assert_eq!(
            text.declarations.matches("rename").count(),
            1,
            "{}",
            text.declarations
        );
        assert!(
            text.sample.contains("  successfulJobsHistoryLimit: 1\n"),
            "{}",
            text.sample
        );
    }

    #[test]
    fn kubernetes_types_maps_lists_and_optional_fields() {
        let mut problems = Vec::new();
        let fields = parse(
            &[
                "jobTemplate:JobTemplateSpec".into(),
                "cpu:Quantity?".into(),
                "labels:map[string]string".into(),
                "every:Duration".into(),
                "suspend:*bool".into(),
                "affinity:k8s_openapi::api::core::v1::Affinity".into(),
                "ports:[]int32".into(),
                "selector:Option<LabelSelector>".into(),
            ],
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        let rust: Vec<String> = fields.iter().map(|f| f.ty.rust()).collect();
        assert_eq!(
            rust,
            [
                "k8s_openapi::api::batch::v1::JobTemplateSpec",
                "Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>",
                "std::collections::BTreeMap<String, String>",
                "String",
                "Option<bool>",
                "k8s_openapi::api::core::v1::Affinity",
                "Vec<i32>",
                "Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>",
            ]
        );
        let text = spec_text("Cron", &fields, 256);
        assert!(
            text.example
                .contains("        job_template: Default::default(),\n"),
            "{}",
            text.example
        );
        assert!(
            text.example
                .contains("cpu: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(\"1\".into()))"),
            "{}",
            text.example
        );
        assert!(
            text.sample.contains("  jobTemplate: {}\n  cpu: \"1\"\n"),
            "{}",
            text.sample
        );
        assert!(
            text.sample.contains("  labels: {example: value}\n"),
            "{}",
            text.sample
        );
        assert!(
            text.declarations
                .contains("skip_serializing_if = \"Option::is_none\")]\n    pub suspend: Option<bool>,"),
            "{}",
            text.declarations
        );
        assert!(
            text.declarations.contains("#[schemars(regex(pattern"),
            "{}",
            text.declarations
        );
        assert!(kind_options(&fields).0.contains("max_description_len = 120"));
        let small = parse(&["cpu:Quantity".into(), "n:int32".into()], &mut Vec::new());
        assert_eq!(kind_options(&small), (String::new(), String::new()));
        let mut problems = Vec::new();
        parse(
            &["a:k8s_openapi::api::core::v1::".into(), "b:Pods".into()],
            &mut problems,
        );
        assert_eq!(problems.len(), 2, "{problems:#?}");
    }

    #[test]
    fn every_file_gets_the_same_fields() {
        let fields = parse(&["min_replicas:int32".into()], &mut Vec::new());
        let text = spec_text("Cart", &fields, 256);
        assert!(
            text.declarations.contains("    pub min_replicas: i32,\n"),
            "{}",
            text.declarations
        );
        assert!(
            text.declarations.contains("`minReplicas`"),
            "{}",
            text.declarations
        );
        assert_eq!(text.example, "CartSpec {\n        min_replicas: 1,\n    }");
        assert_eq!(text.sample, "  minReplicas: 1\n");
        let example = spec_text("Cart", &[], 256);
        assert!(example.declarations.contains("pub description: String"));
    }
}
