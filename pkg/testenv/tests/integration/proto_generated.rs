//! Generates `src/http/proto/generated.rs`, the JSON writers of the k8s-pb messages that the
//! kinds testenv serves are made of, and fails when the checked-in file differs from
//! what the locked k8s-pb and k8s-openapi give. `TESTENV_REGENERATE=1` rewrites it
//! when it changed; `pkg/testenv/hack/update-proto.sh` runs that.
//!
//! k8s-pb's sources give each message's fields and the types they hold; k8s-openapi's
//! serde code gives the JSON name of each field, which prost's snake case cannot be
//! turned back into. Both crates lay their modules out as Kubernetes' Go packages, so
//! a message and its k8s-openapi struct share a module path and (ignoring case) a name.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// Messages whose JSON is not their fields; `src/http/proto.rs` writes them by hand.
const BY_HAND: &[&str] = &[
    "apimachinery::pkg::apis::meta::v1::Time",
    "apimachinery::pkg::apis::meta::v1::MicroTime",
    "apimachinery::pkg::apis::meta::v1::FieldsV1",
    "apimachinery::pkg::runtime::RawExtension",
    "apimachinery::pkg::util::intstr::IntOrString",
    "apimachinery::pkg::api::resource::Quantity",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::Json",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrBool",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrStringArray",
];

/// Bodies the server accepts beyond the kinds it serves, by apiVersion, kind and
/// message (k8s-pb gives subresource kinds no `Resource` impl): the `scale`
/// subresource of workloads and custom resources, and the `token` subresource of
/// ServiceAccounts (`kubectl create token`).
const SUBRESOURCE_KINDS: &[(&str, &str, &str)] = &[
    ("autoscaling/v1", "Scale", "api::autoscaling::v1::Scale"),
    (
        "authentication.k8s.io/v1",
        "TokenRequest",
        "api::authentication::v1::TokenRequest",
    ),
];

const OUT: &str = "src/http/proto/generated.rs";

struct Field {
    /// As written in Rust, `r#type` included.
    ident: String,
    /// The messages the field's type holds, as full paths.
    messages: Vec<String>,
}

struct Message {
    fields: Vec<Field>,
    /// A Go named slice (`type ExtraValue []string`), which JSON writes as the slice.
    named_slice: bool,
}

/// The source directory of a locked registry dependency.
fn crate_src(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    let marker = format!("name = \"{name}\"\nversion = \"");
    let at = lock
        .find(&marker)
        .unwrap_or_else(|| panic!("{name} is not in Cargo.lock"))
        + marker.len();
    let version = &lock[at..at + lock[at..].find('"').unwrap()];
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap();
    let dir = format!("{name}-{version}");
    for registry in std::fs::read_dir(home.join("registry/src")).unwrap() {
        let candidate = registry.unwrap().path().join(&dir);
        if candidate.is_dir() {
            return candidate.join("src");
        }
    }
    panic!("the sources of {dir} are not under {}", home.display());
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `api/core/v1/mod.rs` → `api::core::v1`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|c| c != "mod" && c != "lib")
        .collect();
    parts.join("::")
}

/// The message paths inside a field type, resolved against the module it is written in.
fn messages_in(ty: &syn::Type, module: &str, out: &mut Vec<String>) {
    let syn::Type::Path(tp) = ty else { return };
    let segs: Vec<&syn::PathSegment> = tp.path.segments.iter().collect();
    let container = tp.path.leading_colon.is_some();
    if !container {
        let names: Vec<String> = segs.iter().map(|s| s.ident.to_string()).collect();
        let last = names.last().unwrap();
        if !["u8", "i32", "i64", "u32", "u64", "bool", "f32", "f64"].contains(&last.as_str()) {
            let mut base: Vec<&str> = module.split("::").collect();
            let mut rest = names.as_slice();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            let mut full: Vec<String> = base.iter().map(|s| (*s).to_owned()).collect();
            full.extend(rest.iter().cloned());
            out.push(full.join("::"));
        }
    }
    for seg in segs {
        if let syn::PathArguments::AngleBracketed(args) = &seg.arguments {
            for a in &args.args {
                if let syn::GenericArgument::Type(t) = a {
                    messages_in(t, module, out);
                }
            }
        }
    }
}

fn doc_of(attrs: &[syn::Attribute]) -> String {
    let mut doc = String::new();
    for a in attrs {
        if let syn::Meta::NameValue(nv) = &a.meta
            && nv.path.is_ident("doc")
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            doc.push_str(&s.value());
            doc.push('\n');
        }
    }
    doc
}

fn const_str(item: &syn::ImplItem, name: &str) -> Option<String> {
    let syn::ImplItem::Const(c) = item else {
        return None;
    };
    if c.ident != name {
        return None;
    }
    match &c.expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s.value()),
        _ => None,
    }
}

