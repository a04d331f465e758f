//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`) of built-in kinds,
//! turned into the JSON a client would have sent for the same Go object.
//!
//! A body is the `k8s\0` magic and a `runtime.Unknown` whose `raw` holds the object as
//! the message of the kind its `typeMeta` names. prost decodes both into k8s-pb's
//! types; [`Json`] then writes each message as Go's encoding/json writes the Go struct
//! it was marshalled from, so the rest of the server handles one body format.
//!
//! k8s-pb has neither serde support nor conversions to k8s-openapi, and prost keeps no
//! field names at run time, so the [`Json`] impls of its messages are generated into
//! `proto/generated.rs` by `tests/integration/proto_generated.rs`, which reads both crates'
//! sources: k8s-pb for each message's fields, k8s-openapi for their JSON names (prost's
//! snake case loses the case of names such as `podIPs` and `nonResourceURLs`). A field
//! k8s-openapi does not name is one Go embeds, and its fields are written inline. The
//! generator starts from the kinds the server serves (and the `scale` subresource's
//! Scale), so every one of them decodes. Reflection over descriptors (prost-reflect)
//! would need a descriptor set, which k8s-pb does not ship, and would leave the JSON
//! names to find all the same.
//!
//! The types whose JSON is not their message are written by hand below: `Time` and
//! `MicroTime` (RFC 3339 text), `IntOrString` (a number or a string), `Quantity` (its
//! string), the raw-JSON holders (`RawExtension`, `FieldsV1`, apiextensions' `JSON`) and
//! the `JSONSchemaPropsOr*` unions.
//!
//! One difference from Go remains: a scalar that Go keeps in a pointer (`replicas`,
//! `automountServiceAccountToken`) and a client sets to its zero value reads as unset.
//! Go marshals every non-pointer scalar even when it is zero, so a zero on the wire is
//! far more often an unset non-pointer field, which its JSON leaves out, and the wire
//! format does not say which of the two a field is.

// Formatted by its generator, which the check of the file compares with.
#[rustfmt::skip]
mod generated;

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message as _;
use serde_json::{Map, Value};

/// The magic in front of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\x00";

/// A value as Go's encoding/json writes the Go value a message was unmarshalled into.
pub(crate) trait Json {
    fn json(&self) -> Result<Value, String>;

    /// Whether a struct field holding this value is left out: Kubernetes tags optional
    /// fields `omitempty`, and Go marshals non-pointer scalars even when they are zero.
    /// Go never leaves out a struct, so a message present on the wire is written.
    fn omitted(&self) -> bool {
        false
    }
}

impl Json for String {
    fn json(&self) -> Result<Value, String> {
        Ok(Value::String(self.clone()))
    }
    fn omitted(&self) -> bool {
        self.is_empty()
    }
}

impl Json for bool {
    fn json(&self) -> Result<Value, String> {
        Ok(Value::Bool(*self))
    }
    fn omitted(&self) -> bool {
        !*self
    }
}

impl Json for i32 {
    fn json(&self) -> Result<Value, String> {
        Ok(Value::from(*self))
    }
    fn omitted(&self) -> bool {
        *self == 0
    }
}

impl Json for i64 {
    fn json(&self) -> Result<Value, String> {
        Ok(Value::from(*self))
    }
    fn omitted(&self) -> bool {
        *self == 0
    }
}

impl Json for f64 {
    fn json(&self) -> Result<Value, String> {
        // Go writes whole floats without a fraction (`1`, not `1.0`); below 2^53 the
        // conversion to an integer is exact.
        if self.fract() == 0.0 && self.abs() < 9_007_199_254_740_992.0 {
            return Ok(Value::from(*self as i64));
        }
        serde_json::Number::from_f64(*self)
            .map(Value::Number)
            .ok_or_else(|| format!(": unsupported value: {self}"))
    }
    fn omitted(&self) -> bool {
        *self == 0.0
    }
}

/// `[]byte`, which Go writes as standard base64.
impl Json for Vec<u8> {
    fn json(&self) -> Result<Value, String> {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }
    fn omitted(&self) -> bool {
        self.is_empty()
    }
}

