//! A CRD version's definitions, as kube-apiserver publishes them: the kind, named
//! after its reversed group (`com.example.v1.Widget`), with `apiVersion`, `kind` and
//! `metadata` added to its schema, and its list.

use serde_json::{Map, Value, json};

use crate::registry::resource::ResourceDef;

use super::builtin::{Builtins, LIST_META, OBJECT_META};
use super::schema::{REF_V3, walk};

fn definition_name(d: &ResourceDef, kind: &str) -> String {
    let group: Vec<&str> = d.group.split('.').rev().collect();
    format!("{}.{}.{kind}", group.join("."), d.version)
}

/// The kind's and its list's definitions, and the metadata definitions they reach.
pub(super) fn definitions(b: &Builtins, d: &ResourceDef, schema: &Value) -> Map<String, Value> {
    let gvk = |kind: &str| json!([{"group": d.group, "version": d.version, "kind": kind}]);
    let meta_ref = |name: &str| json!({"allOf": [{"$ref": format!("{REF_V3}{name}")}]});
    let mut kind = schema.clone();
    // A CRD can carry a `$ref` only where testenv's CRD validation let it through
    // (kube-apiserver forbids it); it would point nowhere in these documents.
    walk(&mut kind, &mut |m| {
        m.remove("$ref");
    });
    if !kind.is_object() {
        kind = json!({"type": "object"});
    }
    let kind_name = definition_name(d, &d.kind);
    let mut metadata = meta_ref(OBJECT_META);
    metadata["description"] = b.type_meta_description("metadata");
    let props = &mut kind["properties"];
    if !props.is_object() {
        *props = json!({});
    }
    props["apiVersion"] = json!({"type": "string", "description": b.type_meta_description("apiVersion")});
    props["kind"] = json!({"type": "string", "description": b.type_meta_description("kind")});
    props["metadata"] = metadata;
    kind["x-kubernetes-group-version-kind"] = gvk(&d.kind);
    let list = json!({
        "type": "object",
        "description": format!("{} is a list of {}", d.list_kind, d.kind),
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": b.type_meta_description("apiVersion")},
            "items": {
                "type": "array",
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", d.plural),
                "items": {"$ref": format!("{REF_V3}{kind_name}")},
            },
            "kind": {"type": "string", "description": b.type_meta_description("kind")},
            "metadata": {
                "allOf": [{"$ref": format!("{REF_V3}{LIST_META}")}],
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
        },
        "x-kubernetes-group-version-kind": gvk(&d.list_kind),
    });
    let mut out = b.closure([OBJECT_META, LIST_META]);
    out.insert(kind_name, kind);
    out.insert(definition_name(d, &d.list_kind), list);
    out
}