/// Every message of k8s-pb by path, and the path of each resource by (apiVersion, kind).
fn k8s_pb(src: &Path) -> (BTreeMap<String, Message>, BTreeMap<(String, String), String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let (mut messages, mut resources) = (BTreeMap::new(), BTreeMap::new());
    for file in files {
        let module = module_of(src, &file);
        let parsed = syn::parse_file(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for item in parsed.items {
            match item {
                syn::Item::Struct(s) => {
                    let fields: Vec<Field> = s
                        .fields
                        .iter()
                        .map(|f| {
                            let mut messages = Vec::new();
                            messages_in(&f.ty, &module, &mut messages);
                            Field {
                                ident: f.ident.as_ref().unwrap().to_string(),
                                messages,
                            }
                        })
                        .collect();
                    let named_slice = doc_of(&s.attrs).contains("+protobuf.nullable=true")
                        && fields.len() == 1
                        && fields[0].ident == "items";
                    messages.insert(format!("{module}::{}", s.ident), Message { fields, named_slice });
                }
                syn::Item::Impl(imp) => {
                    let is_resource = imp
                        .trait_
                        .as_ref()
                        .is_some_and(|(p, _)| p.segments.last().is_some_and(|s| s.ident == "Resource"));
                    let syn::Type::Path(ty) = imp.self_ty.as_ref() else {
                        continue;
                    };
                    if !is_resource {
                        continue;
                    }
                    let api_version = imp.items.iter().find_map(|i| const_str(i, "API_VERSION"));
                    let kind = imp.items.iter().find_map(|i| const_str(i, "KIND"));
                    if let (Some(v), Some(k)) = (api_version, kind) {
                        let name = ty.path.segments.last().unwrap().ident.to_string();
                        resources.insert((v, k), format!("{module}::{name}"));
                    }
                }
                _ => {}
            }
        }
    }
    (messages, resources)
}

/// The key two spellings of one name share: `podIPs`, `pod_ips` and `pod_i_ps` are all
/// `podips`; `$ref` is `ref`, `x-kubernetes-list-type` is `xkuberneteslisttype`.
fn folded(name: &str) -> String {
    name.trim_start_matches("r#")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// JSON field names from k8s-openapi's serde code, by `module::lowercased struct name`,
/// over all its Kubernetes versions so that k8s-pb's newer fields are named too.
fn json_names(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut versions: Vec<PathBuf> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("v1_"))
        })
        .collect();
    versions.sort();
    for version in versions {
        let mut files = Vec::new();
        rust_files(&version, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let Some(at) = text.find("pub struct ") else {
                continue;
            };
            let name: String = text[at + 11..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let dir = module_of(&version, file.parent().unwrap().join("mod.rs").as_path());
            let names = out.entry(format!("{dir}::{}", name.to_lowercase())).or_default();
            for line in text.lines() {
                let line = line.trim();
                if let Some(rest) = line.strip_prefix('"')
                    && let Some((json, _)) = rest.split_once("\" => Field::Key_")
                {
                    names.insert(json.to_owned());
                }
            }
        }
    }
    out
}

fn generate() -> String {
    let pb_src = crate_src("k8s-pb");
    let (messages, resources) = k8s_pb(&pb_src);
    let names = json_names(&crate_src("k8s-openapi"));
    let kinds: Vec<String> = kinds_served()
        .into_iter()
        .map(|bk| {
            resources
                .get(&bk)
                .unwrap_or_else(|| panic!("k8s-pb has no message for {}/{}", bk.0, bk.1))
                .clone()
        })
        .collect();
    let reached = reachable(&messages, &kinds);
    let known = json_names_of(&messages, &names, &reached);
    render(&messages, &kinds, &reached, &known)
}

/// The messages the served kinds and subresource kinds are made of, but those
/// written by hand.
fn reachable(messages: &BTreeMap<String, Message>, kinds: &[String]) -> BTreeSet<String> {
    let mut queue: VecDeque<String> = kinds.iter().cloned().collect();
    for (_, _, path) in SUBRESOURCE_KINDS {
        queue.push_back((*path).to_owned());
    }
    let mut reached = BTreeSet::new();
    while let Some(path) = queue.pop_front() {
        if BY_HAND.contains(&path.as_str()) || !reached.insert(path.clone()) {
            continue;
        }
        let msg = messages
            .get(&path)
            .unwrap_or_else(|| panic!("k8s-pb has no message {path}"));
        for f in &msg.fields {
            queue.extend(f.messages.iter().cloned());
        }
    }
    reached
}