impl<T: Json> Json for Option<T> {
    fn json(&self) -> Result<Value, String> {
        self.as_ref().map_or(Ok(Value::Null), Json::json)
    }
    fn omitted(&self) -> bool {
        self.as_ref().is_none_or(Json::omitted)
    }
}

impl<T: Json> Json for Box<T> {
    fn json(&self) -> Result<Value, String> {
        (**self).json()
    }
    fn omitted(&self) -> bool {
        (**self).omitted()
    }
}

impl<T: Json> Json for Vec<T> {
    fn json(&self) -> Result<Value, String> {
        self.iter()
            .enumerate()
            .map(|(i, v)| v.json().map_err(|e| format!("[{i}]{e}")))
            .collect::<Result<_, _>>()
            .map(Value::Array)
    }
    fn omitted(&self) -> bool {
        self.is_empty()
    }
}

impl<T: Json> Json for BTreeMap<String, T> {
    fn json(&self) -> Result<Value, String> {
        self.iter()
            .map(|(k, v)| Ok((k.clone(), v.json().map_err(|e| format!("[{k}]{e}"))?)))
            .collect::<Result<Map<_, _>, String>>()
            .map(Value::Object)
    }
    fn omitted(&self) -> bool {
        self.is_empty()
    }
}

/// The JSON object of a message, built field by field.
#[derive(Default)]
struct Obj(Map<String, Value>);

impl Obj {
    fn field(&mut self, name: &str, v: &impl Json) -> Result<(), String> {
        if !v.omitted() {
            let v = v.json().map_err(|e| format!(".{name}{e}"))?;
            self.0.insert(name.to_owned(), v);
        }
        Ok(())
    }

    /// A Go embedded struct, whose fields JSON writes as the outer struct's own.
    fn inline(&mut self, v: &impl Json) -> Result<(), String> {
        if let Value::Object(m) = v.json()? {
            self.0.extend(m);
        }
        Ok(())
    }

    fn done(self) -> Result<Value, String> {
        Ok(Value::Object(self.0))
    }
}

/// `metav1.Time`: whole seconds, as Go's unmarshaller truncates them.
impl Json for meta::Time {
    fn json(&self) -> Result<Value, String> {
        // An empty message is Go's zero time, which JSON writes as null.
        if self.seconds.is_none() && self.nanos.is_none() {
            return Ok(Value::Null);
        }
        timestamp(self.seconds.unwrap_or_default(), 0, "%Y-%m-%dT%H:%M:%SZ")
    }
}

/// `metav1.MicroTime`: truncated to microseconds, as Go's unmarshaller does.
impl Json for meta::MicroTime {
    fn json(&self) -> Result<Value, String> {
        if self.seconds.is_none() && self.nanos.is_none() {
            return Ok(Value::Null);
        }
        let micros = self.nanos.unwrap_or_default() / 1000 * 1000;
        timestamp(self.seconds.unwrap_or_default(), micros, "%Y-%m-%dT%H:%M:%S.%6fZ")
    }
}

fn timestamp(seconds: i64, nanos: i32, layout: &str) -> Result<Value, String> {
    let ts = jiff::Timestamp::new(seconds, nanos).map_err(|e| format!(": invalid time: {e}"))?;
    jiff::fmt::strtime::format(layout, ts)
        .map(Value::String)
        .map_err(|e| format!(": invalid time: {e}"))
}

impl Json for IntOrString {
    fn json(&self) -> Result<Value, String> {
        // Type 1 is intstr.String; every other type reads as the int.
        Ok(if self.r#type == Some(1) {
            Value::String(self.str_val.clone().unwrap_or_default())
        } else {
            Value::from(self.int_val.unwrap_or_default())
        })
    }
}

impl Json for Quantity {
    fn json(&self) -> Result<Value, String> {
        Ok(Value::String(self.string.clone().unwrap_or_default()))
    }
}

/// The raw-JSON holders write their bytes as they are, and null when there are none.
fn raw_json(raw: Option<&Vec<u8>>) -> Result<Value, String> {
    match raw {
        None => Ok(Value::Null),
        Some(b) if b.is_empty() => Ok(Value::Null),
        Some(b) => serde_json::from_slice(b).map_err(|e| format!(": not JSON: {e}")),
    }
}

impl Json for RawExtension {
    fn json(&self) -> Result<Value, String> {
        raw_json(self.raw.as_ref())
    }
}

