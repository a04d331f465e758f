//! OpenAPI v2: definitions turned from v3's form into v2's, as kube-apiserver
//! publishes them, and encoded as JSON or as gnostic's `openapi_v2.Document`
//! protobuf, the only form client-go's `OpenAPISchema()` reads.
//!
//! A document is encoded once for the built-in definitions; the CRDs' are appended as
//! a second encoding of the same message, which protobuf parsers merge into the
//! first (repeated fields concatenate), and spliced into the JSON object.

use prost::Message as _;
use serde_json::{Map, Value, json};

use super::discovery_version;
use super::schema::{REF_V3, walk};

const REF_V2: &str = "#/definitions/";
const TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "object", "array"];

/// Definitions in v2's form. As kube-apiserver does for CRDs, what v2 cannot say
/// is dropped (`oneOf`, `anyOf`, `not`, `nullable`), and a nullable, embedded or
/// unknown-fields-preserving schema loses its type and structure, since kubectl's
/// schema reader would otherwise refuse values the server accepts. A `$ref` with
/// siblings, wrapped in `allOf` in v3, is a plain `$ref` with siblings in v2.
pub(super) fn definitions(mut defs: Map<String, Value>) -> Map<String, Value> {
    for def in defs.values_mut() {
        walk(def, &mut to_v2);
    }
    defs
}

fn to_v2(m: &mut Map<String, Value>) {
    if let Some(Value::Array(all)) = m.get("allOf")
        && let [Value::Object(only)] = all.as_slice()
        && only.len() == 1
        && let Some(r) = only.get("$ref").cloned()
    {
        m.remove("allOf");
        m.insert("$ref".into(), r);
    }
    for key in ["allOf", "anyOf", "oneOf", "not"] {
        m.remove(key);
    }
    if let Some(r) = m
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_V3))
    {
        let r = format!("{REF_V2}{r}");
        m.insert("$ref".into(), Value::String(r));
    }
    let flag = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_bool) == Some(true);
    let untyped = m.remove("nullable").is_some_and(|n| n == true)
        || flag(m, "x-kubernetes-preserve-unknown-fields")
        || flag(m, "x-kubernetes-embedded-resource");
    let ty = m.get("type").and_then(Value::as_str);
    let unreadable =
        ty.is_none_or(|t| !TYPES.contains(&t)) || (ty == Some("array") && !m.contains_key("items"));
    if untyped || (m.contains_key("type") && unreadable) {
        m.remove("type");
        m.remove("items");
        m.remove("properties");
    }
    let nullable: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, s)| s.get("nullable") == Some(&Value::Bool(true)))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(required)) = m.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|r| !nullable.iter().any(|n| n == r)));
    }
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": discovery_version()})
}

/// A whole v2 document holding `defs`, with the definitions last, where
/// [`extend_json`] adds to them.
pub(super) fn document_json(defs: &Map<String, Value>) -> String {
    format!(
        "{{\"swagger\":\"2.0\",\"info\":{},\"paths\":{{}},\"definitions\":{}}}",
        info(),
        Value::Object(defs.clone())
    )
}

/// `doc`, from [`document_json`], with `more` added to its definitions.
pub(super) fn extend_json(doc: &str, more: &Map<String, Value>) -> String {
    let more = Value::Object(more.clone()).to_string();
    match (doc.strip_suffix("}}"), more.strip_prefix('{')) {
        (Some(head), Some(tail)) if tail != "}" => {
            let sep = if head.ends_with('{') { "" } else { "," };
            format!("{head}{sep}{tail}}}")
        }
        _ => doc.to_owned(),
    }
}

pub(super) fn document_protobuf(defs: &Map<String, Value>) -> Vec<u8> {
    Document {
        swagger: "2.0".into(),
        info: Some(Info {
            title: "Kubernetes".into(),
            version: discovery_version(),
        }),
        definitions: Some(named_schemas(defs)),
    }
    .encode_to_vec()
}

/// `doc`, from [`document_protobuf`], followed by a document holding only `more`.
pub(super) fn extend_protobuf(doc: &[u8], more: &Map<String, Value>) -> Vec<u8> {
    let mut out = doc.to_vec();
    if !more.is_empty() {
        let extra = Document {
            definitions: Some(named_schemas(more)),
            ..Document::default()
        };
        out.extend(extra.encode_to_vec());
    }
    out
}

