//! `codegen.toml`: which API modules to scan, where the output goes, and which
//! kinds from other crates (k8s-openapi) get clients, informers and listers.
//!
//! ```toml
//! output = "generated/src"
//! reconcilers = true             # reconciler modules for #[genreconciler] kinds (default)
//! testing = true                 # a `testing` module: the CRDs tests install
//!
//! [[api]]
//! crate = "apis"                 # the crate the generated code imports kinds from
//! module = "apis::v1alpha1"      # where the kinds are reachable (`apis::v1alpha1::AddressableService`)
//! source = "apis/src/v1alpha1"   # the files to scan for #[derive(Kind)]
//!
//! [[external]]
//! path = "k8s_openapi::api::core::v1::Pod"
//! group = ""                     # "" is the core group
//! version = "v1"
//! kind = "Pod"
//! plural = "pods"
//! scope = "namespaced"           # or "cluster"
//! status = true                  # has a status subresource (adds update_status / patch_status)
//! reconciler = true              # a reconciler module, as #[genreconciler] gives our kinds
//!
//! [scaffold]                     # where `hack/new-kind.sh` (`kinject-codegen new-kind`) writes
//! reconcilers = "reconcilers"    # the crate whose src/lib.rs holds `controllers! { ... }`
//! samples = "config/samples"     # one example object per kind
//! apis = "apis"                  # the API crate a first group goes into, while no [[api]] names one
//! ```
//!
//! Relative paths are resolved against the directory holding the config file.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::error::{Diagnostic, Error};
use crate::model::Scope;
use crate::model::validation::{is_dns1123_label, is_dns1123_subdomain, is_kube_version};

/// The generator's input, read from `codegen.toml` or built with [`crate::Builder`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The directory generated files are written to.
    pub output: PathBuf,
    /// Whether `#[genreconciler]` kinds get their reconciler module.
    pub reconcilers: bool,
    /// Whether to emit the `testing` module: every API group's CRDs, for
    /// tests to install (it names no test crate, so needs no feature).
    pub testing: bool,
    /// The API modules to scan for kinds.
    pub apis: Vec<ApiModule>,
    /// Kinds defined elsewhere that still get clients, informers and listers.
    pub externals: Vec<ExternalKind>,
    /// Where `new-kind` writes besides the API module; `None` without a
    /// `[scaffold]` table.
    pub scaffold: Option<ScaffoldPaths>,
}

/// The `[scaffold]` table: the application's crates and directories that
/// `new-kind` adds to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScaffoldPaths {
    /// The reconcilers crate's directory (its `src/lib.rs` declares the
    /// reconciler modules with `kinject_runtime::controllers!`).
    pub reconcilers: PathBuf,
    /// The directory of example objects.
    pub samples: PathBuf,
    /// The API crate's directory, where a new group goes while no `[[api]]`
    /// names a module (a project that has no kind yet).
    pub apis: Option<PathBuf>,
}

/// One Rust module of API types.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApiModule {
    /// The crate the generated code names (`apis`).
    pub krate: String,
    /// The module path kinds are reachable at (`apis::v1alpha1`).
    pub module: String,
    /// The directory whose `.rs` files are scanned.
    pub source: PathBuf,
}

/// A kind the generator does not parse, such as k8s-openapi's `Pod`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExternalKind {
    /// The Rust path of the type (`k8s_openapi::api::core::v1::Pod`).
    pub path: String,
    /// The API group; empty for the core group.
    pub group: String,
    /// The API version (`v1`).
    pub version: String,
    /// The kind (`Pod`).
    pub kind: String,
    /// The resource name (`pods`).
    pub plural: String,
    /// Namespaced or cluster-scoped; `None` when the config leaves it to the
    /// type (a k8s-openapi kind given by its path alone): the generated code
    /// does not depend on it, only its docs do.
    pub scope: Option<Scope>,
    /// True when the kind has a status subresource.
    pub status: bool,
    /// True to generate its reconciler module, as `#[genreconciler]` does for
    /// the API modules' kinds (without status or condition handling: those
    /// belong to the kind's own controller).
    pub reconciler: bool,
}

impl ApiModule {
    /// The kinds of module `module` of crate `krate`, read from the `.rs`
    /// files of `source`.
    pub fn new(krate: impl Into<String>, module: impl Into<String>, source: impl Into<PathBuf>) -> Self {
        ApiModule {
            krate: krate.into(),
            module: module.into(),
            source: source.into(),
        }
    }
}