impl Json for meta::FieldsV1 {
    fn json(&self) -> Result<Value, String> {
        raw_json(self.raw.as_ref())
    }
}

impl Json for apiext::Json {
    fn json(&self) -> Result<Value, String> {
        raw_json(self.raw.as_ref())
    }
}

impl Json for apiext::JsonSchemaPropsOrArray {
    fn json(&self) -> Result<Value, String> {
        if self.j_son_schemas.is_empty() {
            self.schema.json()
        } else {
            self.j_son_schemas.json()
        }
    }
}

impl Json for apiext::JsonSchemaPropsOrBool {
    fn json(&self) -> Result<Value, String> {
        match &self.schema {
            Some(s) => s.json(),
            None => Ok(Value::Bool(self.allows.unwrap_or_default())),
        }
    }
}

impl Json for apiext::JsonSchemaPropsOrStringArray {
    fn json(&self) -> Result<Value, String> {
        if !self.property.is_empty() {
            self.property.json()
        } else {
            self.schema.json()
        }
    }
}

/// Decodes the message of one kind into its JSON.
type Decode = fn(&[u8]) -> Result<Value, String>;

fn decode_as<T: prost::Message + Default + Json>(raw: &[u8]) -> Result<Value, String> {
    let msg = T::decode(raw).map_err(|e| e.to_string())?;
    msg.json()
        .map_err(|e| e.strip_prefix('.').map_or_else(|| e.clone(), str::to_owned))
}

/// A kind testenv decodes, keyed by the apiVersion and kind of its k8s-pb type.
#[derive(Debug)]
struct Kind {
    api_version: &'static str,
    kind: &'static str,
    decode: Decode,
}

const fn kind<T: k8s_pb::Resource + prost::Message + Default + Json>() -> Kind {
    Kind {
        api_version: T::API_VERSION,
        kind: T::KIND,
        decode: decode_as::<T>,
    }
}

fn lookup(api_version: &str, kind: &str) -> Option<&'static Kind> {
    generated::KINDS
        .iter()
        .find(|k| k.api_version == api_version && k.kind == kind)
}

/// Whether a protobuf body of this kind can be decoded.
pub(crate) fn decodes(api_version: &str, kind: &str) -> bool {
    lookup(api_version, kind).is_some()
}

