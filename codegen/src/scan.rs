//! Reading the inputs: every `#[derive(Kind)]` struct of the configured API
//! modules (through [`crate::model`], the one marker parser) and the external
//! kinds of the config, into one plan per kind for the emitter.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::{DeriveInput, Item};

use crate::config::{Config, ExternalKind, K8S_OPENAPI_GROUPS};
use crate::error::{Diagnostic, Error};
use crate::model::{self, ClientVerb, KindModel, MARKERS, Scope};

/// What the emitter needs to know about one kind, wherever it came from.
#[derive(Clone, Debug)]
pub(crate) struct KindPlan {
    /// The Rust path generated code names the type by.
    pub(crate) rust_path: String,
    pub(crate) kind: String,
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    /// `None` for an external kind whose config leaves the scope to the type.
    pub(crate) scope: Option<Scope>,
    pub(crate) docs: Vec<String>,
    /// The client's verbs; `None` when the kind has no `#[genclient]`.
    pub(crate) verbs: Option<BTreeSet<ClientVerb>>,
    pub(crate) has_status: bool,
    pub(crate) reconciler: Option<ReconcilerPlan>,
    /// True for kinds of the scanned API modules, which are served by CRDs.
    pub(crate) is_crd: bool,
    /// `file:line` of the struct, for errors about its CRD; empty for
    /// external kinds.
    pub(crate) defined_at: String,
    /// The file the struct is declared in, as scanned; empty for external
    /// kinds. The scaffold copies a new version's fields from it.
    pub(crate) source: PathBuf,
    /// Marked `storage` among several versions.
    pub(crate) storage: bool,
    /// Marked `hub` among several versions: the others convert through it.
    pub(crate) hub: bool,
    /// The Rust types of `spec` and `status` as written (`WidgetSpec`), for
    /// a new version that shares them; `None` without the field.
    pub(crate) spec_type: Option<String>,
    pub(crate) status_type: Option<String>,
    /// The API module implements `Defaultable` for the kind: the admission
    /// webhook defaults it.
    pub(crate) defaulted: bool,
    /// The API module implements `Validatable` for the kind: the admission
    /// webhook validates it.
    pub(crate) validated: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct ReconcilerPlan {
    pub(crate) classes: Vec<String>,
    pub(crate) krshapedlogic: bool,
    pub(crate) finalizer: String,
}

impl KindPlan {
    /// The module of the group (`samples` for `samples.knative.dev`, `core` for "").
    pub(crate) fn group_module(&self) -> String {
        group_module(&self.group, self.is_crd)
    }

    /// The module of the kind (`addressableservice`).
    pub(crate) fn kind_module(&self) -> String {
        self.kind.to_lowercase()
    }
}

/// The module of `group`: its first label (`samples` for
/// `samples.knative.dev`, `core` for the core group ""). A custom group whose
/// first label is that of a Kubernetes group is named in full instead
/// (`batch_tutorial_example_io` for `batch.tutorial.example.io`), so its
/// kinds and Kubernetes' (`batch`'s Job) can be generated side by side, and
/// adding a built-in kind later never renames a custom group's module.
pub(crate) fn group_module(group: &str, custom: bool) -> String {
    let module = first_label_module(group);
    let builtin = || {
        K8S_OPENAPI_GROUPS
            .iter()
            .any(|(_, g)| first_label_module(g) == module)
    };
    if custom && builtin() {
        group.replace(['.', '-'], "_")
    } else {
        module
    }
}

/// `samples` for `samples.knative.dev`, `core` for the core group "".
fn first_label_module(group: &str) -> String {
    match group.split('.').next() {
        None | Some("") => "core".to_owned(),
        Some(first) => first.replace('-', "_"),
    }
}

/// The kinds found, and every file read (for `cargo:rerun-if-changed`).
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    pub(crate) kinds: Vec<KindPlan>,
    pub(crate) inputs: Vec<PathBuf>,
}

