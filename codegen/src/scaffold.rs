//! `new-kind`: starts a new kind, as kubebuilder's `create api` does. It
//! writes the API type (spec, status with conditions, lifecycle, defaults and
//! validation hooks, each with tests), a reconciler module with its table test,
//! an example object, and registers them: the kind's module in its API crate
//! (with an `[[api]]` entry in `codegen.toml` for a new group or version), the
//! reconciler in the `controllers!` list and the test in the table-test binary.
//! `hack/update-codegen.sh` then generates the clients, informers, listers,
//! reconciler glue, registry entry, CRD and RBAC (the reconciler's needs are
//! recorded when it is built, so nothing here edits the ClusterRole).
//!
//! `--owns` and `--watches` wire what the reconciler owns and watches, and
//! `--for` starts a controller keyed by a Kubernetes kind instead of a new
//! kind (see `relations`).
//!
//! For a kind that exists in another version of its group, it writes only the
//! new version's type, sharing the existing version's spec and status (see
//! `plan_version`).
//!
//! It writes all files or none: every name is checked and every file planned
//! before the first write, and the writes go through the same staging as the
//! generator's. The templates are plain text with a dozen fixed `{{name}}`
//! placeholders, filled by string replacement; a template engine would add a
//! dependency and a language for no gain.

use std::path::{Path, PathBuf};

use crate::config::{ApiModule, Config, ScaffoldPaths};
use crate::error::{Diagnostic, Error};
use crate::model::validation::{is_dns1123_subdomain, is_kube_version};
use crate::model::{Scope, pluralize};
use crate::scan::{self, KindPlan, group_module};
use crate::stage;

mod drop;
mod fields;
mod relations;
mod version;

pub use drop::{DropVersion, plan_drop};

/// The longest `spec.description` the scaffolded kind accepts.
const MAX_DESCRIPTION: usize = 256;

/// The kind to start.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewKind {
    /// The API group (`tutorial.example.io`).
    pub group: String,
    /// The version (`v1alpha1`).
    pub version: String,
    /// The kind, CamelCase (`Widget`).
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub scope: Scope,
    /// Kinds its reconciler owns (`Job`, `batch/v1/Job`; see `relations`).
    pub owns: Vec<String>,
    /// Kinds its reconciler watches through the tracker.
    pub watches: Vec<String>,
    /// Its spec's fields, `NAME:TYPE` (`replicas:int32`); none gives one
    /// example field, `description`.
    pub fields: Vec<String>,
    /// For a new version of a kind with one version: the new version becomes
    /// the hub, stored and reconciled, and the old one its spoke.
    pub hub: bool,
}

/// A controller for a kind that is not new: a Kubernetes kind, as
/// kubebuilder's `For(&corev1.Pod{})`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewController {
    /// The kind it is keyed by (`Pod`, `apps/v1/Deployment`).
    pub for_kind: String,
    /// Kinds it owns.
    pub owns: Vec<String>,
    /// Kinds it watches through the tracker.
    pub watches: Vec<String>,
}

/// What [`plan`] would write: every file, new or edited, with its whole content.
#[derive(Debug)]
pub struct Plan {
    /// The files in the order they are reported.
    pub files: Vec<PlannedFile>,
    /// Files and folders to remove once the files are written.
    pub removed: Vec<PathBuf>,
    /// The Cargo packages that hold them, to format afterwards with the
    /// project's own rustfmt settings.
    pub packages: Vec<String>,
    /// What was started and what to run next.
    pub summary: String,
}

/// One file of a [`Plan`].
#[derive(Debug)]
pub struct PlannedFile {
    /// Where it goes.
    pub path: PathBuf,
    /// Its whole new content.
    pub content: String,
    /// True for a file that does not exist yet; false for an edit.
    pub created: bool,
}

impl Plan {
    /// Writes every file, all or none, then removes what goes.
    ///
    /// # Errors
    ///
    /// A file could not be written (then none is), or one to remove could
    /// not be (then the files are written, and the error names it).
    pub fn write(&self) -> Result<(), Error> {
        stage::write_all(self.files.iter().map(|f| (f.path.as_path(), f.content.as_str())))?;
        for path in &self.removed {
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(path)
            } else {
                std::fs::remove_file(path)
            };
            removed.map_err(|e| {
                Error::one(Diagnostic::file(
                    path,
                    format!("cannot remove ({e}); the other changes are made: remove it by hand"),
                ))
            })?;
        }
        Ok(())
    }
}

/// Checks `new` against Kubernetes' and Rust's naming rules; every broken rule
/// is reported, each with the rule and an example that follows it.
pub fn check_names(new: &NewKind) -> Result<(), Error> {
    let mut problems = Vec::new();
    let kind = new.kind.as_str();
    if kind.is_empty() {
        problems.push("--kind is empty; name the kind in CamelCase, e.g. Widget".to_owned());
    } else if !kind.starts_with(|c: char| c.is_ascii_uppercase()) {
        problems.push(format!(
            "--kind {kind:?} must start with an upper-case letter: kinds are CamelCase, e.g. {:?}",
            camel(kind)
        ));
    } else if !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        problems.push(format!(
            "--kind {kind:?} may hold only ASCII letters and digits: kinds are CamelCase, e.g. {:?}",
            camel(kind)
        ));
    } else if pluralize(kind).len() > 63 {
        problems.push(format!(
            "--kind {kind:?} is too long: its plural {:?} must fit a 63-character DNS label",
            pluralize(kind)
        ));
    } else if syn::parse_str::<syn::Ident>(&kind.to_lowercase()).is_err()
        || syn::parse_str::<syn::Ident>(&snake(kind)).is_err()
        || syn::parse_str::<syn::Ident>(kind).is_err()
    {
        problems.push(format!(
            "--kind {kind:?} would name a Rust module `{}`, a keyword; pick another name",
            kind.to_lowercase()
        ));
    } else if kind == "Reconciler" {
        problems.push(
            "--kind \"Reconciler\" would clash with the reconciler type of its module; pick another name"
                .to_owned(),
        );
    }

    let group = new.group.as_str();
    if let Some(problem) = group_problem(group) {
        problems.push(format!("--group {group:?} {problem}"));
    }

    if let Some(problem) = is_kube_version(&new.version).into_iter().next() {
        problems.push(format!("--version {:?} {problem}", new.version));
    }
    fields::parse(&new.fields, &mut problems);

    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::from(
            problems
                .into_iter()
                .map(|p| Diagnostic::file("new-kind", p))
                .collect::<Vec<_>>(),
        ))
    }
}

/// The first rule a custom resource group breaks, worded to follow the
/// group (`"batch" must contain a dot: …`); `None` for a group a CRD may use.
/// `kinject init` checks a project's group with it too.
pub fn group_problem(group: &str) -> Option<String> {
    if !group.contains('.') {
        Some(format!(
            "must contain a dot: custom resources live in a domain you own, \
             e.g. \"{}.example.com\" (kube-apiserver refuses a CRD group without one)",
            if group.is_empty() { "widgets" } else { group }
        ))
    } else if let Some(problem) = is_dns1123_subdomain(group).into_iter().next() {
        Some(format!(
            "is not a DNS subdomain: {problem}; e.g. \"tutorial.example.com\""
        ))
    } else if group == "k8s.io"
        || group == "kubernetes.io"
        || group.ends_with(".k8s.io")
        || group.ends_with(".kubernetes.io")
    {
        Some(
            "is reserved for Kubernetes' own APIs (a CRD there needs the \
             api-approved.kubernetes.io annotation); use a domain you own, e.g. \"tutorial.example.com\""
                .to_owned(),
        )
    } else {
        None
    }
}