impl ExternalKind {
    /// The kind at Rust path `path` (`k8s_openapi::api::core::v1::Pod`), served
    /// as `group`/`version` (empty group for the core group), `kind` and
    /// resource `plural`; its scope left to the type, no status subresource
    /// and no reconciler module until [`scope`](Self::scope),
    /// [`status`](Self::status) and [`reconciler`](Self::reconciler) say so.
    ///
    /// ```
    /// use kinject_codegen::ExternalKind;
    /// use kinject_codegen::model::Scope;
    ///
    /// let pods = ExternalKind::new("k8s_openapi::api::core::v1::Pod", "", "v1", "Pod", "pods")
    ///     .scope(Scope::Namespaced)
    ///     .status(true);
    /// assert!(pods.status && !pods.reconciler);
    /// ```
    pub fn new(
        path: impl Into<String>,
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
        plural: impl Into<String>,
    ) -> Self {
        ExternalKind {
            path: path.into(),
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            scope: None,
            status: false,
            reconciler: false,
        }
    }

    /// Namespaced or cluster-scoped, for the generated docs.
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Whether the kind has a status subresource (`update_status`,
    /// `patch_status`).
    pub fn status(mut self, on: bool) -> Self {
        self.status = on;
        self
    }

    /// Whether to generate its reconciler module.
    pub fn reconciler(mut self, on: bool) -> Self {
        self.reconciler = on;
        self
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    output: Spanned<String>,
    #[serde(default = "yes")]
    reconcilers: bool,
    #[serde(default)]
    testing: bool,
    #[serde(default)]
    api: Vec<RawApi>,
    #[serde(default)]
    external: Vec<RawExternal>,
    scaffold: Option<RawScaffold>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScaffold {
    reconcilers: String,
    samples: String,
    apis: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApi {
    #[serde(rename = "crate")]
    krate: Spanned<String>,
    module: Spanned<String>,
    source: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExternal {
    path: Spanned<String>,
    group: Option<Spanned<String>>,
    version: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    plural: Option<Spanned<String>>,
    scope: Option<Spanned<String>>,
    #[serde(default)]
    status: bool,
    #[serde(default)]
    reconciler: bool,
}

impl Config {
    /// A config that writes to `output` and reads nothing yet: reconciler
    /// modules on, no `testing` module, no scaffold paths, as a
    /// `codegen.toml` holding only `output` says.
    ///
    /// ```
    /// use kinject_codegen::{ApiModule, Config};
    ///
    /// let mut config = Config::new("generated/src");
    /// config.apis.push(ApiModule::new("apis", "apis::v1alpha1", "apis/src/v1alpha1"));
    /// assert!(config.reconcilers && !config.testing);
    /// ```
    pub fn new(output: impl Into<PathBuf>) -> Self {
        Config {
            output: output.into(),
            reconcilers: true,
            testing: false,
            apis: Vec::new(),
            externals: Vec::new(),
            scaffold: None,
        }
    }

    /// Reads and checks a config file; relative paths in it are resolved
    /// against the file's directory.
    pub fn load(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::one(Diagnostic::file(
                path,
                format!("cannot read the codegen config: {e}; pass its path with --config"),
            ))
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        Config::parse(&text, path, base)
    }

    /// Parses config `text` (named `file` in errors), resolving paths against `base`.
    pub fn parse(text: &str, file: &Path, base: &Path) -> Result<Config, Error> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let (line, column) = Diagnostic::position_of(text, e.span().map_or(0, |s| s.start));
            Error::one(Diagnostic::at(
                file,
                line,
                column,
                format!(
                    "{}; see the example at the top of codegen/src/config.rs",
                    e.message().trim_end()
                ),
            ))
        })?;
        let mut problems = Problems {
            text,
            file,
            found: Vec::new(),
        };
        if raw.output.get_ref().trim().is_empty() {
            problems.at(
                &raw.output,
                "`output` is empty; name the directory to write, e.g. output = \"generated/src\"".into(),
            );
        }
        for (i, api) in raw.api.iter().enumerate() {
            api.check(i, &mut problems);
        }
        let externals: Vec<FilledExternal> = raw
            .external
            .into_iter()
            .enumerate()
            .filter_map(|(i, raw_ext)| {
                let ext = raw_ext.fill(i, &mut problems)?;
                ext.check(i, &mut problems);
                Some(ext)
            })
            .collect();
        if !problems.found.is_empty() {
            return Err(problems.found.into());
        }
        Ok(Config {
            output: base.join(raw.output.get_ref()),
            reconcilers: raw.reconcilers,
            testing: raw.testing,
            apis: raw.api.into_iter().map(|a| a.resolve(base)).collect(),
            externals: externals.into_iter().map(FilledExternal::into_external).collect(),
            scaffold: raw.scaffold.map(|s| ScaffoldPaths {
                reconcilers: base.join(s.reconcilers),
                samples: base.join(s.samples),
                apis: s.apis.map(|a| base.join(a)),
            }),
        })
    }
}

/// The problems found in a config file, each at its key.
struct Problems<'a> {
    text: &'a str,
    file: &'a Path,
    found: Vec<Diagnostic>,
}

impl Problems<'_> {
    fn at(&mut self, value: &Spanned<String>, message: String) {
        let (line, column) = Diagnostic::position_of(self.text, value.span().start);
        self.found.push(Diagnostic::at(self.file, line, column, message));
    }
}