fn named_schemas(defs: &Map<String, Value>) -> Definitions {
    Definitions {
        additional_properties: defs
            .iter()
            .map(|(name, s)| NamedSchema {
                name: name.clone(),
                value: Some(schema(s)),
            })
            .collect(),
    }
}

/// gnostic's `Any`: a value as YAML, of which JSON is a subset.
fn any(v: &Value) -> Any {
    Any { yaml: v.to_string() }
}

fn schema(v: &Value) -> Schema {
    let str_of = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let f64_of = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or_default();
    let i64_of = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or_default();
    let bool_of = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or_default();
    let schemas = |k: &str| -> Vec<Schema> {
        match v.get(k) {
            Some(Value::Array(a)) => a.iter().map(schema).collect(),
            Some(s @ Value::Object(_)) => vec![schema(s)],
            _ => Vec::new(),
        }
    };
    let additional_properties = match v.get("additionalProperties") {
        Some(Value::Bool(b)) => Some(Additional::Boolean(*b)),
        Some(s @ Value::Object(_)) => Some(Additional::Schema(Box::new(schema(s)))),
        _ => None,
    };
    Schema {
        r#ref: str_of("$ref"),
        format: str_of("format"),
        title: str_of("title"),
        description: str_of("description"),
        default: v.get("default").map(any),
        maximum: f64_of("maximum"),
        exclusive_maximum: bool_of("exclusiveMaximum"),
        minimum: f64_of("minimum"),
        exclusive_minimum: bool_of("exclusiveMinimum"),
        max_length: i64_of("maxLength"),
        min_length: i64_of("minLength"),
        pattern: str_of("pattern"),
        max_items: i64_of("maxItems"),
        min_items: i64_of("minItems"),
        unique_items: bool_of("uniqueItems"),
        max_properties: i64_of("maxProperties"),
        min_properties: i64_of("minProperties"),
        required: strings(v.get("required")),
        r#enum: v
            .get("enum")
            .and_then(Value::as_array)
            .map(|e| e.iter().map(any).collect())
            .unwrap_or_default(),
        additional_properties: additional_properties.map(|a| AdditionalPropertiesItem { oneof: Some(a) }),
        r#type: v.get("type").and_then(Value::as_str).map(|t| TypeItem {
            value: vec![t.to_owned()],
        }),
        items: v.get("items").map(|_| ItemsItem {
            schema: schemas("items"),
        }),
        properties: v
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| Properties {
                additional_properties: named_schemas(p).additional_properties,
            }),
        read_only: bool_of("readOnly"),
        example: v.get("example").map(any),
        vendor_extension: v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("x-"))
            .map(|(k, x)| NamedAny {
                name: k.clone(),
                value: Some(any(x)),
            })
            .collect(),
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

// The messages of gnostic's OpenAPIv2.proto that kubectl reads, with its field numbers.

#[derive(Clone, PartialEq, prost::Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct AdditionalPropertiesItem {
    #[prost(oneof = "Additional", tags = "1, 2")]
    oneof: Option<Additional>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Additional {
    #[prost(message, boxed, tag = "1")]
    Schema(Box<Schema>),
    #[prost(bool, tag = "2")]
    Boolean(bool),
}

#[derive(Clone, PartialEq, prost::Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "3")]
    title: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(message, optional, tag = "5")]
    default: Option<Any>,
    #[prost(double, tag = "7")]
    maximum: f64,
    #[prost(bool, tag = "8")]
    exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    minimum: f64,
    #[prost(bool, tag = "10")]
    exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    max_length: i64,
    #[prost(int64, tag = "12")]
    min_length: i64,
    #[prost(string, tag = "13")]
    pattern: String,
    #[prost(int64, tag = "14")]
    max_items: i64,
    #[prost(int64, tag = "15")]
    min_items: i64,
    #[prost(bool, tag = "16")]
    unique_items: bool,
    #[prost(int64, tag = "17")]
    max_properties: i64,
    #[prost(int64, tag = "18")]
    min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    r#enum: Vec<Any>,
    #[prost(message, optional, tag = "21")]
    additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(bool, tag = "27")]
    read_only: bool,
    #[prost(message, optional, tag = "30")]
    example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}
