//! Decoding of Kubernetes protobuf request bodies for the kinds kubectl's `create`
//! generator subcommands send that way (`kubectl create namespace|configmap|secret|
//! serviceaccount`). Other kinds and protobuf responses are not supported.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::resource::Builtin;

/// How one protobuf field maps to JSON.
#[derive(Debug)]
enum F {
    Str,
    Bool,
    Int,
    Time,
    Msg(&'static [Field]),
    RepStr,
    RepMsg(&'static [Field]),
    MapStr,
    MapBytes,
}

type Field = (u32, &'static str, F);

const OWNER_REF: &[Field] = &[
    (1, "kind", F::Str),
    (3, "name", F::Str),
    (4, "uid", F::Str),
    (5, "apiVersion", F::Str),
    (6, "controller", F::Bool),
    (7, "blockOwnerDeletion", F::Bool),
];

const OBJECT_META: &[Field] = &[
    (1, "name", F::Str),
    (2, "generateName", F::Str),
    (3, "namespace", F::Str),
    (5, "uid", F::Str),
    (6, "resourceVersion", F::Str),
    (7, "generation", F::Int),
    (8, "creationTimestamp", F::Time),
    (9, "deletionTimestamp", F::Time),
    (10, "deletionGracePeriodSeconds", F::Int),
    (11, "labels", F::MapStr),
    (12, "annotations", F::MapStr),
    (13, "ownerReferences", F::RepMsg(OWNER_REF)),
    (14, "finalizers", F::RepStr),
];

const NAMESPACE: &[Field] = &[
    (1, "metadata", F::Msg(OBJECT_META)),
    (2, "spec", F::Msg(&[(1, "finalizers", F::RepStr)])),
];

const CONFIG_MAP: &[Field] = &[
    (1, "metadata", F::Msg(OBJECT_META)),
    (2, "data", F::MapStr),
    (3, "binaryData", F::MapBytes),
    (4, "immutable", F::Bool),
];

const SECRET: &[Field] = &[
    (1, "metadata", F::Msg(OBJECT_META)),
    (2, "data", F::MapBytes),
    (3, "type", F::Str),
    (4, "stringData", F::MapStr),
    (5, "immutable", F::Bool),
];

const OBJECT_REF: &[Field] = &[
    (1, "kind", F::Str),
    (2, "namespace", F::Str),
    (3, "name", F::Str),
    (4, "uid", F::Str),
    (5, "apiVersion", F::Str),
    (6, "resourceVersion", F::Str),
    (7, "fieldPath", F::Str),
];

const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", F::Msg(OBJECT_META)),
    (2, "secrets", F::RepMsg(OBJECT_REF)),
    (3, "imagePullSecrets", F::RepMsg(&[(1, "name", F::Str)])),
    (4, "automountServiceAccountToken", F::Bool),
];

const UNKNOWN: &[Field] = &[(
    1,
    "typeMeta",
    F::Msg(&[(1, "apiVersion", F::Str), (2, "kind", F::Str)]),
)];

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
        let end = self.pos.checked_add(len).ok_or("length overflow")?;
        let b = self.buf.get(self.pos..end).ok_or("truncated field")?;
        self.pos = end;
        Ok(b)
    }

    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            w => Err(format!("unsupported wire type {w}")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), String> {
        self.pos = self
            .pos
            .checked_add(n)
            .filter(|p| *p <= self.buf.len())
            .ok_or("truncated field")?;
        Ok(())
    }
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
}

fn time(b: &[u8]) -> Result<Value, String> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut secs = 0i64;
    while r.pos < b.len() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (1, 0) => secs = i64::try_from(r.varint()?).unwrap_or_default(),
            (_, w) => r.skip(w)?,
        }
    }
    if secs == 0 {
        // Go's zero time, which JSON encodes as null.
        return Ok(Value::Null);
    }
    let ts = jiff::Timestamp::from_second(secs).map_err(|e| e.to_string())?;
    Ok(json!(
        jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", ts).map_err(|e| e.to_string())?
    ))
}