impl RawApi {
    /// The module must be a Rust path inside the crate.
    fn check(&self, i: usize, problems: &mut Problems<'_>) {
        let krate = self.krate.get_ref().replace('-', "_");
        match syn::parse_str::<syn::Path>(self.module.get_ref()) {
            Ok(module) if module.segments.first().is_some_and(|s| s.ident == krate) => {}
            Ok(_) => problems.at(
                &self.module,
                format!(
                    "api[{i}].module = {:?} does not start with the crate `{krate}`; write it as `{krate}::<module>`",
                    self.module.get_ref()
                ),
            ),
            Err(_) => problems.at(
                &self.module,
                format!(
                    "api[{i}].module = {:?} is not a Rust path; write it like \"apis::v1alpha1\"",
                    self.module.get_ref()
                ),
            ),
        }
    }

    fn resolve(self, base: &Path) -> ApiModule {
        ApiModule {
            krate: self.krate.into_inner(),
            module: self.module.into_inner(),
            source: base.join(self.source.into_inner()),
        }
    }
}

impl RawExternal {
    /// The fields left out taken from a k8s-openapi path; `None`, with a
    /// problem, when some are missing and the path is not one.
    fn fill(self, i: usize, problems: &mut Problems<'_>) -> Option<FilledExternal> {
        let derived = ExternalKind::from_k8s_openapi_path(self.path.get_ref());
        let span = self.path.span();
        let mut missing = Vec::new();
        let mut fill =
            |given: Option<Spanned<String>>, name: &'static str, derive: fn(&ExternalKind) -> String| {
                given
                    .or_else(|| derived.as_ref().map(|d| Spanned::new(span.clone(), derive(d))))
                    .unwrap_or_else(|| {
                        missing.push(name);
                        Spanned::new(span.clone(), String::new())
                    })
            };
        let ext = FilledExternal {
            group: fill(self.group, "group", |d| d.group.clone()),
            version: fill(self.version, "version", |d| d.version.clone()),
            kind: fill(self.kind, "kind", |d| d.kind.clone()),
            plural: fill(self.plural, "plural", |d| d.plural.clone()),
            scope: self.scope,
            path: self.path,
            status: self.status,
            reconciler: self.reconciler,
        };
        if missing.is_empty() {
            return Some(ext);
        }
        problems.at(
            &ext.path,
            format!(
                "external[{i}] has no {}; its path {:?} is not a k8s-openapi kind (k8s_openapi::api::<group>::<version>::<Kind>) to take them from; add them",
                missing.join(", "),
                ext.path.get_ref()
            ),
        );
        None
    }
}

/// An `[[external]]` with every field but `scope` given or taken from its path.
struct FilledExternal {
    path: Spanned<String>,
    group: Spanned<String>,
    version: Spanned<String>,
    kind: Spanned<String>,
    plural: Spanned<String>,
    scope: Option<Spanned<String>>,
    status: bool,
    reconciler: bool,
}