/// The config at `config_path`, the directory its paths are relative to,
/// and its `[scaffold]` table, which every scaffold needs.
fn load_scaffold(config_path: &Path) -> Result<(Config, PathBuf, ScaffoldPaths), Error> {
    let config = Config::load(config_path)?;
    let root = config_path.parent().unwrap_or(Path::new("")).to_path_buf();
    let Some(paths) = config.scaffold.clone() else {
        return Err(Error::one(Diagnostic::file(
            config_path,
            "has no [scaffold] table; add one naming the reconcilers crate and the samples directory:\n\
             [scaffold]\nreconcilers = \"reconcilers\"\nsamples = \"config/samples\"",
        )));
    };
    Ok((config, root, paths))
}

/// The `{{key_prefix}}` and `{{set_namespace}}` of a table test whose object
/// is `var`: a namespace `ns` for a namespaced kind, none for a cluster one.
fn namespace_placeholders(var: &str, namespaced: bool) -> (&'static str, String) {
    if namespaced {
        (
            "ns/",
            format!("\n    {var}.metadata.namespace = Some(\"ns\".into());"),
        )
    } else {
        ("", String::new())
    }
}

/// Plans the files for `new` in the repository `config_path` (its
/// `codegen.toml`) describes, writing nothing. Fails, naming the file and the
/// fix, when the kind exists, a file it would create exists, or a file it
/// must edit does not have the expected shape.
pub fn plan(config_path: &Path, new: &NewKind) -> Result<Plan, Error> {
    check_names(new)?;
    let (config, root, paths) = load_scaffold(config_path)?;
    let scanned = scan::scan(&config)?;
    let names = Names::new(new);
    let versions: Vec<&KindPlan> = scanned
        .kinds
        .iter()
        .filter(|k| k.is_crd && k.kind == new.kind && k.group == new.group)
        .collect();
    refuse_taken(config_path, &scanned, &versions, new, &names)?;
    let api = locate_api_module(&config, &scanned, new, &names, config_path)?;
    let hub = versions
        .iter()
        .find(|k| k.hub)
        .or_else(|| versions.iter().find(|k| k.storage))
        .or(versions.first());
    if new.hub && hub.is_none() {
        return Err(Error::one(Diagnostic::file(
            config_path,
            format!(
                "--hub makes a new version of an existing kind its hub, and {} has no version yet; \
                 start it without --hub",
                new.kind
            ),
        )));
    }
    if let Some(hub) = hub {
        if !new.owns.is_empty() || !new.watches.is_empty() || !new.fields.is_empty() {
            return Err(Error::one(Diagnostic::file(
                config_path,
                format!(
                    "{} exists in another version, whose fields and reconciler the new version shares; \
                     --field, --owns and --watches go with a kind's first version (edit its types, or the \
                     wiring in reconcilers/src/{}.rs)",
                    new.kind, names.module
                ),
            )));
        }
        let repo = Repo {
            config_path,
            root: &root,
            config: &config,
            paths: &paths,
        };
        if new.hub {
            return match versions.as_slice() {
                [only] => plan_new_hub(&repo, new, &names, &api, only),
                _ => Err(Error::one(Diagnostic::file(
                    config_path,
                    format!(
                        "{} has {} versions; --hub makes a new version the hub of a kind with one. Move the \
                         `hub` marker by hand, and each spoke's Convertible to the new hub",
                        new.kind,
                        versions.len()
                    ),
                ))),
            };
        }
        return plan_version(&repo, new, &names, &api, hub);
    }
    let relations = Relations::resolve(&new.owns, &new.watches, &scanned, config_path)?;
    let repo = Repo {
        config_path,
        root: &root,
        config: &config,
        paths: &paths,
    };
    plan_kind(&repo, new, &names, &api, &relations)
}

/// What a new controller owns and watches, resolved.
struct Relations {
    owns: Vec<relations::Related>,
    watches: Vec<relations::Related>,
}

impl Relations {
    fn resolve(
        owns: &[String],
        watches: &[String],
        scanned: &scan::Scanned,
        at: &Path,
    ) -> Result<Self, Error> {
        let all = |names: &[String]| -> Result<Vec<relations::Related>, Error> {
            names.iter().map(|n| relations::resolve(n, scanned, at)).collect()
        };
        Ok(Relations {
            owns: all(owns)?,
            watches: all(watches)?,
        })
    }

    /// `codegen.toml` with an `[[external]]` for each Kubernetes kind.
    fn externals(&self, toml: &str) -> String {
        self.owns
            .iter()
            .chain(&self.watches)
            .filter_map(|r| r.external.as_deref())
            .fold(toml.to_owned(), |text, path| {
                relations::ensure_external(&text, path, false)
            })
    }
}

/// A controller keyed by a kind that exists (a Kubernetes kind): its
/// reconciler and table test, registered, and the kind's `[[external]]`
/// entry with `reconciler = true`. No API type, no example object.
pub fn plan_controller(config_path: &Path, new: &NewController) -> Result<Plan, Error> {
    let (config, root, paths) = load_scaffold(config_path)?;
    let scanned = scan::scan(&config)?;
    let keyed = relations::resolve(&new.for_kind, &scanned, config_path)?;
    let Some(external) = keyed.external.clone() else {
        return Err(Error::one(Diagnostic::file(
            config_path,
            format!(
                "{} is a kind of this project, which got its reconciler when it was started; --for is for a \
                 Kubernetes kind (Pod, apps/v1/Deployment)",
                keyed.kind
            ),
        )));
    };
    let relations = Relations::resolve(&new.owns, &new.watches, &scanned, config_path)?;
    let generated_crate = rust_name(&package_name(&config.output)?);
    let reconcilers_dir = root.join(&paths.reconcilers);
    let reconcilers_package = package_name(&reconcilers_dir.join("src"))?;
    let (uses, wiring) =
        relations::wiring(&generated_crate, &keyed.kind, &relations.owns, &relations.watches);
    let var = snake(&keyed.kind);
    let (key_prefix, set_namespace) = namespace_placeholders(&var, !keyed.cluster_scoped);
    let fill = |template: &str| {
        [
            ("{{Kind}}", keyed.kind.as_str()),
            ("{{module}}", keyed.module()),
            ("{{var}}", &var),
            ("{{type_path}}", &keyed.rust_path),
            (
                "{{generated_module}}",
                &format!("{generated_crate}::{}", keyed.generated_module),
            ),
            ("{{generated_crate}}", &generated_crate),
            ("{{reconcilers_crate}}", &rust_name(&reconcilers_package)),
            ("{{key_prefix}}", key_prefix),
            ("{{set_namespace}}", &set_namespace),
            ("{{uses}}", &uses),
            ("{{wiring}}", &wiring),
        ]
        .iter()
        .fold(template.to_owned(), |text, (placeholder, value)| {
            text.replace(placeholder, value)
        })
    };
    let mut files = Files::default();
    add_reconciler(
        &mut files,
        keyed.module(),
        &keyed.kind,
        fill(include_str!("scaffold/reconciler_for.rs.tmpl")),
        fill(include_str!("scaffold/table_for.rs.tmpl")),
        &reconcilers_dir,
    )?;
    let toml = relations::ensure_external(&read(config_path)?, &external, true);
    files.edit(config_path.to_path_buf(), relations.externals(&toml));
    Ok(Plan {
        files: files.0,
        removed: Vec::new(),
        packages: vec![reconcilers_package],
        summary: format!(
            "started a controller of {} ({}); now run hack/update-codegen.sh, then cargo test --workspace",
            keyed.kind, keyed.rust_path
        ),
    })
}

/// The repository new-kind writes into.
struct Repo<'a> {
    config_path: &'a Path,
    /// The directory of `codegen.toml`, which its paths are relative to.
    root: &'a Path,
    config: &'a Config,
    paths: &'a ScaffoldPaths,
}