pub(crate) fn scan(config: &Config) -> Result<Scanned, Error> {
    let mut scanned = Scanned::default();
    let mut errors = Vec::new();
    for api in &config.apis {
        let first = scanned.kinds.len();
        let mut hooks = BTreeSet::new();
        let files = match rust_files(&api.source) {
            Ok(files) => files,
            Err(e) => {
                errors.push(Diagnostic::file(
                    &api.source,
                    format!(
                        "cannot read the API source directory: {e}; fix `source` of the [[api]] for `{}` in the codegen config",
                        api.module
                    ),
                ));
                continue;
            }
        };
        for file in files {
            scanned.inputs.push(file.clone());
            let text = match std::fs::read_to_string(&file) {
                Ok(text) => text,
                Err(e) => {
                    errors.push(Diagnostic::file(
                        &file,
                        format!("cannot read: {e}; make the file readable UTF-8 or move it out of the API directory"),
                    ));
                    continue;
                }
            };
            let parsed = match syn::parse_file(&text) {
                Ok(parsed) => parsed,
                Err(e) => {
                    let mut diags = Diagnostic::from_syn(&file, e);
                    for d in &mut diags {
                        d.message = format!(
                            "not valid Rust: {}; fix the syntax (cargo check shows it too)",
                            d.message
                        );
                    }
                    errors.extend(diags);
                    continue;
                }
            };
            collect(&parsed.items, &file, &api.module, &mut scanned.kinds, &mut errors);
            collect_hooks(&parsed.items, &mut hooks);
        }
        for plan in &mut scanned.kinds[first..] {
            let ident = plan.rust_path.rsplit("::").next().unwrap_or_default().to_owned();
            plan.defaulted = hooks.contains(&(ident.clone(), Hook::Defaultable));
            plan.validated = hooks.contains(&(ident, Hook::Validatable));
        }
    }
    for ext in &config.externals {
        scanned.kinds.push(external_plan(ext));
    }
    check_unique(&scanned.kinds, &mut errors);
    if errors.is_empty() {
        Ok(scanned)
    } else {
        Err(errors.into())
    }
}

/// The `.rs` files under `dir`, recursively, in a stable order.
fn rust_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            out.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(out)
}

fn collect(
    items: &[Item],
    file: &Path,
    module: &str,
    kinds: &mut Vec<KindPlan>,
    errors: &mut Vec<Diagnostic>,
) {
    for item in items {
        match item {
            Item::Struct(s) if model::derives_kind(&s.attrs) => {
                let input = DeriveInput::from(s.clone());
                match KindModel::from_derive_input(&input) {
                    Ok(model) => {
                        let mut plan = kind_plan(&model, module);
                        // The file alone: a line number would change with
                        // every `cargo fmt` of the API file, and the
                        // registry would be stale without a change of meaning.
                        plan.defined_at = shown(file).display().to_string();
                        file.clone_into(&mut plan.source);
                        kinds.push(plan);
                    }
                    Err(e) => errors.extend(Diagnostic::from_syn(file, e)),
                }
            }
            Item::Struct(s) => {
                if let Some(marker) = s
                    .attrs
                    .iter()
                    .find(|a| MARKERS.iter().any(|m| a.path().is_ident(m)))
                {
                    let start = marker.span().start();
                    let name = marker
                        .path()
                        .get_ident()
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    errors.push(Diagnostic::at(
                        file,
                        start.line,
                        start.column + 1,
                        format!(
                            "`{}` has #[{name}] but does not derive Kind, so the marker would be ignored; \
                             add `Kind` to its #[derive(...)] (`use kinject_macros::Kind;`) or remove the marker",
                            s.ident
                        ),
                    ));
                }
            }
            Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    // Kinds in inline modules are reached through the module path.
                    collect(items, file, &format!("{module}::{}", m.ident), kinds, errors);
                }
            }
            _ => {}
        }
    }
}

/// `file` relative to the working directory when under it, so generated
/// files name the same path on every machine.
fn shown(file: &Path) -> &Path {
    std::env::current_dir()
        .ok()
        .and_then(|dir| file.strip_prefix(dir).ok())
        .unwrap_or(file)
}

/// A kind trait the admission webhook calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Hook {
    Defaultable,
    Validatable,
}