impl FilledExternal {
    /// Every field must name what Kubernetes and Rust accept.
    fn check(&self, i: usize, problems: &mut Problems<'_>) {
        let kind = self.kind.get_ref();
        match syn::parse_str::<syn::Path>(self.path.get_ref()) {
            Ok(p) if p.segments.last().is_some_and(|s| s.ident == kind) => {}
            _ => problems.at(
                &self.path,
                format!(
                    "external[{i}].path = {:?} is not a Rust path ending in the kind `{kind}`; write e.g. \"k8s_openapi::api::core::v1::{kind}\"",
                    self.path.get_ref()
                ),
            ),
        }
        if !kind.starts_with(|c: char| c.is_ascii_uppercase()) || syn::parse_str::<syn::Ident>(kind).is_err()
        {
            problems.at(
                &self.kind,
                format!("external[{i}].kind = {kind:?} is not a kind; write it in CamelCase, e.g. \"Pod\""),
            );
        }
        let group = self.group.get_ref();
        if !group.is_empty() && !is_dns1123_subdomain(group).is_empty() {
            problems.at(
                &self.group,
                format!(
                    "external[{i}].group = {group:?} is not an API group; write \"\" for the core group or e.g. \"apps\""
                ),
            );
        }
        if !is_kube_version(self.version.get_ref()).is_empty() {
            problems.at(
                &self.version,
                format!(
                    "external[{i}].version = {:?} is not a Kubernetes API version; write e.g. \"v1\"",
                    self.version.get_ref()
                ),
            );
        }
        if !is_dns1123_label(self.plural.get_ref()).is_empty() {
            problems.at(
                &self.plural,
                format!(
                    "external[{i}].plural = {:?} is not a resource name; write the lower-case plural, e.g. \"pods\"",
                    self.plural.get_ref()
                ),
            );
        }
        if let Some(scope) = &self.scope
            && scope_of(scope.get_ref()).is_none()
        {
            problems.at(
                scope,
                format!(
                    "external[{i}].scope = {:?} is not a scope; write \"namespaced\" or \"cluster\"",
                    scope.get_ref()
                ),
            );
        }
    }

    fn into_external(self) -> ExternalKind {
        ExternalKind {
            scope: self.scope.and_then(|s| scope_of(s.get_ref())),
            path: self.path.into_inner(),
            group: self.group.into_inner(),
            version: self.version.into_inner(),
            kind: self.kind.into_inner(),
            plural: self.plural.into_inner(),
            status: self.status,
            reconciler: self.reconciler,
        }
    }
}

/// The API group of each module of k8s-openapi's `api` tree (and of its
/// `apiextensions` and `apiregistration` kinds), by the module's name: every
/// Kubernetes API group, which also tells the generator which module names
/// are Kubernetes'. A test (`codegen/tests/integration/k8s_openapi_paths.rs`) checks it
/// against k8s-openapi's `Resource::GROUP` for a kind of every group.
pub(crate) const K8S_OPENAPI_GROUPS: &[(&str, &str)] = &[
    ("admissionregistration", "admissionregistration.k8s.io"),
    ("apiextensions", "apiextensions.k8s.io"),
    ("apiregistration", "apiregistration.k8s.io"),
    ("apiserverinternal", "internal.apiserver.k8s.io"),
    ("apps", "apps"),
    ("authentication", "authentication.k8s.io"),
    ("authorization", "authorization.k8s.io"),
    ("autoscaling", "autoscaling"),
    ("batch", "batch"),
    ("certificates", "certificates.k8s.io"),
    ("coordination", "coordination.k8s.io"),
    ("core", ""),
    ("discovery", "discovery.k8s.io"),
    ("events", "events.k8s.io"),
    ("flowcontrol", "flowcontrol.apiserver.k8s.io"),
    ("networking", "networking.k8s.io"),
    ("node", "node.k8s.io"),
    ("policy", "policy"),
    ("rbac", "rbac.authorization.k8s.io"),
    ("resource", "resource.k8s.io"),
    ("scheduling", "scheduling.k8s.io"),
    ("storage", "storage.k8s.io"),
    ("storagemigration", "storagemigration.k8s.io"),
];