/// Refuses a kind that exists in the version asked for (`versions` are the
/// kind's existing ones), and a group whose generated module another group
/// has.
fn refuse_taken(
    config_path: &Path,
    scanned: &scan::Scanned,
    versions: &[&KindPlan],
    new: &NewKind,
    names: &Names,
) -> Result<(), Error> {
    if let Some(existing) = versions.iter().find(|k| k.version == new.version) {
        return Err(Error::one(Diagnostic::file(
            config_path,
            format!(
                "kind {} of group {} already exists in version {} ({}); pick another name or version, or edit \
                 its types in place",
                new.kind, new.group, existing.version, existing.rust_path
            ),
        )));
    }
    if let Some(other) = scanned
        .kinds
        .iter()
        .find(|k| k.group != new.group && k.group_module() == names.group_module)
    {
        return Err(Error::one(Diagnostic::file(
            config_path,
            format!(
                "group {} would share the generated module `{}` with group {:?} ({}); pick a group whose first label differs",
                new.group, names.group_module, other.group, other.rust_path
            ),
        )));
    }
    Ok(())
}

/// A kind new in every version: its API files, reconciler, table test and
/// example object.
fn plan_kind(
    repo: &Repo<'_>,
    new: &NewKind,
    names: &Names,
    api: &ApiTarget,
    relations: &Relations,
) -> Result<Plan, Error> {
    let generated_crate = rust_name(&package_name(&repo.config.output)?);
    let reconcilers_dir = repo.root.join(&repo.paths.reconcilers);
    let reconcilers_package = package_name(&reconcilers_dir.join("src"))?;
    let reconcilers_crate = rust_name(&reconcilers_package);
    let api_package = package_name(&api.dir)?;
    let (uses, wiring) = relations::wiring(&generated_crate, &new.kind, &relations.owns, &relations.watches);
    let fields = fields::parse(&new.fields, &mut Vec::new());
    let spec = fields::spec_text(&new.kind, &fields, MAX_DESCRIPTION);
    let values = Values {
        names,
        new,
        api_module: &api.module,
        generated_module: &format!("{generated_crate}::{}::{}", names.group_module, new.version),
        generated_crate: &generated_crate,
        reconcilers_crate: &reconcilers_crate,
        uses: &uses,
        wiring: &wiring,
        spec: &spec,
        example_field: fields.is_empty(),
        fields: &fields,
    };
    let mut files = Files::default();
    add_api_files(&mut files, &values, api, repo)?;
    add_reconciler(
        &mut files,
        &names.module,
        &new.kind,
        values.fill(include_str!("scaffold/reconciler.rs.tmpl")),
        values.fill(include_str!("scaffold/table.rs.tmpl")),
        &reconcilers_dir,
    )?;
    files.create(
        repo.root.join(&repo.paths.samples).join(format!(
            "{}_{}_{}.yaml",
            names.group_module, new.version, names.module
        )),
        values.fill(include_str!("scaffold/sample.yaml.tmpl")),
    )?;
    let toml = files.current(repo.config_path)?;
    let with_externals = relations.externals(&toml);
    if with_externals != toml {
        files.edit(repo.config_path.to_path_buf(), with_externals);
    }
    let mut packages = vec![api_package, reconcilers_package];
    packages.dedup();
    Ok(Plan {
        files: files.0,
        removed: Vec::new(),
        packages,
        summary: format!(
            "started {} ({}/{}); now run hack/update-codegen.sh, then cargo test --workspace",
            new.kind, new.group, new.version
        ),
    })
}

/// The kind's types, lifecycle, defaults and validation files, registered
/// in their version module.
fn add_api_files(
    files: &mut Files,
    values: &Values<'_>,
    api: &ApiTarget,
    repo: &Repo<'_>,
) -> Result<(), Error> {
    let snake = &values.names.snake;
    for (suffix, template) in [
        ("types", include_str!("scaffold/types.rs.tmpl")),
        ("lifecycle", include_str!("scaffold/lifecycle.rs.tmpl")),
        ("defaults", include_str!("scaffold/defaults.rs.tmpl")),
        (
            "validation",
            if values.example_field {
                include_str!("scaffold/validation.rs.tmpl")
            } else {
                include_str!("scaffold/validation_fields.rs.tmpl")
            },
        ),
    ] {
        files.create(
            api.dir.join(format!("{snake}_{suffix}.rs")),
            values.fill(template),
        )?;
    }
    let module_lines = [
        format!("mod {snake}_defaults;"),
        format!("mod {snake}_lifecycle;"),
        format!("mod {snake}_types;"),
        format!("mod {snake}_validation;"),
    ];
    let kind = &values.new.kind;
    let upper = &values.names.upper;
    let mut use_lines = vec![
        format!("pub use {snake}_lifecycle::{upper}_CONDITION_READY;"),
        format!("pub use {snake}_types::{{{kind}, {kind}List, {kind}Spec, {kind}Status}};"),
    ];
    if values.example_field {
        use_lines.push(format!(
            "pub use {snake}_validation::{upper}_MAX_DESCRIPTION_CHARS;"
        ));
    }
    register_module(
        files,
        api,
        &module_lines,
        &use_lines,
        values.new,
        repo.config_path,
        repo.root,
    )
}

/// The reconciler module, its place in the `controllers!` list, and its
/// table test: one more module of the table-test binary when there is one,
/// else a test binary of its own.
fn add_reconciler(
    files: &mut Files,
    module: &str,
    kind: &str,
    reconciler: String,
    table: String,
    reconcilers_dir: &Path,
) -> Result<(), Error> {
    let reconcilers_src = reconcilers_dir.join("src");
    if reconcilers_src.join(module).exists() {
        return Err(Error::one(Diagnostic::file(
            reconcilers_src.join(module),
            format!("exists; kind {kind} would put its reconciler in module `{module}`"),
        )));
    }
    files.create(reconcilers_src.join(format!("{module}.rs")), reconciler)?;
    let lib = reconcilers_src.join("lib.rs");
    let text = read(&lib)?;
    files.edit(lib.clone(), insert_controller(&text, &lib, module)?);

    let tables_main = reconcilers_dir.join("tests/tables/main.rs");
    if tables_main.is_file() {
        files.create(reconcilers_dir.join(format!("tests/tables/{module}.rs")), table)?;
        let text = read(&tables_main)?;
        files.edit(
            tables_main.clone(),
            insert_sorted_items(&text, &tables_main, &[format!("mod {module};")], ItemKind::Mod)?,
        );
    } else {
        files.create(reconcilers_dir.join(format!("tests/{module}.rs")), table)?;
    }
    Ok(())
}

/// Adds the kind's module and re-exports to its version module, creating
/// that module (and its `[[api]]` entry) when the version is new.
fn register_module(
    files: &mut Files,
    api: &ApiTarget,
    module_lines: &[String],
    use_lines: &[String],
    new: &NewKind,
    config_path: &Path,
    root: &Path,
) -> Result<(), Error> {
    match &api.module_file {
        ModuleFile::Existing(path) => {
            let text = read(path)?;
            let text = insert_sorted_items(&text, path, module_lines, ItemKind::Mod)?;
            let text = insert_sorted_items(&text, path, use_lines, ItemKind::PubUse)?;
            files.edit(path.clone(), text);
        }
        ModuleFile::New { path, parent } => {
            let body = format!(
                "//! `{}/{}`.\n//!\n//! Each kind is split as in Knative: `*_types.rs` (the marked-up types),\n\
                 //! `*_lifecycle.rs` (condition set and status helpers), `*_defaults.rs` and\n\
                 //! `*_validation.rs`.\n\n{}\n\n{}\n",
                new.group,
                new.version,
                module_lines.join("\n"),
                use_lines.join("\n")
            );
            files.create(path.clone(), body)?;
            for link in parent {
                match link {
                    ParentLink::Edit { path, line } => {
                        let text = read(path)?;
                        files.edit(
                            path.clone(),
                            insert_sorted_items(&text, path, std::slice::from_ref(line), ItemKind::PubMod)?,
                        );
                    }
                    ParentLink::Create { path, body } => files.create(path.clone(), body.clone())?,
                }
            }
            let toml = read(config_path)?;
            files.edit(
                config_path.to_path_buf(),
                insert_api_entry(&toml, &api.krate, &api.module, &relative(&api.dir, root)),
            );
        }
    }
    Ok(())
}