fn map_entry(b: &[u8], as_bytes: bool) -> Result<(String, Value), String> {
    let mut r = Reader { buf: b, pos: 0 };
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    while r.pos < b.len() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (1, 2) => k = text(r.bytes()?)?,
            (2, 2) => {
                let raw = r.bytes()?;
                v = if as_bytes {
                    json!(base64::engine::general_purpose::STANDARD.encode(raw))
                } else {
                    json!(text(raw)?)
                };
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok((k, v))
}

fn message(b: &[u8], fields: &[Field]) -> Result<Value, String> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut out = Map::new();
    while r.pos < b.len() {
        let key = r.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        let Some((_, name, kind)) = fields.iter().find(|(n, _, _)| u64::from(*n) == num) else {
            r.skip(wire)?;
            continue;
        };
        let name = (*name).to_owned();
        match kind {
            F::Bool => {
                out.insert(name, json!(r.varint()? != 0));
            }
            // Go always encodes plain strings and integers; JSON omits their zero values.
            F::Int => {
                // int64 fields are two's complement varints.
                let n = r.varint()?.cast_signed();
                if n != 0 {
                    out.insert(name, json!(n));
                }
            }
            F::Str => {
                let t = text(r.bytes()?)?;
                if !t.is_empty() {
                    out.insert(name, json!(t));
                }
            }
            F::Time => {
                let t = time(r.bytes()?)?;
                if !t.is_null() {
                    out.insert(name, t);
                }
            }
            F::Msg(inner) => {
                out.insert(name, message(r.bytes()?, inner)?);
            }
            F::RepStr => {
                let v = json!(text(r.bytes()?)?);
                push(&mut out, name, v);
            }
            F::RepMsg(inner) => {
                let v = message(r.bytes()?, inner)?;
                push(&mut out, name, v);
            }
            F::MapStr | F::MapBytes => {
                let (k, v) = map_entry(r.bytes()?, matches!(kind, F::MapBytes))?;
                if let Value::Object(m) = out.entry(name).or_insert_with(|| json!({})) {
                    m.insert(k, v);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

fn push(out: &mut Map<String, Value>, name: String, v: Value) {
    if let Value::Array(a) = out.entry(name).or_insert_with(|| json!([])) {
        a.push(v);
    }
}

/// Decodes a `k8s\0`-framed protobuf body of a built-in kind into its JSON form.
pub(crate) fn decode(kind: Builtin, body: &[u8]) -> Result<Value, String> {
    let fields = match kind {
        Builtin::Namespace => NAMESPACE,
        Builtin::ConfigMap => CONFIG_MAP,
        Builtin::Secret => SECRET,
        Builtin::ServiceAccount => SERVICE_ACCOUNT,
        _ => {
            return Err(
                "testenv decodes protobuf only for Namespaces, ConfigMaps, Secrets and ServiceAccounts"
                    .into(),
            );
        }
    };
    let unknown = body
        .strip_prefix(b"k8s\x00")
        .ok_or("missing the k8s protobuf envelope")?;
    let envelope = message(unknown, UNKNOWN)?;
    let mut r = Reader { buf: unknown, pos: 0 };
    let mut raw: &[u8] = &[];
    while r.pos < unknown.len() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (2, 2) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    let mut obj = message(raw, fields)?;
    if let (Some(tm), Value::Object(m)) = (envelope.get("typeMeta"), &mut obj) {
        for k in ["apiVersion", "kind"] {
            if let Some(v) = tm.get(k) {
                m.insert(k.to_owned(), v.clone());
            }
        }
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![
            u8::try_from(num << 3 | 2).unwrap(),
            u8::try_from(payload.len()).unwrap(),
        ];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn decodes_a_configmap() {
        let meta = field(1, b"cfg");
        let entry = [field(1, b"k"), field(2, b"v")].concat();
        let cm = [field(1, &meta), field(2, &entry)].concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let unknown = [field(1, &tm), field(2, &cm)].concat();
        let body = [b"k8s\x00".as_slice(), &unknown].concat();
        let v = decode(Builtin::ConfigMap, &body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}})
        );
        assert!(decode(Builtin::ConfigMap, b"k8s\x00\x0a\x05ab").is_err());
    }
}