/// The JSON field names each reached message may use.
///
/// A struct Go embeds has no k8s-openapi struct of its own when nothing else holds
/// it (admissionregistration's `Rule`): its fields are named in the structs that
/// embed it, so those names pass down to it.
fn json_names_of(
    messages: &BTreeMap<String, Message>,
    names: &BTreeMap<String, BTreeSet<String>>,
    reached: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let own = |path: &str| -> BTreeSet<String> {
        let (module, name) = path.rsplit_once("::").unwrap();
        names
            .get(&format!("{module}::{}", name.to_lowercase()))
            .cloned()
            .unwrap_or_default()
    };
    let mut known: BTreeMap<String, BTreeSet<String>> = reached.iter().map(|p| (p.clone(), own(p))).collect();
    loop {
        let mut changed = false;
        for path in reached {
            let names = known[path].clone();
            for f in &messages[path].fields {
                if f.messages.is_empty() || names.iter().any(|n| folded(n) == folded(&f.ident)) {
                    continue;
                }
                for child in f.messages.iter().filter(|c| reached.contains(*c)) {
                    let set = known.get_mut(child).unwrap();
                    let before = set.len();
                    set.extend(names.iter().cloned());
                    changed |= set.len() != before;
                }
            }
        }
        if !changed {
            return known;
        }
    }
}

/// The generated file: the table of decodable kinds, then a `Json` impl per message.
fn render(
    messages: &BTreeMap<String, Message>,
    kinds: &[String],
    reached: &BTreeSet<String>,
    known: &BTreeMap<String, BTreeSet<String>>,
) -> String {
    let mut out = String::from(
        "// Code generated by tests/integration/proto_generated.rs from the sources of k8s-pb and k8s-openapi. DO NOT EDIT.\n\n\
         use k8s_pb as pb;\nuse serde_json::Value;\n\nuse super::{Json, Kind, Obj, decode_as, kind};\n\n\
         pub(super) const KINDS: &[Kind] = &[\n",
    );
    for k in kinds {
        out.push_str(&format!("    kind::<pb::{k}>(),\n"));
    }
    for (api_version, kind, path) in SUBRESOURCE_KINDS {
        out.push_str(&format!(
            "    Kind {{ api_version: \"{api_version}\", kind: \"{kind}\", decode: decode_as::<pb::{path}> }},\n"
        ));
    }
    out.push_str("];\n");
    for path in reached {
        out.push_str(&json_impl(path, &messages[path], &known[path]));
    }
    out
}

/// `impl Json` for one message, whose fields take the JSON names in `names`.
fn json_impl(path: &str, msg: &Message, names: &BTreeSet<String>) -> String {
    let mut out = format!("\nimpl Json for pb::{path} {{\n    fn json(&self) -> Result<Value, String> {{\n");
    if msg.named_slice {
        out.push_str("        self.items.json()\n    }\n}\n");
        return out;
    }
    if msg.fields.is_empty() {
        out.push_str("        Obj::default().done()\n    }\n}\n");
        return out;
    }
    out.push_str("        let mut o = Obj::default();\n");
    for f in &msg.fields {
        let key = folded(&f.ident);
        let json: Vec<&String> = names.iter().filter(|n| folded(n) == key).collect();
        match json.as_slice() {
            [one] => out.push_str(&format!("        o.field(\"{one}\", &self.{})?;\n", f.ident)),
            // Go embeds the struct: JSON has no name for the field, only its fields.
            [] if !f.messages.is_empty() => {
                out.push_str(&format!("        o.inline(&self.{})?;\n", f.ident));
            }
            other => panic!("{path}.{}: JSON names {other:?}", f.ident),
        }
    }
    out.push_str("        o.done()\n    }\n}\n");
    out
}

/// The review kinds, which the server answers but does not store (and so are not
/// among `builtin_kinds()`); kubectl's `auth` commands send them as protobuf.
const REVIEW_KINDS: &[(&str, &str)] = &[
    ("authentication.k8s.io/v1", "SelfSubjectReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview"),
];

/// (apiVersion, kind) of every built-in kind the server serves.
fn kinds_served() -> Vec<(String, String)> {
    kinject_testenv::builtin_kinds()
        .iter()
        .map(|k| (k.api_version(), k.kind.to_owned()))
        .chain(
            REVIEW_KINDS
                .iter()
                .map(|(v, k)| ((*v).to_owned(), (*k).to_owned())),
        )
        .collect()
}

#[test]
fn generated_decoders_are_current() {
    let code = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(OUT);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if std::env::var_os("TESTENV_REGENERATE").is_some() {
        // Rewriting an unchanged file would still touch it, and cargo would then
        // rebuild everything that depends on testenv.
        if current != code {
            std::fs::write(&path, &code).unwrap();
        }
        return;
    }
    assert!(
        current == code,
        "{OUT} is not what k8s-pb and k8s-openapi give; run pkg/testenv/hack/update-proto.sh"
    );
}