/// Another version of an existing kind, as kubebuilder's `create api` for a
/// new version: its types, each its own copy of `hub`'s (the kind's hub, or
/// the version it stores, which becomes the hub), and its conversion to and
/// from `hub`, field by field, with the hub's defaults and validation. The
/// CRD then converts through the webhook (`hub` is stored unless another
/// version says `storage`); the reconciler stays on `hub`. The reconcilers'
/// tests gain a check of every spoke's round trips, once.
fn plan_version(
    repo: &Repo<'_>,
    new: &NewKind,
    names: &Names,
    api: &ApiTarget,
    hub: &KindPlan,
) -> Result<Plan, Error> {
    let hub_module = hub
        .rust_path
        .rsplit_once("::")
        .map_or(hub.rust_path.as_str(), |(module, _)| module);
    let hub_module = match hub_module.strip_prefix(&format!("{}::", api.krate.replace('-', "_"))) {
        Some(inner) => format!("crate::{inner}"),
        None => hub_module.to_owned(),
    };
    let at_hub = |message: String| Error::one(Diagnostic::file(&hub.source, message));
    let copied = version::HubFile::read(hub).map_err(at_hub)?;
    let hub_path: syn::Path = syn::parse_str(&hub_module)
        .map_err(|e| at_hub(format!("the module path {hub_module} does not parse: {e}")))?;
    let mut files = Files::default();
    let (snake, kind) = (&names.snake, &new.kind);
    let scope = if new.scope == Scope::Namespaced {
        "namespaced"
    } else {
        "cluster_scoped"
    };
    files.create(
        api.dir.join(format!("{snake}_types.rs")),
        copied.types_file(hub, &new.version, scope),
    )?;
    files.create(
        api.dir.join(format!("{snake}_conversion.rs")),
        copied.conversion_file(hub, &hub_path, &new.version),
    )?;
    register_module(
        &mut files,
        api,
        &[format!("mod {snake}_conversion;"), format!("mod {snake}_types;")],
        &[format!(
            "pub use {snake}_types::{{{}}};",
            copied.exported(kind).join(", ")
        )],
        new,
        repo.config_path,
        repo.root,
    )?;
    if !hub.hub {
        let text = read(&hub.source)?;
        let marked = version::with_hub_marker(&text, kind).ok_or_else(|| {
            at_hub(format!(
                "cannot find the #[kind(...)] of {kind} to add `hub` to; add it by hand (#[kind(..., hub)])"
            ))
        })?;
        files.edit(hub.source.clone(), marked);
    }
    let role_note = grant_crd_to_webhook(repo, &mut files, &format!("{}.{}", hub.plural, hub.group))?;
    let round_trips = repo.paths.reconcilers.join("tests/conversion.rs");
    if !round_trips.exists() {
        files.create(round_trips, ROUND_TRIPS_TEST.to_owned())?;
    }
    Ok(Plan {
        files: files.0,
        removed: Vec::new(),
        packages: vec![package_name(&api.dir)?, package_name(&repo.paths.reconcilers)?],
        summary: format!(
            "started version {} of {kind} ({}), with its own copy of the fields of {} and a conversion to \
             and from it, the hub, which the webhook serves. Now run hack/update-codegen.sh, then cargo \
             test --workspace.{role_note}",
            new.version, new.group, hub.version
        ),
    })
}

/// A new version that becomes the kind's hub (`--hub`), as a kind's newest
/// version usually is: it takes the old version's types (its copy of the
/// file, marked `hub`, so stored), its lifecycle, defaults and validation,
/// and its reconciler, whose paths move to it. The old version keeps its
/// types and hooks, loses `hub`, `storage` and `#[genreconciler]`, and
/// gains its conversion to and from the new hub, field by field.
fn plan_new_hub(
    repo: &Repo<'_>,
    new: &NewKind,
    names: &Names,
    api: &ApiTarget,
    old: &KindPlan,
) -> Result<Plan, Error> {
    let (snake, kind) = (&names.snake, &new.kind);
    let old_dir = old.source.parent().unwrap_or(Path::new("")).to_path_buf();
    let old_api = old
        .rust_path
        .rsplit_once("::")
        .map_or("", |(module, _)| module)
        .to_owned();
    let new_api = api.module.clone();
    let types = read(&old.source)?;
    let new_types = hub_types(&types, old, kind, &new.version)?;
    let mut files = Files::default();
    files.create(api.dir.join(format!("{snake}_types.rs")), new_types)?;
    let mut module_lines = vec![format!("mod {snake}_types;")];
    for companion in ["lifecycle", "defaults", "validation"] {
        let file = old_dir.join(format!("{snake}_{companion}.rs"));
        if file.is_file() {
            files.create(api.dir.join(format!("{snake}_{companion}.rs")), read(&file)?)?;
            module_lines.push(format!("mod {snake}_{companion};"));
        }
    }
    module_lines.sort();
    let use_lines: Vec<String> = read(&module_file(&old_dir)?)?
        .lines()
        .filter(|line| line.starts_with(&format!("pub use {snake}_")))
        .map(str::to_owned)
        .collect();
    register_module(
        &mut files,
        api,
        &module_lines,
        &use_lines,
        new,
        repo.config_path,
        repo.root,
    )?;

    demote_to_spoke(&mut files, api, old, new, names, &types)?;
    let moved_sample = move_sample(repo, &mut files, names, old, &new.version)?;
    let reconcilers_dir = repo.root.join(&repo.paths.reconcilers);
    let moved = move_reconciler(repo, &mut files, names, old, (&old_api, &new_api), &new.version)?;
    let role_note = grant_crd_to_webhook(repo, &mut files, &format!("{}.{}", old.plural, old.group))?;
    let round_trips = reconcilers_dir.join("tests/conversion.rs");
    if !round_trips.exists() {
        files.create(round_trips, ROUND_TRIPS_TEST.to_owned())?;
    }
    let moved_note = match moved.as_slice() {
        [] => format!(
            " No reconciler names {kind} {}: point yours at {new_api}.",
            old.version
        ),
        moved => format!(
            " The reconciler reads {} now ({}).",
            new.version,
            moved.join(", ")
        ),
    };
    Ok(Plan {
        files: files.0,
        removed: moved_sample.into_iter().collect(),
        packages: vec![
            package_name(&api.dir)?,
            package_name(&reconcilers_dir.join("src"))?,
        ],
        summary: format!(
            "started version {} of {kind} ({}) as its hub, stored and reconciled, with a copy of the fields \
             of {}, which converts to and from it.{moved_note} Now run hack/update-codegen.sh, then cargo \
             test --workspace.{role_note}",
            new.version, new.group, old.version
        ),
    })
}

