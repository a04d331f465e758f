//! The built-in kinds' part of the documents, built once on first use: it never
//! changes while the process runs, and generating and encoding it costs far more
//! than a request should.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::registry::resource::{ResourceDef, builtin_kinds, builtins as builtin_defs, create_only_kinds};

use super::schema::{REF_V3, closure};
use super::{Encoded, gv_document, hash, v2};

pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// The body of a ServiceAccount's `token` subresource, which core/v1 documents.
const TOKEN_REQUEST: &str = "io.k8s.api.authentication.v1.TokenRequest";

#[derive(Debug)]
pub(crate) struct Builtins {
    /// Every definition a built-in kind reaches, in v3's form, by name.
    defs: Map<String, Value>,
    /// Each kind's definition name, by group, version and kind.
    kinds: BTreeMap<(String, String, String), String>,
    /// The document of each group version the built-in kinds are served in.
    gvs: BTreeMap<(String, String), Encoded>,
    /// The v2 document of the built-in definitions alone, and its hash.
    v2_json: String,
    v2_protobuf: Vec<u8>,
    v2_hash: String,
}

/// The built-in part, built by the first caller.
pub(crate) fn builtins() -> &'static Builtins {
    static BUILTINS: OnceLock<Builtins> = OnceLock::new();
    BUILTINS.get_or_init(build)
}

impl Builtins {
    pub(super) fn group_version(&self, g: &str, v: &str) -> Option<&Encoded> {
        self.gvs.get(&(g.to_owned(), v.to_owned()))
    }

    /// A kind's definition and every one it reaches.
    pub(super) fn kind_closure(&self, g: &str, v: &str, kind: &str) -> Map<String, Value> {
        let name = self.kinds.get(&(g.to_owned(), v.to_owned(), kind.to_owned()));
        closure(&self.defs, name.cloned())
    }

    /// Named definitions and every one they reach.
    pub(super) fn closure<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Map<String, Value> {
        closure(&self.defs, names.into_iter().map(str::to_owned))
    }

    /// A property of ObjectMeta's owner, Pod, whose wording every kind shares
    /// (`apiVersion`, `kind`, `metadata`'s description).
    pub(super) fn type_meta_description(&self, property: &str) -> Value {
        self.defs
            .get("io.k8s.api.core.v1.Pod")
            .and_then(|p| p.pointer(&format!("/properties/{property}/description")))
            .cloned()
            .unwrap_or(Value::Null)
    }

    pub(super) fn v2_json(&self) -> &str {
        &self.v2_json
    }

    pub(super) fn v2_protobuf(&self) -> &[u8] {
        &self.v2_protobuf
    }

    pub(super) fn v2_hash(&self) -> &str {
        &self.v2_hash
    }
}

fn build() -> Builtins {
    let mut generator = SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .into_generator();
    let mut kinds = BTreeMap::new();
    let mut add = |g: &str, v: &str, kind: &str, reference: schemars::Schema| {
        if let Some(name) = reference
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(REF_V3))
        {
            kinds.insert((g.to_owned(), v.to_owned(), kind.to_owned()), name.to_owned());
        }
    };
    for k in builtin_kinds() {
        add(k.group, k.version, k.kind, k.schema_ref(&mut generator));
    }
    for k in create_only_kinds() {
        add(k.group, k.version, k.kind, k.schema_ref(&mut generator));
    }
    let _ = generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>();
    let _ = generator.subschema_for::<k8s_openapi::api::authentication::v1::TokenRequest>();
    let mut defs = generator.take_definitions(true);
    for ((g, v, kind), name) in &kinds {
        if let Some(Value::Object(d)) = defs.get_mut(name) {
            d.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": g, "version": v, "kind": kind}]),
            );
            // k8s-openapi requires `metadata` because its field is not an Option;
            // Kubernetes does not.
            if let Some(Value::Array(required)) = d.get_mut("required") {
                required.retain(|r| r != "metadata");
                if required.is_empty() {
                    d.remove("required");
                }
            }
        }
    }
    let mut out = Builtins {
        defs,
        kinds,
        gvs: BTreeMap::new(),
        v2_json: String::new(),
        v2_protobuf: Vec::new(),
        v2_hash: String::new(),
    };
    out.gvs = group_versions(&out);
    let v2_defs = v2::definitions(out.defs.clone());
    out.v2_json = v2::document_json(&v2_defs);
    out.v2_protobuf = v2::document_protobuf(&v2_defs);
    out.v2_hash = hash(&[out.v2_json.as_bytes()]);
    out
}

/// The document of each group version the built-in kinds are served in.
fn group_versions(b: &Builtins) -> BTreeMap<(String, String), Encoded> {
    let defs = builtin_defs();
    let mut by_gv: BTreeMap<(String, String), Vec<&ResourceDef>> = BTreeMap::new();
    for d in &defs {
        by_gv
            .entry((d.group.clone(), d.version.clone()))
            .or_default()
            .push(d);
    }
    by_gv
        .into_iter()
        .map(|(gv, ds)| {
            let mut schemas = Map::new();
            for d in &ds {
                schemas.extend(b.kind_closure(&d.group, &d.version, &d.kind));
                if d.token_request {
                    schemas.extend(b.closure([TOKEN_REQUEST]));
                }
            }
            let doc = gv_document(&ds, schemas);
            (gv, Encoded::new(&doc))
        })
        .collect()
}
