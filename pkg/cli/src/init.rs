//! `kinject init` and `kinject create api`: a repository of one's own, laid
//! out as this framework's sample app is, and its kinds.
//!
//! The files come in two sets. `template/shared/` holds files every project
//! has exactly as the sample app has them (hack scripts, the one-line
//! binaries, the manifests of `config/` that name no kind); a test checks
//! they equal the sample's, so the sample stays what `init` writes, and
//! `init` only puts the project's namespace and group where the sample has
//! `knative-samples` and `samples.knative.dev`. `template/own/` holds what
//! differs per project (manifests, README, CI), with `{{name}}`-style
//! placeholders filled by string replacement, as the scaffold's templates
//! are. `generated/src` is written by the generator, in process, so the new
//! workspace loads at once.
//!
//! `create api` runs the project's own generator (`cargo run -p codegen --
//! new-kind`), as `hack/new-kind.sh` does, so the scaffold is always the one
//! `Cargo.lock` pins.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use kinject_codegen::model::validation::is_dns1123_label;

/// Lists template files as `(path, content)`, each embedded at build time.
macro_rules! templates {
    ($set:literal: $($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../template/", $set, "/", $path)))),*]
    };
}

/// Where a template file goes in the project. Manifests are kept as
/// `Cargo.toml.tmpl`: cargo leaves a folder holding a `Cargo.toml` out of
/// the package (it takes it for a crate of its own), so a `kinject`
/// installed from a registry would miss them. `gitignore` is `.gitignore`.
pub(crate) fn written_path(template: &str) -> &str {
    if template == "gitignore" {
        ".gitignore"
    } else {
        template.strip_suffix(".tmpl").unwrap_or(template)
    }
}

/// Files every project has exactly as the sample app has them.
pub(crate) const SHARED: &[(&str, &str)] = templates!("shared":
    ".vscode/launch.json",
    "clippy.toml",
    "rustfmt.toml",
    "hack/new-kind.sh",
    "hack/drop-version.sh",
    "hack/update-codegen.sh",
    "hack/verify-codegen.sh",
    "hack/run-local.sh",
    "cmd/codegen/Cargo.toml.tmpl",
    "cmd/codegen/src/main.rs",
    "cmd/controller/src/main.rs",
    "cmd/controller/src/bin/rbac.rs",
    "cmd/controller/examples/local.rs",
    "cmd/schema/src/main.rs",
    "cmd/webhook/src/main.rs",
    "config/100-namespace.yaml",
    "config/200-serviceaccount.yaml",
    "config/200-webhook-clusterrole.yaml",
    "config/200-webhook-role.yaml",
    "config/200-webhook-serviceaccount.yaml",
    "config/201-clusterrolebinding.yaml",
    "config/201-rolebinding.yaml",
    "config/201-webhook-clusterrolebinding.yaml",
    "config/201-webhook-rolebinding.yaml",
    "config/400-webhook-service.yaml",
    "config/500-webhook-configuration.yaml",
    "config/config-leader-election.yaml",
    "config/config-logging.yaml",
    "config/config-observability.yaml",
    "config/controller.yaml",
    "config/webhook.yaml",
);

/// Files of the project's own, with placeholders.
pub(crate) const OWN: &[(&str, &str)] = templates!("own":
    "Cargo.toml.tmpl",
    "README.md",
    "codegen.toml",
    "gitignore",
    ".ci/run",
    "apis/Cargo.toml.tmpl",
    "apis/src/lib.rs",
    "generated/Cargo.toml.tmpl",
    "reconcilers/Cargo.toml.tmpl",
    "reconcilers/src/lib.rs",
    "reconcilers/tests/tables/main.rs",
    "cmd/controller/Cargo.toml.tmpl",
    "cmd/schema/Cargo.toml.tmpl",
    "cmd/webhook/Cargo.toml.tmpl",
    "config/200-clusterrole.yaml",
    "config/200-role.yaml",
);

/// The framework's crates a project depends on, with their folder in a
/// checkout of the framework.
const FRAMEWORK_CRATES: [(&str, &str); 10] = [
    ("kinject-types", "pkg/types"),
    ("kinject-macros", "macros"),
    ("kinject-runtime", "pkg/runtime"),
    ("kinject-sharedmain", "pkg/sharedmain"),
    ("kinject-webhook", "pkg/webhook"),
    ("kinject-codegen", "codegen"),
    ("kinject-schema", "pkg/schema"),
    ("kinject-testenv", "pkg/testenv"),
    ("kinject-testing", "pkg/testing"),
    ("kinject-local", "pkg/local"),
];

/// The sample app's namespace and group, which the shared files name.
const SAMPLE_NAMESPACE: &str = "knative-samples";
const SAMPLE_GROUP: &str = "samples.knative.dev";

/// Where a new project takes the framework from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Framework {
    /// A checkout of the framework.
    Path(PathBuf),
    /// A git repository, at a revision (or its default branch).
    Git { url: String, rev: Option<String> },
    /// A registry version.
    Version(String),
}