/// The old version's types file, in the new version and marked `hub`.
fn hub_types(types: &str, old: &KindPlan, kind: &str, new_version: &str) -> Result<String, Error> {
    let at_old = |message: String| Error::one(Diagnostic::file(&old.source, message));
    let retargeted = version::in_version(types, kind, &old.version, new_version).ok_or_else(|| {
        at_old(format!(
            "cannot find `version = \"{}\"` in the #[kind(...)] of {kind} to copy it to {new_version}",
            old.version
        ))
    })?;
    if old.hub {
        return Ok(retargeted);
    }
    version::with_hub_marker(&retargeted, kind)
        .ok_or_else(|| at_old(format!("cannot find the #[kind(...)] of {kind} to add `hub` to")))
}

/// The kind's example object moves to the new version (the same fields,
/// for now; one object of one name, as a cluster holds it); the old file,
/// to remove.
fn move_sample(
    repo: &Repo<'_>,
    files: &mut Files,
    names: &Names,
    old: &KindPlan,
    version: &str,
) -> Result<Option<PathBuf>, Error> {
    let samples = repo.root.join(&repo.paths.samples);
    let sample = |v: &str| samples.join(format!("{}_{v}_{}.yaml", names.group_module, names.module));
    let old_sample = sample(&old.version);
    if old_sample.is_file() {
        let text = read(&old_sample)?.replace(
            &format!("apiVersion: {}/{}", old.group, old.version),
            &format!("apiVersion: {}/{version}", old.group),
        );
        files.create(sample(version), text)?;
        return Ok(Some(old_sample));
    }
    Ok(None)
}

/// Makes the old version a spoke of the new hub: no `hub`, `storage` or
/// `#[genreconciler]`, and its conversion to and from the hub beside it.
/// It keeps its own defaults and validation.
fn demote_to_spoke(
    files: &mut Files,
    api: &ApiTarget,
    old: &KindPlan,
    new: &NewKind,
    names: &Names,
    types: &str,
) -> Result<(), Error> {
    let at_old = |message: String| Error::one(Diagnostic::file(&old.source, message));
    let (snake, kind) = (&names.snake, &new.kind);
    let old_dir = old.source.parent().unwrap_or(Path::new("")).to_path_buf();
    let old_module_file = module_file(&old_dir)?;
    let old_module = read(&old_module_file)?;
    let new_api = &api.module;
    files.edit(old.source.clone(), version::as_spoke(types, kind));
    let mut hub = old.clone();
    hub.version.clone_from(&new.version);
    // The spoke keeps its own defaults and validation.
    (hub.defaulted, hub.validated) = (false, false);
    let new_api_in_crate = match new_api.strip_prefix(&format!("{}::", api.krate.replace('-', "_"))) {
        Some(inner) => format!("crate::{inner}"),
        None => new_api.clone(),
    };
    let hub_path: syn::Path = syn::parse_str(&new_api_in_crate)
        .map_err(|e| at_old(format!("the module path {new_api_in_crate} does not parse: {e}")))?;
    let copied = version::HubFile::read(old).map_err(at_old)?;
    files.create(
        old_dir.join(format!("{snake}_conversion.rs")),
        copied.conversion_file(&hub, &hub_path, &old.version),
    )?;
    files.edit(
        old_module_file.clone(),
        insert_sorted_items(
            &old_module,
            &old_module_file,
            &[format!("mod {snake}_conversion;")],
            ItemKind::Mod,
        )?,
    );

    Ok(())
}

/// Points the kind's reconciler and its table test at the new hub; the
/// files it changed, relative to the repository.
fn move_reconciler(
    repo: &Repo<'_>,
    files: &mut Files,
    names: &Names,
    old: &KindPlan,
    (old_api, new_api): (&str, &str),
    new_version: &str,
) -> Result<Vec<String>, Error> {
    let generated_crate = rust_name(&package_name(&repo.config.output)?);
    let generated = |version: &str| format!("{generated_crate}::{}::{version}::", names.group_module);
    let reconcilers_dir = repo.root.join(&repo.paths.reconcilers);
    let mut moved = Vec::new();
    for file in [
        reconcilers_dir.join(format!("src/{}.rs", names.module)),
        reconcilers_dir.join(format!("tests/tables/{}.rs", names.module)),
        reconcilers_dir.join(format!("tests/{}.rs", names.module)),
    ] {
        if !file.is_file() {
            continue;
        }
        let text = read(&file)?;
        let edited = text
            .replace(&format!("{old_api}::"), &format!("{new_api}::"))
            .replace(&generated(&old.version), &generated(new_version))
            .replace(
                &format!("`{}/{}`", old.group, old.version),
                &format!("`{}/{}`", old.group, new_version),
            );
        if edited != text {
            moved.push(relative(&file, repo.root));
            files.edit(file, edited);
        }
    }
    Ok(moved)
}

/// Adds the CRD `crd` to the webhook's ClusterRole beside the samples
/// (`kinject init`'s `config/200-webhook-clusterrole.yaml`), so that its
/// `conversionwebhook` reconciler may keep the CRD's conversion current; the
/// summary's note when the project has no such file.
fn grant_crd_to_webhook(repo: &Repo<'_>, files: &mut Files, crd: &str) -> Result<String, Error> {
    let role = repo
        .paths
        .samples
        .parent()
        .map(|config| config.join("200-webhook-clusterrole.yaml"))
        .filter(|role| role.is_file());
    let Some(role) = role else {
        return Ok(format!(
            " The webhook's ClusterRole needs get, list, watch and update on the CRD {crd} (resourceNames) \
             to keep its conversion current."
        ));
    };
    if let Some(granted) = version::with_crd_rule(&read(&role)?, crd) {
        files.edit(role, granted);
    }
    Ok(String::new())
}

/// The reconcilers' test of every spoke's conversions, written with a
/// project's first second version.
const ROUND_TRIPS_TEST: &str = "//! Every version of a kind with a hub converts to the hub and back, and the\n\
//! hub to it and back, with nothing lost, on objects generated from the\n\
//! versions' CRD schemas.\n\
\n\
#[test]\n\
fn every_version_round_trips_through_its_hub() {\n    \
if let Err(failure) = kinject_testing::conversion::check_round_trips(&generated::registry::custom_kinds()) {\n        \
panic!(\"{failure}\");\n    \
}\n\
}\n";

/// The names derived from the kind.
struct Names {
    /// `simpledeployment`: the generated and reconciler module.
    module: String,
    /// `simple_deployment`: file names and variables.
    snake: String,
    /// `SIMPLE_DEPLOYMENT`: constants.
    upper: String,
    /// `tutorial` for `tutorial.example.io` (see [`group_module`]).
    group_module: String,
}

impl Names {
    fn new(new: &NewKind) -> Self {
        let snake = snake(&new.kind);
        Names {
            module: new.kind.to_lowercase(),
            upper: snake.to_uppercase(),
            snake,
            group_module: group_module(&new.group, true),
        }
    }
}

/// Everything a template names.
struct Values<'a> {
    names: &'a Names,
    new: &'a NewKind,
    api_module: &'a str,
    generated_module: &'a str,
    generated_crate: &'a str,
    reconcilers_crate: &'a str,
    /// The `use` lines and `new_controller` statements of what the
    /// reconciler owns and watches (empty without `--owns`/`--watches`).
    uses: &'a str,
    wiring: &'a str,
    /// The spec's fields, as each file names them.
    spec: &'a fields::SpecText,
    /// True for the example field `description` (no `--field`), which
    /// comes with a validation rule and its table row.
    example_field: bool,
    fields: &'a [fields::Field],
}

