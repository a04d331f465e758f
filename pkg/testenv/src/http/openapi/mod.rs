//! The OpenAPI documents: `/openapi/v3`, a root listing one document per group version
//! (each addressed by its content's hash, so a client's cache misses when a CRD
//! changes), and `/openapi/v2`, one document as JSON or as gnostic's protobuf. They
//! carry the built-in kinds' schemas from k8s-openapi and the schema of each served
//! version of every CRD. kubectl reads v3 for `explain` and to learn that the server
//! validates fields itself (`fieldValidation` on PATCH); it reads v2 to validate, on
//! the client, what it cannot leave to the server: the items of a `kind: List`.

mod builtin;
mod crd;
mod schema;
mod v2;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::errors::ErrorStatus;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;

use super::discovery::{MAJOR, MINOR};
use super::reply::Reply;

pub(crate) use builtin::{Builtins, builtins};

/// The protobuf form of v2 as kube-apiserver labels it. Clients ask for it as
/// `...spec.v2@v1.0+protobuf`, which Go's media type parser refuses in a response
/// (`@` is not a token character), so both are accepted and this one is answered.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const V2_PROTOBUF_ASKED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// Answers a request under `/openapi`. `builtins` is taken before the registry's lock,
/// so that building it the first time holds up no other request.
pub(crate) fn openapi(builtins: &Builtins, state: &Registry, path: &str, accept: &str) -> Reply {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["openapi", "v2"] => v2_reply(builtins, state, accept),
        ["openapi", "v3"] => Reply::ok(v3_root(builtins, state)),
        ["openapi", "v3", "api", v] => gv_reply(builtins, state, "", v),
        ["openapi", "v3", "apis", g, v] => gv_reply(builtins, state, g, v),
        _ => Reply::error(&ErrorStatus::unknown_path()),
    }
}

/// The version `info` names, as kube-apiserver's documents do.
pub(super) fn discovery_version() -> String {
    format!("v{MAJOR}.{MINOR}.0")
}

/// FNV-1a, as upper-case hex: a content hash for URLs and ETags (kube-apiserver uses
/// SHA-512; clients only compare it).
pub(super) fn hash(parts: &[&[u8]]) -> String {
    let h = parts
        .iter()
        .flat_map(|p| p.iter())
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{h:016X}")
}

/// An encoded document and the hash of its bytes.
#[derive(Debug)]
pub(crate) struct Encoded {
    body: Bytes,
    hash: String,
}

impl Encoded {
    fn new(doc: &Value) -> Self {
        let body = Bytes::from(doc.to_string());
        let hash = hash(&[&body]);
        Self { body, hash }
    }

    fn reply(&self) -> Reply {
        Reply::Document {
            content_type: "application/json",
            body: self.body.clone(),
            etag: self.hash.clone(),
        }
    }
}

/// The group versions served, each once, in the order first served.
fn group_versions(state: &Registry) -> Vec<(String, String)> {
    let mut gvs: Vec<(String, String)> = Vec::new();
    for d in &state.resources {
        if !gvs.iter().any(|(g, v)| *g == d.group && *v == d.version) {
            gvs.push((d.group.clone(), d.version.clone()));
        }
    }
    gvs
}