/// Decodes a protobuf body sent to the endpoint of `api_version`/`kind` into its JSON
/// form. The envelope's type names the message; an empty one means the endpoint's.
pub(crate) fn decode(api_version: &str, kind: &str, body: &[u8]) -> Result<Value, String> {
    let framed = body
        .strip_prefix(MAGIC)
        .ok_or("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")?;
    let unknown = Unknown::decode(framed).map_err(|e| e.to_string())?;
    if let Some(enc) = unknown.content_encoding.as_deref().filter(|e| !e.is_empty()) {
        return Err(format!("unsupported content encoding {enc:?}"));
    }
    let tm = unknown.type_meta.unwrap_or_default();
    let sent_version = tm.api_version.filter(|v| !v.is_empty());
    let sent_kind = tm.kind.filter(|k| !k.is_empty());
    let version = sent_version.as_deref().unwrap_or(api_version);
    let kind = sent_kind.as_deref().unwrap_or(kind);
    let k = lookup(version, kind)
        .ok_or_else(|| format!("no kind {kind:?} is registered for version {version:?}"))?;
    let mut obj = (k.decode)(unknown.raw.as_deref().unwrap_or_default())?;
    if let Value::Object(m) = &mut obj {
        m.insert("apiVersion".into(), Value::String(k.api_version.to_owned()));
        m.insert("kind".into(), Value::String(k.kind.to_owned()));
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use k8s_pb::api::{
        apps::v1 as apps, certificates::v1 as certs, coordination::v1 as coord, core::v1 as core,
    };
    use serde_json::json;

    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [MAGIC, &unknown.encode_to_vec()].concat()
    }

    fn encoded<T: k8s_pb::Resource + prost::Message>(msg: &T) -> Vec<u8> {
        envelope(T::API_VERSION, T::KIND, msg.encode_to_vec())
    }

    fn meta(name: &str) -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some(name.into()),
            // Go writes every non-pointer field, zero or not.
            namespace: Some(String::new()),
            generation: Some(0),
            creation_timestamp: Some(meta::Time::default()),
            ..Default::default()
        })
    }

    fn int(n: i32) -> Option<IntOrString> {
        Some(IntOrString {
            r#type: Some(0),
            int_val: Some(n),
            str_val: Some(String::new()),
        })
    }

    #[test]
    fn every_served_kind_has_a_decoder() {
        let kinds = crate::registry::resource::builtin_kinds();
        assert!(kinds.len() > 40, "{}", kinds.len());
        for k in kinds {
            let api_version = k.api_version();
            assert!(decodes(&api_version, k.kind), "{api_version} {}", k.kind);
            let v = decode(&api_version, k.kind, &envelope(&api_version, k.kind, Vec::new())).unwrap();
            assert_eq!(v, json!({"apiVersion": api_version, "kind": k.kind}));
        }
        for k in crate::registry::resource::create_only_kinds() {
            let api_version = format!("{}/{}", k.group, k.version);
            assert!(decodes(&api_version, k.kind), "{api_version} {}", k.kind);
        }
        assert!(!decodes("samples.knative.dev/v1alpha1", "AddressableService"));
    }

    #[test]
    fn a_service_reads_as_its_json() {
        let svc = core::Service {
            metadata: meta("web"),
            spec: Some(core::ServiceSpec {
                ports: vec![
                    core::ServicePort {
                        name: Some("http".into()),
                        protocol: Some("TCP".into()),
                        port: Some(80),
                        target_port: int(8080),
                        node_port: Some(0),
                        ..Default::default()
                    },
                    core::ServicePort {
                        port: Some(443),
                        target_port: Some(IntOrString {
                            r#type: Some(1),
                            int_val: Some(0),
                            str_val: Some("https".into()),
                        }),
                        ..Default::default()
                    },
                ],
                selector: [("app".to_owned(), "web".to_owned())].into(),
                cluster_ip: Some(String::new()),
                r#type: Some("ClusterIP".into()),
                publish_not_ready_addresses: Some(false),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus::default()),
        };
        assert_eq!(
            decode("v1", "Service", &encoded(&svc)).unwrap(),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "creationTimestamp": null},
                "spec": {
                    "ports": [
                        {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                        {"port": 443, "targetPort": "https"},
                    ],
                    "selector": {"app": "web"},
                    "type": "ClusterIP",
                },
                "status": {},
            })
        );
    }

    fn local(name: &str) -> Option<core::LocalObjectReference> {
        Some(core::LocalObjectReference {
            name: Some(name.into()),
        })
    }

    /// A container holding the embedded `ProbeHandler` and `LocalObjectReference`.
    fn container_with_embedded_structs() -> core::Container {
        core::Container {
            name: Some("app".into()),
            image: Some("nginx".into()),
            stdin: Some(false),
            termination_message_path: Some(String::new()),
            resources: Some(core::ResourceRequirements {
                limits: [(
                    "memory".to_owned(),
                    Quantity {
                        string: Some("64Mi".into()),
                    },
                )]
                .into(),
                ..Default::default()
            }),
            env: vec![core::EnvVar {
                name: Some("TOKEN".into()),
                value_from: Some(core::EnvVarSource {
                    secret_key_ref: Some(core::SecretKeySelector {
                        local_object_reference: local("creds"),
                        key: Some("token".into()),
                        optional: None,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            readiness_probe: Some(core::Probe {
                handler: Some(core::ProbeHandler {
                    http_get: Some(core::HttpGetAction {
                        path: Some("/ready".into()),
                        port: int(8080),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                period_seconds: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Go embeds `VolumeSource`, `ProbeHandler` and `LocalObjectReference`; their fields
    /// are written as the embedding struct's.
    #[test]
    fn embedded_structs_are_written_inline() {
        let container = container_with_embedded_structs();
        let deploy = apps::Deployment {
            metadata: meta("web"),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(2),
                template: Some(core::PodTemplateSpec {
                    metadata: Some(meta::ObjectMeta::default()),
                    spec: Some(core::PodSpec {
                        containers: vec![container],
                        volumes: vec![core::Volume {
                            name: Some("cfg".into()),
                            volume_source: Some(core::VolumeSource {
                                config_map: Some(core::ConfigMapVolumeSource {
                                    local_object_reference: local("settings"),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                        }],
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        };
        let v = decode("apps/v1", "Deployment", &encoded(&deploy)).unwrap();
        assert_eq!(v["spec"]["replicas"], json!(2));
        assert!(v.get("status").is_none(), "{v}");
        let pod = &v["spec"]["template"]["spec"];
        assert_eq!(
            pod["volumes"],
            json!([{"name": "cfg", "configMap": {"name": "settings"}}])
        );
        assert_eq!(
            pod["containers"],
            json!([{
                "name": "app",
                "image": "nginx",
                "resources": {"limits": {"memory": "64Mi"}},
                "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
            }])
        );
        serde_json::from_value::<k8s_openapi::api::apps::v1::Deployment>(v).unwrap();
    }

    #[test]
    fn bytes_times_and_named_slices() {
        let secret = core::Secret {
            metadata: Some(meta::ObjectMeta {
                name: Some("s".into()),
                creation_timestamp: Some(meta::Time {
                    seconds: Some(1_700_000_000),
                    nanos: Some(999),
                }),
                ..Default::default()
            }),
            data: [("k".to_owned(), b"\x00\xffv".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        assert_eq!(
            decode("v1", "Secret", &encoded(&secret)).unwrap(),
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s", "creationTimestamp": "2023-11-14T22:13:20Z"},
                "data": {"k": "AP92"},
                "type": "Opaque",
            })
        );

        let lease = coord::Lease {
            metadata: meta("l"),
            spec: Some(coord::LeaseSpec {
                renew_time: Some(meta::MicroTime {
                    seconds: Some(1_700_000_000),
                    nanos: Some(123_456_789),
                }),
                ..Default::default()
            }),
        };
        let v = decode("coordination.k8s.io/v1", "Lease", &encoded(&lease)).unwrap();
        assert_eq!(v["spec"], json!({"renewTime": "2023-11-14T22:13:20.123456Z"}));

        let csr = certs::CertificateSigningRequest {
            metadata: meta("c"),
            spec: Some(certs::CertificateSigningRequestSpec {
                request: Some(b"csr".to_vec()),
                signer_name: Some("example.com/x".into()),
                extra: [(
                    "scopes".to_owned(),
                    certs::ExtraValue {
                        items: vec!["a".into(), "b".into()],
                    },
                )]
                .into(),
                ..Default::default()
            }),
            status: None,
        };
        let v = decode(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            &encoded(&csr),
        )
        .unwrap();
        assert_eq!(
            v["spec"],
            json!({"request": "Y3Ny", "signerName": "example.com/x", "extra": {"scopes": ["a", "b"]}})
        );
    }

    #[test]
    fn schemas_keep_their_json_spelling() {
        let props = |ty: &str| apiext::JsonSchemaProps {
            r#type: Some(ty.into()),
            ..Default::default()
        };
        let schema = apiext::JsonSchemaProps {
            r#type: Some("object".into()),
            properties: [
                (
                    "tags".to_owned(),
                    apiext::JsonSchemaProps {
                        items: Some(Box::new(apiext::JsonSchemaPropsOrArray {
                            schema: Some(Box::new(props("string"))),
                            j_son_schemas: Vec::new(),
                        })),
                        x_kubernetes_list_type: Some("set".into()),
                        ..props("array")
                    },
                ),
                (
                    "size".to_owned(),
                    apiext::JsonSchemaProps {
                        default: Some(apiext::Json {
                            raw: Some(b"3".to_vec()),
                        }),
                        ..props("integer")
                    },
                ),
            ]
            .into(),
            additional_properties: Some(Box::new(apiext::JsonSchemaPropsOrBool {
                allows: Some(false),
                schema: None,
            })),
            x_kubernetes_preserve_unknown_fields: Some(true),
            r#ref: Some("#/x".into()),
            ..Default::default()
        };
        let crd = apiext::CustomResourceDefinition {
            metadata: meta("things.example.com"),
            spec: Some(apiext::CustomResourceDefinitionSpec {
                versions: vec![apiext::CustomResourceDefinitionVersion {
                    name: Some("v1".into()),
                    schema: Some(apiext::CustomResourceValidation {
                        open_apiv3_schema: Some(schema),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        };
        let v = decode(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            &encoded(&crd),
        )
        .unwrap();
        assert_eq!(
            v["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            json!({
                "type": "object",
                "$ref": "#/x",
                "properties": {
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "size": {"type": "integer", "default": 3},
                },
                "additionalProperties": false,
                "x-kubernetes-preserve-unknown-fields": true,
            })
        );
    }

    #[test]
    fn unions_and_floats_as_go_writes_them() {
        let string = |t: &str| apiext::JsonSchemaProps {
            r#type: Some(t.into()),
            ..Default::default()
        };
        let tuple = apiext::JsonSchemaPropsOrArray {
            schema: None,
            j_son_schemas: vec![string("string"), string("integer")],
        };
        assert_eq!(
            tuple.json().unwrap(),
            json!([{"type": "string"}, {"type": "integer"}])
        );
        let needs = apiext::JsonSchemaPropsOrStringArray {
            schema: None,
            property: vec!["a".into()],
        };
        assert_eq!(needs.json().unwrap(), json!(["a"]));
        let needs = apiext::JsonSchemaPropsOrStringArray {
            schema: Some(string("object")),
            property: Vec::new(),
        };
        assert_eq!(needs.json().unwrap(), json!({"type": "object"}));
        let allows = apiext::JsonSchemaPropsOrBool {
            allows: Some(true),
            schema: None,
        };
        assert_eq!(allows.json().unwrap(), json!(true));
        assert_eq!(1.0f64.json().unwrap().to_string(), "1");
        assert_eq!(0.25f64.json().unwrap().to_string(), "0.25");
        assert!(f64::NAN.json().is_err());
        assert!(0.0f64.omitted() && !0.5f64.omitted());
    }

    #[test]
    fn bad_bodies_are_errors() {
        let cm = core::ConfigMap {
            metadata: meta("cfg"),
            ..Default::default()
        };
        let good = encoded(&cm);
        assert!(decode("v1", "ConfigMap", &good).is_ok());
        assert!(
            decode("v1", "ConfigMap", b"{}")
                .unwrap_err()
                .contains("expected prefix")
        );
        // Every truncation, and every byte changed to a few values, decodes or errs.
        for end in 0..good.len() {
            let _ = decode("v1", "ConfigMap", &good[..end]);
        }
        for i in MAGIC.len()..good.len() {
            for b in [0x00, 0x07, 0x7f, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] = b;
                let _ = decode("v1", "ConfigMap", &bad);
            }
        }
        // A length of 2^62 bytes.
        let huge = [
            MAGIC,
            &[0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40],
        ]
        .concat();
        assert!(decode("v1", "ConfigMap", &huge).is_err());
        // Schemas nested (`not`, field 28) deeper than prost's recursion limit.
        let nested = |depth: usize| {
            let mut nested = Vec::new();
            for _ in 0..depth {
                let mut outer = vec![0xe2, 0x01];
                prost::encoding::encode_varint(nested.len() as u64, &mut outer);
                nested = [outer, nested].concat();
            }
            nested
        };
        assert!(decode_as::<apiext::JsonSchemaProps>(&nested(200)).is_err());
        assert!(decode_as::<apiext::JsonSchemaProps>(&nested(50)).is_ok());

        let unknown_kind = envelope("v1", "Widget", Vec::new());
        assert_eq!(
            decode("v1", "ConfigMap", &unknown_kind).unwrap_err(),
            "no kind \"Widget\" is registered for version \"v1\""
        );
        let rev = apps::ControllerRevision {
            metadata: meta("r"),
            data: Some(RawExtension {
                raw: Some(b"{not json".to_vec()),
            }),
            revision: Some(1),
        };
        let err = decode("apps/v1", "ControllerRevision", &encoded(&rev)).unwrap_err();
        assert!(err.starts_with("data: not JSON"), "{err}");
        let rev = apps::ControllerRevision {
            data: Some(RawExtension {
                raw: Some(br#"{"a": 1}"#.to_vec()),
            }),
            ..rev
        };
        let v = decode("apps/v1", "ControllerRevision", &encoded(&rev)).unwrap();
        assert_eq!(v["data"], json!({"a": 1}));
    }
}