impl Values<'_> {
    fn fill(&self, template: &str) -> String {
        let namespaced = self.new.scope == Scope::Namespaced;
        let var = &self.names.snake;
        let (key_prefix, set_namespace) = namespace_placeholders(var, namespaced);
        let invalid_spec_row = if self.example_field {
            format!("\n{}", include_str!("scaffold/table_invalid_row.rs.tmpl"))
        } else {
            String::new()
        };
        let (kind_options, kind_comment) = fields::kind_options(self.fields);
        let pairs: [(&str, &str); 23] = [
            // First: they hold other placeholders.
            ("{{invalid_spec_row}}", &invalid_spec_row),
            ("{{kind_options}}", &kind_options),
            ("{{kind_comment}}", &kind_comment),
            ("{{spec_fields}}", &self.spec.declarations),
            ("{{example_spec}}", &self.spec.example),
            ("{{sample_spec}}", &self.spec.sample),
            ("{{Kind}}", &self.new.kind),
            ("{{KIND}}", &self.names.upper),
            ("{{module}}", &self.names.module),
            ("{{var}}", var),
            ("{{group}}", &self.new.group),
            ("{{version}}", &self.new.version),
            (
                "{{scope_marker}}",
                if namespaced {
                    "namespaced"
                } else {
                    "cluster_scoped"
                },
            ),
            ("{{api_module}}", self.api_module),
            ("{{generated_module}}", self.generated_module),
            ("{{generated_crate}}", self.generated_crate),
            ("{{reconcilers_crate}}", self.reconcilers_crate),
            ("{{max_description}}", &MAX_DESCRIPTION.to_string()),
            ("{{set_namespace}}", &set_namespace),
            ("{{uses}}", self.uses),
            ("{{wiring}}", self.wiring),
            ("{{key_prefix}}", key_prefix),
            (
                "{{sample_namespace}}",
                if namespaced { "\n  namespace: default" } else { "" },
            ),
        ];
        let mut out = template.to_owned();
        for (placeholder, value) in pairs {
            out = out.replace(placeholder, value);
        }
        out
    }
}

/// The planned files, refusing to create one that exists.
#[derive(Default)]
struct Files(Vec<PlannedFile>);

impl Files {
    fn create(&mut self, path: PathBuf, content: String) -> Result<(), Error> {
        if path.exists() {
            return Err(Error::one(Diagnostic::file(
                &path,
                "exists; new-kind never overwrites a file: remove it, or pick another kind name",
            )));
        }
        self.0.push(PlannedFile {
            path,
            content,
            created: true,
        });
        Ok(())
    }

    /// `path`'s content as planned so far, or as on disk.
    fn current(&self, path: &Path) -> Result<String, Error> {
        match self.0.iter().find(|f| f.path == path) {
            Some(file) => Ok(file.content.clone()),
            None => read(path),
        }
    }

    fn edit(&mut self, path: PathBuf, content: String) {
        match self.0.iter_mut().find(|f| f.path == path) {
            Some(file) => file.content = content,
            None => self.0.push(PlannedFile {
                path,
                content,
                created: false,
            }),
        }
    }
}

/// Where the kind's API files go.
struct ApiTarget {
    krate: String,
    module: String,
    dir: PathBuf,
    module_file: ModuleFile,
}

enum ModuleFile {
    /// The version's module exists: its `mod.rs` (or `lib.rs`) gains the kind.
    Existing(PathBuf),
    /// A new version module, linked from its parent.
    New { path: PathBuf, parent: Vec<ParentLink> },
}

enum ParentLink {
    /// Add `line` (`pub mod v1;`) to an existing module file.
    Edit { path: PathBuf, line: String },
    /// Create a group module file.
    Create { path: PathBuf, body: String },
}

/// Where the kind's API files go: the module of its group and version, a
/// sibling of another version of its group, or a new group module in the
/// crate of the first `[[api]]`.
fn locate_api_module(
    config: &Config,
    scanned: &scan::Scanned,
    new: &NewKind,
    names: &Names,
    config_path: &Path,
) -> Result<ApiTarget, Error> {
    let Some(first) = config.apis.first() else {
        // A project with no kind yet: the first group goes into the crate
        // `[scaffold] apis` names.
        let Some(dir) = config.scaffold.as_ref().and_then(|s| s.apis.as_ref()) else {
            return Err(Error::one(Diagnostic::file(
                config_path,
                "names no [[api]] module, nor an API crate under [scaffold] (`apis = \"apis\"`); new-kind \
                 puts a new group into that crate, so add one (see the example at the top of codegen/src/config.rs)",
            )));
        };
        return new_group_module(&rust_name(&package_name(dir)?), &dir.join("src"), new, names);
    };
    let group_of = |module: &str| {
        scanned
            .kinds
            .iter()
            .find(|k| {
                k.is_crd
                    && k.rust_path
                        .strip_prefix(module)
                        .is_some_and(|r| r.starts_with("::"))
            })
            .map(|k| (k.group.clone(), k.version.clone()))
    };
    // The group and version's own module.
    for api in &config.apis {
        if group_of(&api.module) == Some((new.group.clone(), new.version.clone())) {
            return Ok(ApiTarget {
                krate: api.krate.clone(),
                module: api.module.clone(),
                dir: api.source.clone(),
                module_file: ModuleFile::Existing(module_file(&api.source)?),
            });
        }
    }
    // Another version of the group: a sibling module.
    if let Some(api) = config
        .apis
        .iter()
        .find(|api| group_of(&api.module).is_some_and(|(group, _)| group == new.group))
    {
        return sibling_version_module(api, new);
    }
    new_group_module(&first.krate, &crate_src(&first.source)?, new, names)
}

/// A new version module beside `api`, the module of another version of the
/// group.
fn sibling_version_module(api: &ApiModule, new: &NewKind) -> Result<ApiTarget, Error> {
    let parent_dir = api.source.parent().unwrap_or(Path::new("")).to_path_buf();
    let parent_module = api
        .module
        .rsplit_once("::")
        .map_or(api.module.as_str(), |(parent, _)| parent);
    let dir = parent_dir.join(&new.version);
    refuse_existing(&dir)?;
    Ok(ApiTarget {
        krate: api.krate.clone(),
        module: format!("{parent_module}::{}", new.version),
        module_file: ModuleFile::New {
            path: dir.join("mod.rs"),
            parent: vec![ParentLink::Edit {
                path: module_file(&parent_dir)?,
                line: format!("pub mod {};", new.version),
            }],
        },
        dir,
    })
}

/// `<src>/<group>/<version>` in the crate `krate` whose sources are `src`,
/// the group module created unless it exists.
fn new_group_module(krate: &str, src: &Path, new: &NewKind, names: &Names) -> Result<ApiTarget, Error> {
    let group_dir = src.join(&names.group_module);
    let dir = group_dir.join(&new.version);
    refuse_existing(&dir)?;
    let module_krate = krate.replace('-', "_");
    let parent = if group_dir.join("mod.rs").is_file() {
        vec![ParentLink::Edit {
            path: group_dir.join("mod.rs"),
            line: format!("pub mod {};", new.version),
        }]
    } else {
        refuse_existing(&group_dir)?;
        vec![
            ParentLink::Create {
                path: group_dir.join("mod.rs"),
                body: format!("//! The API group `{}`.\n\npub mod {};\n", new.group, new.version),
            },
            ParentLink::Edit {
                path: module_file(src)?,
                line: format!("pub mod {};", names.group_module),
            },
        ]
    };
    Ok(ApiTarget {
        krate: krate.to_owned(),
        module: format!("{module_krate}::{}::{}", names.group_module, new.version),
        module_file: ModuleFile::New {
            path: dir.join("mod.rs"),
            parent,
        },
        dir,
    })
}

fn refuse_existing(dir: &Path) -> Result<(), Error> {
    if dir.exists() {
        return Err(Error::one(Diagnostic::file(
            dir,
            "exists but holds no kind of this group and version; move it away, or pick another group or version",
        )));
    }
    Ok(())
}