impl ExternalKind {
    /// The kind a k8s-openapi path names, `k8s_openapi::api::<group>::<version>::<Kind>`:
    /// group, version and kind from the path, the plural by Kubernetes' rules
    /// (`NetworkPolicy` → `networkpolicies`), scope left to the type, no status
    /// verbs and no reconciler. `None` for any other path.
    pub fn from_k8s_openapi_path(path: &str) -> Option<ExternalKind> {
        let segments: Vec<&str> = path.split("::").map(str::trim).collect();
        let [.., module, version, kind] = segments.as_slice() else {
            return None;
        };
        if segments.first() != Some(&"k8s_openapi") || !is_kube_version(version).is_empty() {
            return None;
        }
        let group = K8S_OPENAPI_GROUPS.iter().find(|(m, _)| m == module)?.1;
        Some(ExternalKind {
            path: path.to_owned(),
            group: group.to_owned(),
            version: (*version).to_owned(),
            kind: (*kind).to_owned(),
            plural: crate::model::pluralize(kind),
            scope: None,
            status: false,
            reconciler: false,
        })
    }
}

fn scope_of(s: &str) -> Option<Scope> {
    match s {
        "namespaced" => Some(Scope::Namespaced),
        "cluster" => Some(Scope::Cluster),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("codegen.toml"), Path::new("/repo")).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_apis_and_externals() {
        let config = parse(
            r#"
output = "generated/src"
[[api]]
crate = "apis"
module = "apis::v1alpha1"
source = "apis/src/v1alpha1"
[[external]]
path = "k8s_openapi::api::coordination::v1::Lease"
group = "coordination.k8s.io"
version = "v1"
kind = "Lease"
plural = "leases"
scope = "namespaced"
"#,
        )
        .unwrap();
        assert_eq!(config.output, Path::new("/repo/generated/src"));
        assert!(config.reconcilers);
        assert_eq!(config.apis[0].source, Path::new("/repo/apis/src/v1alpha1"));
        assert_eq!(config.externals[0].scope, Some(Scope::Namespaced));
        assert!(!config.externals[0].status);
    }

    #[test]
    fn a_k8s_openapi_kind_needs_only_its_path() {
        let config = parse(
            "output = \"g\"\n[[external]]\npath = \"k8s_openapi::api::networking::v1::NetworkPolicy\"\nreconciler = true\n",
        )
        .unwrap();
        let ext = &config.externals[0];
        assert_eq!(
            (
                ext.group.as_str(),
                ext.version.as_str(),
                ext.kind.as_str(),
                ext.plural.as_str()
            ),
            ("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies")
        );
        assert_eq!((ext.scope, ext.status, ext.reconciler), (None, false, true));
        // A given field wins over the path's.
        let config = parse(
            "output = \"g\"\n[[external]]\npath = \"k8s_openapi::api::core::v1::Pod\"\nscope = \"namespaced\"\nstatus = true\n",
        )
        .unwrap();
        assert_eq!(config.externals[0].scope, Some(Scope::Namespaced));
        assert!(config.externals[0].status);

        let err = parse("output = \"g\"\n[[external]]\npath = \"widgets::v1::Widget\"\n").unwrap_err();
        assert_eq!(
            err,
            "error: codegen.toml:3:8: external[0] has no group, version, kind, plural; its path \"widgets::v1::Widget\" \
             is not a k8s-openapi kind (k8s_openapi::api::<group>::<version>::<Kind>) to take them from; add them"
        );
    }

    #[test]
    fn errors_point_at_the_key_and_say_the_fix() {
        let err = parse("output = \"x\"\n[[external]]\npath = \"k8s_openapi::api::core::v1::Pod\"\ngroup = \"\"\nversion = \"v1\"\nkind = \"Pod\"\nplural = \"pods\"\nscope = \"namespace\"\n").unwrap_err();
        assert_eq!(
            err,
            "error: codegen.toml:8:9: external[0].scope = \"namespace\" is not a scope; write \"namespaced\" or \"cluster\""
        );
        let err = parse("output = \"x\"\noutptu = 1\n").unwrap_err();
        assert!(
            err.starts_with("error: codegen.toml:2:1: unknown field `outptu`"),
            "{err}"
        );
        let err =
            parse("output = \"x\"\n[[api]]\ncrate = \"apis\"\nmodule = \"other::v1\"\nsource = \"s\"\n")
                .unwrap_err();
        assert!(err.contains("codegen.toml:4:10: api[0].module"), "{err}");
    }
}