impl Framework {
    /// The checkout this command was built from when it still exists (a
    /// `cargo install --path` of a clone), else this command's version.
    pub(crate) fn default_source() -> Self {
        match checkout_at(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")) {
            Some(root) => Framework::Path(root),
            None => Framework::Version(env!("CARGO_PKG_VERSION").to_owned()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Framework::Path(path) => format!("the checkout at {}", path.display()),
            Framework::Git { url, rev: Some(rev) } => format!("{url} at {rev}"),
            Framework::Git { url, rev: None } => url.clone(),
            Framework::Version(version) => format!("version {version} on crates.io"),
        }
    }

    /// The `[workspace.dependencies]` lines of the framework's crates, for a
    /// project at `project`.
    fn dependencies(&self, project: &Path) -> Result<String, String> {
        let mut lines = Vec::new();
        for (name, folder) in FRAMEWORK_CRATES {
            let source = match self {
                Framework::Path(root) => {
                    let at = relative_to(&root.join(folder), project)?;
                    format!("path = {}", toml_string(&at))
                }
                Framework::Git { url, rev } => match rev {
                    Some(rev) => format!("git = {}, rev = {}", toml_string(url), toml_string(rev)),
                    None => format!("git = {}", toml_string(url)),
                },
                Framework::Version(version) => format!("version = {}", toml_string(version)),
            };
            lines.push(format!("{name} = {{ {source} }}"));
        }
        Ok(lines.join("\n"))
    }
}

/// What `init` is asked for.
#[derive(Debug)]
pub(crate) struct Init {
    pub(crate) dir: PathBuf,
    pub(crate) group: String,
    pub(crate) namespace: Option<String>,
    pub(crate) framework: Framework,
}

/// Writes the project, all files or none, then generates `generated/src`.
pub(crate) fn init(request: &Init) -> Result<(), String> {
    let name = project_name(&request.dir)?;
    let namespace = request.namespace.clone().unwrap_or_else(|| name.clone());
    check_names(&request.group, &namespace)?;
    std::fs::create_dir_all(&request.dir)
        .map_err(|e| format!("{}: cannot create the directory: {e}", request.dir.display()))?;
    let dir = request
        .dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", request.dir.display()))?;
    let framework = match &request.framework {
        Framework::Path(root) => Framework::Path(checkout_at(root).ok_or_else(|| {
            format!(
                "--framework-path {}: no checkout of the framework there (it has no pkg/runtime/Cargo.toml)",
                root.display()
            )
        })?),
        other => other.clone(),
    };
    let files = render(&dir, &name, &request.group, &namespace, &framework)?;
    let taken: Vec<String> = files
        .iter()
        .filter(|(path, _)| dir.join(path).exists())
        .map(|(path, _)| path.clone())
        .collect();
    if !taken.is_empty() {
        return Err(format!(
            "{} already holds {}; init writes a new project and changes no file, so pick an empty directory",
            dir.display(),
            taken.join(", ")
        ));
    }
    let targets: Vec<(PathBuf, &str)> = files
        .iter()
        .map(|(path, content)| (dir.join(path), content.as_str()))
        .collect();
    kinject_codegen::write_all(targets.iter().map(|(path, content)| (path.as_path(), *content)))
        .map_err(|e| e.to_string())?;
    for (path, _) in &targets {
        make_executable_if_script(path)?;
    }
    generate(&dir)?;
    eprintln!(
        "wrote the project {name} in {}; next:\n  cd {}\n  kinject create api --group {} --version v1alpha1 --kind Widget\n  \
         hack/update-codegen.sh\n  cargo test --workspace",
        dir.display(),
        request.dir.display(),
        request.group
    );
    Ok(())
}

/// Every file of the project, by path relative to its root.
fn render(
    dir: &Path,
    name: &str,
    group: &str,
    namespace: &str,
    framework: &Framework,
) -> Result<Vec<(String, String)>, String> {
    let dependencies = framework.dependencies(dir)?;
    let mut files = Vec::new();
    for (path, text) in SHARED {
        let text = text
            .replace(SAMPLE_NAMESPACE, namespace)
            .replace(SAMPLE_GROUP, group);
        files.push((written_path(path).to_owned(), text));
    }
    for (path, text) in OWN {
        let text = text
            .replace("{{name}}", name)
            .replace("{{group}}", group)
            .replace("{{namespace}}", namespace)
            .replace("{{framework_source}}", &framework.describe())
            .replace("{{framework_dependencies}}", &dependencies);
        files.push((written_path(path).to_owned(), text));
    }
    Ok(files)
}

/// The canonical path of a checkout of the framework at `dir`, if it is one.
fn checkout_at(dir: &Path) -> Option<PathBuf> {
    dir.join("pkg/runtime/Cargo.toml")
        .is_file()
        .then(|| dir.canonicalize().ok())
        .flatten()
}

/// The hack scripts and `.ci/run` are run by path, so they must be
/// executable.
fn make_executable_if_script(path: &Path) -> Result<(), String> {
    let script = path.extension().is_some_and(|e| e == "sh") || path.ends_with(".ci/run");
    if script {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: cannot make it executable: {e}", path.display()))?;
    }
    Ok(())
}

/// `generated/src` from the new `codegen.toml`: a workspace whose crates all
/// have their sources, before any build.
fn generate(dir: &Path) -> Result<(), String> {
    let config = kinject_codegen::Config::load(&dir.join("codegen.toml")).map_err(|e| e.to_string())?;
    let generated =
        kinject_codegen::generate(&config, &kinject_codegen::Layout::Crate).map_err(|e| e.to_string())?;
    generated.write(&config.output).map_err(|e| e.to_string())?;
    Ok(())
}

/// The directory's name, which names the project (and, by default, its
/// namespace).
fn project_name(dir: &Path) -> Result<String, String> {
    let absolute = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    absolute
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: name a directory for the project", dir.display()))
}

fn check_names(group: &str, namespace: &str) -> Result<(), String> {
    let mut problems = Vec::new();
    // The rules new-kind applies to each kind's group.
    if let Some(problem) = kinject_codegen::scaffold::group_problem(group) {
        problems.push(format!(
            "--group {group:?} is not an API group: a lowercase DNS name with a dot, like shop.example.com \
             (it {problem})"
        ));
    }
    let namespace_problems = is_dns1123_label(namespace);
    if !namespace_problems.is_empty() {
        problems.push(format!(
            "the namespace {namespace:?} (--namespace, else the directory's name) is not a DNS-1123 label \
             ({}); pass --namespace, like --namespace shop-system",
            namespace_problems.join("; ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// `target` relative to `base` (both absolute), with `/` separators.
fn relative_to(target: &Path, base: &Path) -> Result<String, String> {
    let target = std::path::absolute(target).map_err(|e| format!("{}: {e}", target.display()))?;
    let target: Vec<Component<'_>> = target.components().collect();
    let base: Vec<Component<'_>> = base.components().collect();
    let common = target.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_owned(), base.len() - common).collect();
    parts.extend(
        target[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    Ok(parts.join("/"))
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// What `create api` is asked for: `new-kind`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct CreateApi {
    /// The API group (`shop.example.com`).
    #[arg(long)]
    group: String,
    /// The version (`v1alpha1`).
    #[arg(long)]
    version: String,
    /// The kind, CamelCase (`Widget`).
    #[arg(long)]
    kind: String,
    /// `namespaced` (default) or `cluster`.
    #[arg(long)]
    scope: Option<String>,
    /// A spec field, NAME:TYPE (`replicas:int32`); repeatable. Without any,
    /// one example field, `description`.
    #[arg(long, value_name = "NAME:TYPE")]
    field: Vec<String>,
    /// For a new version of a kind with one version: the new version
    /// becomes the hub (stored, and the one its reconciler reads), and the
    /// old one a spoke converting to and from it.
    #[arg(long)]
    hub: bool,
    #[command(flatten)]
    relations: Relations,
}

/// What `create controller` is asked for: a controller keyed by a
/// Kubernetes kind (`new-kind --for`).
#[derive(Debug, clap::Args)]
pub(crate) struct CreateController {
    /// The kind it reconciles (`Pod`, `apps/v1/Deployment`).
    #[arg(long = "for", value_name = "KIND")]
    for_kind: String,
    #[command(flatten)]
    relations: Relations,
}

/// kubebuilder's `Owns` and `Watches`.
#[derive(Debug, clap::Args)]
pub(crate) struct Relations {
    /// A kind the reconciler creates and controls (`Job`, `batch/v1/Job`, a
    /// kind of the project); repeatable.
    #[arg(long, value_name = "KIND")]
    owns: Vec<String>,
    /// A kind the reconciler reads and tracks; repeatable.
    #[arg(long, value_name = "KIND")]
    watches: Vec<String>,
}

impl Relations {
    fn args(&self) -> Vec<String> {
        let owns = self.owns.iter().flat_map(|k| ["--owns".to_owned(), k.clone()]);
        let watches = self
            .watches
            .iter()
            .flat_map(|k| ["--watches".to_owned(), k.clone()]);
        owns.chain(watches).collect()
    }
}

/// Runs the project's generator's `new-kind` for a new kind.
pub(crate) fn create_api(request: &CreateApi) -> Result<(), String> {
    let mut args = vec![
        "--group".to_owned(),
        request.group.clone(),
        "--version".to_owned(),
        request.version.clone(),
        "--kind".to_owned(),
        request.kind.clone(),
    ];
    if let Some(scope) = &request.scope {
        args.extend(["--scope".to_owned(), scope.clone()]);
    }
    for field in &request.field {
        args.extend(["--field".to_owned(), field.clone()]);
    }
    if request.hub {
        args.push("--hub".to_owned());
    }
    args.extend(request.relations.args());
    new_kind(&args)
}

/// Runs the project's generator's `new-kind --for`.
pub(crate) fn create_controller(request: &CreateController) -> Result<(), String> {
    let mut args = vec!["--for".to_owned(), request.for_kind.clone()];
    args.extend(request.relations.args());
    new_kind(&args)
}

/// Runs the project's generator's `new-kind` with `args` from the project's
/// root (the nearest directory above the current one holding `codegen.toml`).
fn new_kind(args: &[String]) -> Result<(), String> {
    let here = std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let root = here
        .ancestors()
        .find(|dir| dir.join("codegen.toml").is_file())
        .ok_or_else(|| {
            format!(
                "{} is in no kinject project (no codegen.toml here or above); run it in one, or start one with `kinject init`",
                here.display()
            )
        })?;
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(root)
        .args([
            "run",
            "--quiet",
            "-p",
            "codegen",
            "--",
            "--config",
            "codegen.toml",
            "new-kind",
        ])
        .args(args);
    eprintln!("running the project's generator (the first build takes a minute)");
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}; is it on PATH?"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("new-kind failed ({status}); its messages are above"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_under(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files_under(&path, base, out);
            } else {
                out.push(relative_to(&path, base).unwrap());
            }
        }
    }

    /// The sample app is what `init` writes: a shared template that differs
    /// from the sample's file fails here, naming both.
    #[test]
    fn the_shared_templates_are_the_sample_apps_own_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for (template, text) in SHARED {
            let path = written_path(template);
            let sample = std::fs::read_to_string(root.join(path)).unwrap_or_default();
            assert!(
                sample == *text,
                "pkg/cli/template/shared/{template} differs from the sample app's {path}; copy the sample's \
                 file over the template (init puts the project's namespace and group in place of \
                 {SAMPLE_NAMESPACE} and {SAMPLE_GROUP})"
            );
        }
    }

    /// A file added to `template/` and not to the lists would never be written.
    #[test]
    fn every_template_file_is_listed() {
        let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("template");
        for (set, listed) in [("shared", SHARED), ("own", OWN)] {
            let mut found = Vec::new();
            files_under(&templates.join(set), &templates.join(set), &mut found);
            found.sort();
            let mut names: Vec<String> = listed.iter().map(|(path, _)| (*path).to_owned()).collect();
            names.sort();
            assert_eq!(
                found,
                names,
                "template/{set}/ and the {} list in init.rs",
                set.to_uppercase()
            );
        }
    }

    /// The project's registry dependencies are the framework workspace's, so
    /// the two resolve the same features (and share a build in the tests).
    #[test]
    fn the_projects_dependencies_are_the_workspaces() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let ours: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let template = OWN.iter().find(|(path, _)| *path == "Cargo.toml.tmpl").unwrap().1;
        let theirs: toml::Table = template
            .replace("{{framework_dependencies}}", "")
            .parse()
            .unwrap();
        let deps = |t: &toml::Table| t["workspace"]["dependencies"].as_table().unwrap().clone();
        let (ours, theirs) = (deps(&ours), deps(&theirs));
        for (name, spec) in &theirs {
            if ["apis", "generated", "reconcilers"].contains(&name.as_str()) {
                continue;
            }
            assert_eq!(
                Some(spec),
                ours.get(name),
                "{name} in pkg/cli/template/own/Cargo.toml.tmpl differs from the workspace's Cargo.toml"
            );
        }
        assert!(
            template.contains("[profile.dev.package.\"*\"]\ndebug = false"),
            "the project's profile keeps dependencies without debuginfo, as the workspace does"
        );
    }

    #[test]
    fn paths_are_written_relative_to_the_project() {
        assert_eq!(
            relative_to(Path::new("/src/kinject/pkg/runtime"), Path::new("/src/shop")).unwrap(),
            "../kinject/pkg/runtime"
        );
        assert_eq!(
            relative_to(Path::new("/src/shop/pkg/runtime"), Path::new("/src/shop")).unwrap(),
            "pkg/runtime"
        );
    }

    #[test]
    fn a_bad_group_or_namespace_says_what_to_pass() {
        let err = check_names("Shop", "My_Shop").unwrap_err();
        assert!(err.contains("--group \"Shop\" is not an API group"), "{err}");
        assert!(err.contains("pass --namespace"), "{err}");
        assert!(check_names("shop.example.com", "shop").is_ok());
    }

    #[test]
    fn each_source_names_every_framework_crate() {
        let project = Path::new("/src/shop");
        for (framework, expected) in [
            (
                Framework::Path("/src/kinject".into()),
                "path = \"../kinject/pkg/runtime\"",
            ),
            (
                Framework::Git {
                    url: "https://example.com/kinject.git".into(),
                    rev: Some("abc123".into()),
                },
                "git = \"https://example.com/kinject.git\", rev = \"abc123\"",
            ),
            (Framework::Version("0.1.0".into()), "version = \"0.1.0\""),
        ] {
            let lines = framework.dependencies(project).unwrap();
            assert_eq!(lines.lines().count(), FRAMEWORK_CRATES.len(), "{lines}");
            assert!(
                lines.contains(&format!("kinject-runtime = {{ {expected} }}")),
                "{lines}"
            );
        }
    }
}