/// The file declaring the module whose directory is `dir`: `dir/mod.rs`,
/// `dir.rs`, or `lib.rs` for a crate's `src`.
fn module_file(dir: &Path) -> Result<PathBuf, Error> {
    let candidates = [dir.join("mod.rs"), dir.with_extension("rs"), dir.join("lib.rs")];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        Error::one(Diagnostic::file(
            dir,
            "has no mod.rs (nor a sibling .rs file or lib.rs) to register the new module in",
        ))
    })
}

/// The `src` directory of the crate holding `dir`.
fn crate_src(dir: &Path) -> Result<PathBuf, Error> {
    dir.ancestors()
        .find(|d| d.join("Cargo.toml").is_file())
        .map(|d| d.join("src"))
        .ok_or_else(|| Error::one(Diagnostic::file(dir, "is in no crate (no Cargo.toml above it)")))
}

/// The Cargo package holding `dir`, from its Cargo.toml.
fn package_name(dir: &Path) -> Result<String, Error> {
    let manifest = crate_src(dir)?.with_file_name("Cargo.toml");
    let text = read(&manifest)?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        Error::one(Diagnostic::file(
            &manifest,
            format!("cannot parse: {}", e.message()),
        ))
    })?;
    table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Error::one(Diagnostic::file(&manifest, "has no [package] name")))
}

/// A package's name as Rust code names its crate.
fn rust_name(package: &str) -> String {
    package.replace('-', "_")
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::one(Diagnostic::file(path, format!("cannot read: {e}"))))
}

/// `path` relative to `base`, with `/` separators, when it lies below it.
fn relative(path: &Path, base: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    /// `mod x;`
    Mod,
    /// `pub mod x;`
    PubMod,
    /// `pub use x::...;`
    PubUse,
}

/// Inserts each of `lines` among the top-level items of its kind in `text`,
/// in name order as rustfmt keeps them; after the module's inner docs and
/// attributes when it has none of that kind yet.
fn insert_sorted_items(text: &str, path: &Path, lines: &[String], kind: ItemKind) -> Result<String, Error> {
    let mut text = text.to_owned();
    for line in lines {
        let file = syn::parse_file(&text).map_err(|e| {
            let at = e.span().start();
            Error::one(Diagnostic::at(
                path,
                at.line,
                at.column + 1,
                format!("cannot parse this file to register the new kind: {e}"),
            ))
        })?;
        let new_name = line_name(line);
        let mut insert_before = None;
        let mut last_of_kind = None;
        for item in &file.items {
            let Some(name) = item_name(item, kind) else {
                continue;
            };
            let span = syn::spanned::Spanned::span(item);
            if insert_before.is_none() && name > new_name {
                insert_before = Some(span.start().line);
            }
            last_of_kind = Some(span.end().line);
        }
        let lines_vec: Vec<&str> = text.lines().collect();
        let at = match (insert_before, last_of_kind) {
            (Some(before), _) => before - 1,
            (None, Some(after)) => after,
            (None, None) => {
                // After the leading `//!` docs and `#![...]` attributes.
                let header = lines_vec
                    .iter()
                    .take_while(|l| {
                        let t = l.trim_start();
                        t.starts_with("//!") || t.starts_with("#![") || t.is_empty()
                    })
                    .count();
                let mut out: Vec<String> = lines_vec[..header].iter().map(|s| (*s).to_owned()).collect();
                if out.last().is_some_and(|l| !l.is_empty()) {
                    out.push(String::new());
                }
                out.push(line.clone());
                if lines_vec.get(header).is_some() {
                    out.push(String::new());
                }
                out.extend(lines_vec[header..].iter().map(|s| (*s).to_owned()));
                text = out.join("\n") + "\n";
                continue;
            }
        };
        let mut out: Vec<String> = lines_vec.iter().map(|s| (*s).to_owned()).collect();
        out.insert(at, line.clone());
        text = out.join("\n") + "\n";
    }
    Ok(text)
}

/// The name a line declares: `mod x;` → `x`, `pub use x::y;` → `x::y`.
fn line_name(line: &str) -> String {
    line.trim()
        .trim_start_matches("pub ")
        .trim_start_matches("mod ")
        .trim_start_matches("use ")
        .trim_end_matches(';')
        .to_owned()
}