/// The types that `impl Defaultable` or `impl Validatable` anywhere in
/// `items` (inline modules included, tests excepted), by the last segment of
/// their name: the files of one API module see each other's types.
fn collect_hooks(items: &[Item], hooks: &mut BTreeSet<(String, Hook)>) {
    for item in items {
        match item {
            Item::Impl(imp) => {
                let Some((trait_path, _)) = &imp.trait_ else {
                    continue;
                };
                let hook = match trait_path.segments.last().map(|s| s.ident.to_string()).as_deref() {
                    Some("Defaultable") => Hook::Defaultable,
                    Some("Validatable") => Hook::Validatable,
                    _ => continue,
                };
                if let syn::Type::Path(ty) = imp.self_ty.as_ref()
                    && let Some(last) = ty.path.segments.last()
                {
                    hooks.insert((last.ident.to_string(), hook));
                }
            }
            Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    collect_hooks(items, hooks);
                }
            }
            _ => {}
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
}

fn type_text(ty: &syn::Type) -> String {
    quote::quote!(#ty).to_string().replace(' ', "")
}

fn kind_plan(model: &KindModel, module: &str) -> KindPlan {
    KindPlan {
        rust_path: format!("{module}::{}", model.ident),
        kind: model.kind(),
        group: model.group().to_owned(),
        version: model.version().to_owned(),
        plural: model.plural().to_owned(),
        scope: Some(model.scope()),
        docs: model.docs.clone(),
        verbs: model.genclient.as_ref().map(|c| c.verbs.clone()),
        has_status: model.status.is_some(),
        reconciler: model.genreconciler.as_ref().map(|r| ReconcilerPlan {
            classes: r.classes.clone(),
            krshapedlogic: r.krshapedlogic,
            finalizer: model.finalizer_name(),
        }),
        is_crd: true,
        defined_at: String::new(),
        source: PathBuf::new(),
        storage: model.storage(),
        hub: model.hub(),
        spec_type: model.spec.as_ref().map(type_text),
        status_type: model.status.as_ref().map(type_text),
        defaulted: false,
        validated: false,
    }
}

fn external_plan(ext: &ExternalKind) -> KindPlan {
    let verbs = ClientVerb::ALL
        .into_iter()
        .filter(|v| ext.status || !v.is_status())
        .collect();
    let api_version = if ext.group.is_empty() {
        ext.version.clone()
    } else {
        format!("{}/{}", ext.group, ext.version)
    };
    KindPlan {
        rust_path: ext.path.clone(),
        kind: ext.kind.clone(),
        group: ext.group.clone(),
        version: ext.version.clone(),
        plural: ext.plural.clone(),
        scope: ext.scope,
        docs: vec![format!(
            "`{api_version}` `{}`, the type `{}`, declared in the codegen config.",
            ext.kind, ext.path
        )],
        verbs: Some(verbs),
        has_status: ext.status,
        reconciler: ext.reconciler.then(|| ReconcilerPlan {
            classes: Vec::new(),
            // A built-in kind's status and conditions are its own controller's.
            krshapedlogic: false,
            finalizer: if ext.group.is_empty() {
                ext.plural.clone()
            } else {
                format!("{}.{}", ext.plural, ext.group)
            },
        }),
        is_crd: false,
        defined_at: String::new(),
        source: PathBuf::new(),
        storage: false,
        hub: false,
        spec_type: None,
        status_type: None,
        defaulted: false,
        validated: false,
    }
}

/// Two kinds that would be written to the same file, or two groups sharing a
/// module, would silently overwrite each other.
fn check_unique(kinds: &[KindPlan], errors: &mut Vec<Diagnostic>) {
    let mut files = BTreeMap::new();
    let mut groups: BTreeMap<String, &str> = BTreeMap::new();
    for k in kinds {
        let module = k.group_module();
        if let Some(other) = groups.insert(module.clone(), &k.group)
            && other != k.group
        {
            errors.push(Diagnostic::file(
                "codegen config",
                format!(
                    "API groups {other:?} and {:?} both map to the module `{module}` (a group's module is its first label); rename one group, or serve them from separate output directories",
                    k.group
                ),
            ));
        }
        let file = format!("{module}/{}/{}", k.version, k.kind_module());
        if let Some(other) = files.insert(file.clone(), &k.rust_path) {
            errors.push(Diagnostic::file(
                "codegen config",
                format!(
                    "`{other}` and `{}` are both {}/{} {}; declare each kind once",
                    k.rust_path, k.group, k.version, k.kind
                ),
            ));
        }
    }
}