fn v3_root(builtins: &Builtins, state: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, v) in group_versions(state) {
        let Some(doc) = gv_encoded(builtins, state, &g, &v) else {
            continue;
        };
        let key = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        let url = format!("/openapi/v3/{key}?hash={}", doc.hash());
        paths.insert(key, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// A group version's document: built once for one served by built-in kinds alone,
/// built on request for one a CRD serves in (those are small).
enum GvDoc<'a> {
    Static(&'a Encoded),
    Built(Encoded),
}

impl GvDoc<'_> {
    fn hash(&self) -> &str {
        match self {
            Self::Static(e) => &e.hash,
            Self::Built(e) => &e.hash,
        }
    }

    fn reply(&self) -> Reply {
        match self {
            Self::Static(e) => e.reply(),
            Self::Built(e) => e.reply(),
        }
    }
}

fn gv_encoded<'a>(builtins: &'a Builtins, state: &Registry, g: &str, v: &str) -> Option<GvDoc<'a>> {
    let defs: Vec<&ResourceDef> = state
        .resources
        .iter()
        .filter(|d| d.group == g && d.version == v)
        .map(AsRef::as_ref)
        .collect();
    if defs.is_empty() {
        return None;
    }
    if defs.iter().all(|d| !d.is_custom())
        && let Some(e) = builtins.group_version(g, v)
    {
        return Some(GvDoc::Static(e));
    }
    let mut schemas = Map::new();
    for d in &defs {
        match d.custom_schema() {
            Some(s) => schemas.extend(crd::definitions(builtins, d, s)),
            None => schemas.extend(builtins.kind_closure(&d.group, &d.version, &d.kind)),
        }
    }
    Some(GvDoc::Built(Encoded::new(&gv_document(&defs, schemas))))
}

fn gv_reply(builtins: &Builtins, state: &Registry, g: &str, v: &str) -> Reply {
    match gv_encoded(builtins, state, g, v) {
        Some(doc) => doc.reply(),
        None => Reply::error(&ErrorStatus::unknown_path()),
    }
}

/// A group version's v3 document: each resource's write operations, tagged with
/// `x-kubernetes-group-version-kind` and taking `fieldValidation` (what kubectl looks
/// for to leave validation to the server), and the schemas of its kinds.
pub(super) fn gv_document(defs: &[&ResourceDef], schemas: Map<String, Value>) -> Value {
    let mut paths = Map::new();
    let query =
        |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    for d in defs {
        let prefix = if d.group.is_empty() {
            format!("/api/{}", d.version)
        } else {
            format!("/apis/{}/{}", d.group, d.version)
        };
        let scope = if d.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let op_of = |action: &str, gvk: Value| {
            json!({
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation")],
                "responses": {"200": {"description": "OK"}},
            })
        };
        let op = |action: &str| {
            op_of(
                action,
                json!({"group": d.group, "version": d.version, "kind": d.kind}),
            )
        };
        if d.token_request {
            let token_request =
                json!({"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"});
            paths.insert(
                format!("{prefix}{scope}/{}/{{name}}/token", d.plural),
                json!({"post": op_of("post", token_request)}),
            );
        }
        if !d.create_only {
            paths.insert(
                format!("{prefix}{scope}/{}/{{name}}", d.plural),
                json!({"patch": op("patch"), "put": op("put")}),
            );
        }
        paths.insert(
            format!("{prefix}{scope}/{}", d.plural),
            json!({"post": op("post")}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": discovery_version()},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// `/openapi/v2`: the built-in definitions, encoded once, followed by the CRDs'.
fn v2_reply(builtins: &Builtins, state: &Registry, accept: &str) -> Reply {
    let mut crds = Map::new();
    for d in &state.resources {
        if let Some(s) = d.custom_schema() {
            crds.extend(crd::definitions(builtins, d, s));
        }
    }
    let crds = v2::definitions(crds);
    let protobuf = accept
        .split(',')
        .filter_map(|m| m.split(';').next())
        .any(|t| [V2_PROTOBUF, V2_PROTOBUF_ASKED].contains(&t.trim()));
    let (content_type, body) = if protobuf {
        (V2_PROTOBUF, v2::extend_protobuf(builtins.v2_protobuf(), &crds))
    } else {
        (
            "application/json",
            v2::extend_json(builtins.v2_json(), &crds).into_bytes(),
        )
    };
    let etag = hash(&[
        builtins.v2_hash().as_bytes(),
        Value::Object(crds).to_string().as_bytes(),
    ]);
    Reply::Document {
        content_type,
        body: Bytes::from(body),
        etag,
    }
}