fn item_name(item: &syn::Item, kind: ItemKind) -> Option<String> {
    match (item, kind) {
        (syn::Item::Mod(m), ItemKind::Mod | ItemKind::PubMod) if m.content.is_none() => {
            let public = matches!(m.vis, syn::Visibility::Public(_));
            (public == (kind == ItemKind::PubMod)).then(|| m.ident.to_string())
        }
        (syn::Item::Use(u), ItemKind::PubUse) if matches!(u.vis, syn::Visibility::Public(_)) => {
            let tree = &u.tree;
            Some(quote::quote!(#tree).to_string().replace(' ', ""))
        }
        _ => None,
    }
}

/// Adds `pub mod <module>;` to the `controllers! { ... }` block of the
/// reconcilers' `lib.rs`, in name order.
fn insert_controller(text: &str, path: &Path, module: &str) -> Result<String, Error> {
    let missing = || {
        Error::one(Diagnostic::file(
            path,
            format!(
                "has no `kinject_runtime::controllers! {{ ... }}` block to register the reconciler in; \
                 declare the reconciler modules inside one (see reconcilers/src/lib.rs in kinject's sample), \
                 with `pub mod {module};` among them"
            ),
        ))
    };
    let lines: Vec<&str> = text.lines().collect();
    let open = lines
        .iter()
        .position(|l| l.contains("controllers!") && l.trim_end().ends_with('{'))
        .ok_or_else(missing)?;
    let close = lines[open + 1..]
        .iter()
        .position(|l| l.trim() == "}")
        .map(|i| open + 1 + i)
        .ok_or_else(missing)?;
    let new_line = format!("    pub mod {module};");
    let at = (open + 1..close)
        .find(|&i| {
            lines[i]
                .trim()
                .strip_prefix("pub mod ")
                .and_then(|rest| rest.strip_suffix(';'))
                .is_some_and(|name| name > module)
        })
        .unwrap_or(close);
    let mut out: Vec<String> = lines.iter().map(|s| (*s).to_owned()).collect();
    out.insert(at, new_line);
    Ok(out.join("\n") + "\n")
}

/// Where the TOML table whose header is line `header` ends: at the next
/// header, less the blank and comment lines just above it, which belong to
/// that next table.
fn toml_table_end(lines: &[&str], header: usize) -> usize {
    let mut end = lines[header + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |i| header + 1 + i);
    while end > header + 1 && {
        let t = lines[end - 1].trim();
        t.is_empty() || t.starts_with('#')
    } {
        end -= 1;
    }
    end
}

/// Adds an `[[api]]` table after the last one of `codegen.toml` (or at its end).
fn insert_api_entry(text: &str, krate: &str, module: &str, source: &str) -> String {
    let entry = format!("[[api]]\ncrate = \"{krate}\"\nmodule = \"{module}\"\nsource = \"{source}\"\n");
    let lines: Vec<&str> = text.lines().collect();
    let Some(last_api) = lines.iter().rposition(|l| l.trim() == "[[api]]") else {
        return format!("{}\n\n{entry}", text.trim_end());
    };
    let end = toml_table_end(&lines, last_api);
    let mut out: Vec<String> = lines[..end].iter().map(|s| (*s).to_owned()).collect();
    out.push(String::new());
    out.extend(entry.lines().map(str::to_owned));
    out.extend(lines[end..].iter().map(|s| (*s).to_owned()));
    out.join("\n") + "\n"
}

/// `SimpleDeployment` → `simple_deployment`.
fn snake(kind: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = kind.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower = i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if i > 0 && (prev_lower || (next_lower && chars[i - 1].is_ascii_uppercase())) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A CamelCase suggestion for a malformed kind: `my-widget` → `MyWidget`.
fn camel(kind: &str) -> String {
    kind.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_kind(group: &str, version: &str, kind: &str) -> NewKind {
        NewKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            scope: Scope::Namespaced,
            owns: Vec::new(),
            watches: Vec::new(),
            fields: Vec::new(),
            hub: false,
        }
    }

    fn problems(group: &str, version: &str, kind: &str) -> String {
        check_names(&new_kind(group, version, kind))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn names_that_break_a_rule_say_which_and_how_to_fix_it() {
        assert_eq!(problems("tutorial.example.io", "v1", "Widget"), "");
        let p = problems("tutorial.example.io", "v1", "widget");
        assert!(
            p.contains("--kind \"widget\" must start with an upper-case letter"),
            "{p}"
        );
        assert!(p.contains("e.g. \"Widget\""), "{p}");
        let p = problems("tutorial.example.io", "v1", "My-Widget");
        assert!(
            p.contains("only ASCII letters and digits") && p.contains("\"MyWidget\""),
            "{p}"
        );
        let p = problems("batch", "v1", "Widget");
        assert!(p.contains("--group \"batch\" must contain a dot"), "{p}");
        let p = problems("Tutorial.Example.io", "v1", "Widget");
        assert!(p.contains("is not a DNS subdomain"), "{p}");
        let p = problems("widgets.k8s.io", "v1", "Widget");
        assert!(p.contains("reserved for Kubernetes' own APIs"), "{p}");
        let p = problems("tutorial.example.io", "V_1", "Widget");
        assert!(
            p.contains("--version \"V_1\" must match v[0-9]+((alpha|beta)[0-9]+)?"),
            "{p}"
        );
        let p = problems("tutorial.example.io", "v1", "Type");
        assert!(p.contains("a keyword"), "{p}");
        // Every broken rule at once.
        let p = problems("batch", "V_1", "widget");
        assert_eq!(p.lines().count(), 3, "{p}");
    }

    #[test]
    fn snake_case_follows_the_samples_file_names() {
        assert_eq!(snake("SimpleDeployment"), "simple_deployment");
        assert_eq!(snake("AddressableService"), "addressable_service");
        assert_eq!(snake("Widget"), "widget");
        assert_eq!(snake("HTTPRoute"), "http_route");
        assert_eq!(snake("Widget2"), "widget2");
    }

    #[test]
    fn items_are_inserted_in_name_order() {
        let text = "//! Docs.\n\nmod a_types;\nmod c_types;\n\npub use a_types::A;\npub use c_types::C;\n";
        let p = Path::new("mod.rs");
        let text = insert_sorted_items(text, p, &["mod b_types;".into()], ItemKind::Mod).unwrap();
        let text = insert_sorted_items(
            &text,
            p,
            &["pub use b_types::{B, BList};".into()],
            ItemKind::PubUse,
        )
        .unwrap();
        let text = insert_sorted_items(&text, p, &["mod d_types;".into()], ItemKind::Mod).unwrap();
        assert_eq!(
            text,
            "//! Docs.\n\nmod a_types;\nmod b_types;\nmod c_types;\nmod d_types;\n\npub use a_types::A;\npub use b_types::{B, BList};\npub use c_types::C;\n"
        );
        let lib = "//! The crate.\n\n/// The group.\npub const GROUP: &str = \"x\";\n";
        let text = insert_sorted_items(lib, p, &["pub mod tutorial;".into()], ItemKind::PubMod).unwrap();
        assert_eq!(
            text,
            "//! The crate.\n\npub mod tutorial;\n\n/// The group.\npub const GROUP: &str = \"x\";\n"
        );
    }

    #[test]
    fn the_controller_list_gains_the_module_in_order() {
        let lib = "//! Docs.\n\nkinject_runtime::controllers! {\n    pub mod alpha;\n    pub mod gamma;\n}\n";
        let p = Path::new("lib.rs");
        assert_eq!(
            insert_controller(lib, p, "beta").unwrap(),
            "//! Docs.\n\nkinject_runtime::controllers! {\n    pub mod alpha;\n    pub mod beta;\n    pub mod gamma;\n}\n"
        );
        assert!(
            insert_controller(lib, p, "zeta")
                .unwrap()
                .contains("    pub mod gamma;\n    pub mod zeta;\n}")
        );
        let err = insert_controller("pub mod alpha;\n", p, "beta")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has no `kinject_runtime::controllers! { ... }` block"),
            "{err}"
        );
    }

    #[test]
    fn an_api_entry_goes_after_the_last_one() {
        let toml = "output = \"g\"\n\n[[api]]\ncrate = \"apis\"\nmodule = \"apis::v1\"\nsource = \"apis/src/v1\"\n\n# Kinds from k8s-openapi.\n\n[[external]]\npath = \"x\"\n";
        assert_eq!(
            insert_api_entry(toml, "apis", "apis::tutorial::v1", "apis/src/tutorial/v1"),
            "output = \"g\"\n\n[[api]]\ncrate = \"apis\"\nmodule = \"apis::v1\"\nsource = \"apis/src/v1\"\n\n[[api]]\ncrate = \"apis\"\nmodule = \"apis::tutorial::v1\"\nsource = \"apis/src/tutorial/v1\"\n\n# Kinds from k8s-openapi.\n\n[[external]]\npath = \"x\"\n"
        );
    }

    /// A project with no kind yet (what `kinject init` writes): the first
    /// group goes into the crate `[scaffold] apis` names, with its `[[api]]`
    /// entry; without that key the error says what to add.
    #[test]
    fn the_first_kind_of_a_project_goes_into_the_scaffold_api_crate() {
        let root = std::env::temp_dir().join(format!("scaffold-first-kind-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        let scaffold = "output = \"generated/src\"\n\n[scaffold]\nreconcilers = \"reconcilers\"\nsamples = \"config/samples\"\n";
        write("codegen.toml", &format!("{scaffold}apis = \"apis\"\n"));
        write("apis/Cargo.toml", "[package]\nname = \"my-apis\"\n");
        write("apis/src/lib.rs", "//! Types.\n");
        write("generated/Cargo.toml", "[package]\nname = \"generated\"\n");
        write("generated/src/lib.rs", "");
        write("reconcilers/Cargo.toml", "[package]\nname = \"reconcilers\"\n");
        write("reconcilers/src/lib.rs", "kinject_runtime::controllers! {\n}\n");
        let new = new_kind("shop.example.com", "v1alpha1", "Cart");
        let plan = plan(&root.join("codegen.toml"), &new).unwrap();
        let file = |path: &str| {
            plan.files
                .iter()
                .find(|f| f.path == root.join(path))
                .map(|f| f.content.clone())
                .unwrap_or_else(|| panic!("{path} is not planned: {:?}", plan.files))
        };
        assert!(file("apis/src/lib.rs").contains("pub mod shop;"));
        assert!(file("apis/src/shop/mod.rs").contains("pub mod v1alpha1;"));
        assert!(file("apis/src/shop/v1alpha1/cart_types.rs").contains("pub struct CartSpec"));
        assert!(
            file("codegen.toml")
                .contains("[[api]]\ncrate = \"my_apis\"\nmodule = \"my_apis::shop::v1alpha1\"\nsource = \"apis/src/shop/v1alpha1\""),
            "{}",
            file("codegen.toml")
        );
        assert!(file("reconcilers/src/lib.rs").contains("    pub mod cart;\n}"));

        write("codegen.toml", scaffold);
        let err = super::plan(&root.join("codegen.toml"), &new)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nor an API crate under [scaffold] (`apis = \"apis\"`)"),
            "{err}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
