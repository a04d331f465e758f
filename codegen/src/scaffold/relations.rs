//! What a scaffolded controller is keyed by, owns and watches, as
//! kubebuilder's `For`, `Owns` and `Watches`: each kind named on the command
//! line is resolved to its Rust type and generated module, given an
//! `[[external]]` entry in `codegen.toml` when it is a Kubernetes kind the
//! project does not list yet, and wired into the reconciler's
//! `new_controller`.
//!
//! A kind is named as a project kind (`Widget`), a Kubernetes kind
//! (`Job`, looked up among the project's `[[external]]` entries, then in
//! [`COMMON_KINDS`]), `group/version/Kind` (`batch/v1/Job`, `v1/Pod` for the
//! core group) or a k8s-openapi path.

use crate::config::{ExternalKind, K8S_OPENAPI_GROUPS};
use crate::error::{Diagnostic, Error};
use crate::scan::{KindPlan, Scanned, group_module};
use std::path::Path;

/// Kubernetes kinds by name alone: `(k8s-openapi module, version, kind,
/// cluster-scoped)`. Any other is named as `group/version/Kind`.
const COMMON_KINDS: &[(&str, &str, &str, bool)] = &[
    ("core", "v1", "ConfigMap", false),
    ("core", "v1", "Endpoints", false),
    ("core", "v1", "LimitRange", false),
    ("core", "v1", "Namespace", true),
    ("core", "v1", "Node", true),
    ("core", "v1", "PersistentVolume", true),
    ("core", "v1", "PersistentVolumeClaim", false),
    ("core", "v1", "Pod", false),
    ("core", "v1", "ResourceQuota", false),
    ("core", "v1", "Secret", false),
    ("core", "v1", "Service", false),
    ("core", "v1", "ServiceAccount", false),
    ("apps", "v1", "DaemonSet", false),
    ("apps", "v1", "Deployment", false),
    ("apps", "v1", "ReplicaSet", false),
    ("apps", "v1", "StatefulSet", false),
    ("batch", "v1", "CronJob", false),
    ("batch", "v1", "Job", false),
    ("networking", "v1", "Ingress", false),
    ("networking", "v1", "NetworkPolicy", false),
    ("policy", "v1", "PodDisruptionBudget", false),
    ("autoscaling", "v2", "HorizontalPodAutoscaler", false),
    ("coordination", "v1", "Lease", false),
    ("rbac", "v1", "ClusterRole", true),
    ("rbac", "v1", "ClusterRoleBinding", true),
    ("rbac", "v1", "Role", false),
    ("rbac", "v1", "RoleBinding", false),
];

/// A kind a controller is keyed by, owns or watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Related {
    /// `Job`.
    pub(crate) kind: String,
    /// The type's Rust path (`k8s_openapi::api::batch::v1::Job`, `apis::v1alpha1::Widget`).
    pub(crate) rust_path: String,
    /// Its module under the generated crate (`batch::v1::job`).
    pub(crate) generated_module: String,
    /// The k8s-openapi path of a Kubernetes kind, which needs an
    /// `[[external]]` entry; `None` for a kind of the project.
    pub(crate) external: Option<String>,
    /// Cluster-scoped (so a table test's key has no namespace).
    pub(crate) cluster_scoped: bool,
}

impl Related {
    /// The kind's module alone (`job`), which generated code and the
    /// reconciler name it by.
    pub(crate) fn module(&self) -> &str {
        self.generated_module.rsplit("::").next().unwrap_or_default()
    }
}

/// Resolves `name` (see the module docs) among `scanned`'s kinds.
pub(crate) fn resolve(name: &str, scanned: &Scanned, config_path: &Path) -> Result<Related, Error> {
    let name = name.trim();
    let unknown = |why: &str| {
        Error::one(Diagnostic::file(
            config_path,
            format!(
                "cannot tell which kind {name:?} is: {why}; name a kind of this project (Widget), a common \
                 Kubernetes kind (Job), group/version/Kind (batch/v1/Job, v1/Pod for the core group) or a \
                 k8s-openapi path (k8s_openapi::api::batch::v1::Job)"
            ),
        ))
    };
    if name.starts_with("k8s_openapi::") {
        return ExternalKind::from_k8s_openapi_path(name)
            .map(|ext| kubernetes(&ext, false))
            .ok_or_else(|| unknown("it is not a path k8s_openapi::api::<group>::<version>::<Kind>"));
    }
    if let Some((group_version, kind)) = name.rsplit_once('/') {
        let (group, version) = group_version.rsplit_once('/').unwrap_or(("", group_version));
        let module = K8S_OPENAPI_GROUPS
            .iter()
            .find(|(_, g)| *g == group)
            .map(|(m, _)| *m)
            .ok_or_else(|| unknown(&format!("{group:?} is not a Kubernetes API group")))?;
        let path = format!("k8s_openapi::api::{module}::{version}::{kind}");
        let cluster = COMMON_KINDS.iter().any(|c| c.2 == kind && c.3);
        return ExternalKind::from_k8s_openapi_path(&path)
            .map(|ext| kubernetes(&ext, cluster))
            .ok_or_else(|| unknown(&format!("{version:?} is not a Kubernetes version")));
    }
    // The project's own kinds first (the stored version of one with several).
    let own: Vec<&KindPlan> = scanned
        .kinds
        .iter()
        .filter(|k| k.is_crd && k.kind == name)
        .collect();
    if let Some(plan) = own.iter().find(|k| k.storage).or(own.first()) {
        return Ok(Related {
            kind: plan.kind.clone(),
            rust_path: plan.rust_path.clone(),
            generated_module: format!(
                "{}::{}::{}",
                plan.group_module(),
                plan.version,
                plan.kind_module()
            ),
            external: None,
            cluster_scoped: plan.scope == Some(crate::model::Scope::Cluster),
        });
    }
    let cluster = COMMON_KINDS.iter().any(|c| c.2 == name && c.3);
    if let Some(listed) = scanned.kinds.iter().find(|k| !k.is_crd && k.kind == name)
        && let Some(ext) = ExternalKind::from_k8s_openapi_path(&listed.rust_path)
    {
        return Ok(kubernetes(&ext, cluster));
    }
    COMMON_KINDS
        .iter()
        .find(|c| c.2 == name)
        .and_then(|(module, version, kind, cluster)| {
            ExternalKind::from_k8s_openapi_path(&format!("k8s_openapi::api::{module}::{version}::{kind}"))
                .map(|ext| kubernetes(&ext, *cluster))
        })
        .ok_or_else(|| unknown("it is no kind of this project nor a common Kubernetes kind"))
}

fn kubernetes(ext: &ExternalKind, cluster_scoped: bool) -> Related {
    Related {
        kind: ext.kind.clone(),
        rust_path: ext.path.clone(),
        generated_module: format!(
            "{}::{}::{}",
            group_module(&ext.group, false),
            ext.version,
            ext.kind.to_lowercase()
        ),
        external: Some(ext.path.clone()),
        cluster_scoped,
    }
}

/// `codegen.toml` with an `[[external]]` entry for `path` (after the last
/// one, or at the end), and `reconciler = true` in it when `reconciler`.
/// An entry already there is kept, gaining `reconciler = true` if needed.
pub(crate) fn ensure_external(text: &str, path: &str, reconciler: bool) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let path_line = |l: &str| {
        l.trim()
            .strip_prefix("path")
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('='))
            .is_some_and(|v| v.trim().trim_matches('"') == path)
    };
    if let Some(at) = lines.iter().position(|l| path_line(l)) {
        let table_end = lines[at + 1..]
            .iter()
            .position(|l| l.trim_start().starts_with('['))
            .map_or(lines.len(), |i| at + 1 + i);
        let has_reconciler = lines[at + 1..table_end]
            .iter()
            .any(|l| l.trim().starts_with("reconciler") && l.contains("true"));
        if !reconciler || has_reconciler {
            return text.to_owned();
        }
        // A `reconciler = false` of the entry gives way to the new line.
        let mut out: Vec<String> = lines[..=at].iter().map(|l| (*l).to_owned()).collect();
        out.push("reconciler = true".to_owned());
        out.extend(
            lines[at + 1..table_end]
                .iter()
                .filter(|l| !l.trim().starts_with("reconciler"))
                .map(|l| (*l).to_owned()),
        );
        out.extend(lines[table_end..].iter().map(|l| (*l).to_owned()));
        return out.join("\n") + "\n";
    }
    let mut entry = vec!["[[external]]".to_owned(), format!("path = \"{path}\"")];
    if reconciler {
        entry.push("reconciler = true".to_owned());
    }
    let Some(last) = lines.iter().rposition(|l| l.trim() == "[[external]]") else {
        return format!("{}\n\n{}\n", text.trim_end(), entry.join("\n"));
    };
    let end = lines[last + 1..]
        .iter()
        .position(|l| l.trim().is_empty() || l.trim_start().starts_with('['))
        .map_or(lines.len(), |i| last + 1 + i);
    let mut out: Vec<String> = lines[..end].iter().map(|l| (*l).to_owned()).collect();
    out.push(String::new());
    out.extend(entry);
    out.extend(lines[end..].iter().map(|l| (*l).to_owned()));
    out.join("\n") + "\n"
}

/// The `use` lines and `new_controller` statements that make `controller`
/// (reconciling `owner`) follow what it owns and watches; both empty, or
/// starting with a line break, to append to a template's line.
pub(crate) fn wiring(
    generated_crate: &str,
    owner: &str,
    owns: &[Related],
    watches: &[Related],
) -> (String, String) {
    let mut uses = std::collections::BTreeSet::new();
    let mut code = String::new();
    if !owns.is_empty() {
        uses.insert("use kinject_runtime::rbac::Verb;".to_owned());
    }
    for related in owns.iter().chain(watches) {
        uses.insert(format!("use {};", related.rust_path));
        uses.insert(format!("use {generated_crate}::{};", related.generated_module));
    }
    for owned in owns {
        let (kind, module) = (&owned.kind, owned.module());
        let cache = cache_choice(kind, module);
        code.push_str(&format!(
            "\n\n    // {kind}s this {owner} controls (an owner reference with `controller:\n    \
             // true`, as `kinject_runtime::owner::set_controller_ref` writes) enqueue it:\n    \
             // kubebuilder's `Owns`. What `reconcile_kind` writes of them, for the\n    \
             // generated RBAC: keep what it does.\n    \
             // {cache}\n    \
             ctx.needs::<{kind}>(&[Verb::Create, Verb::Update, Verb::Delete]);\n    \
             {module}::get(ctx).add_event_handler(controller.enqueue_controller_handler::<{owner}, _>());"
        ));
    }
    for watched in watches {
        let (kind, module) = (&watched.kind, watched.module());
        let cache = cache_choice(kind, module);
        code.push_str(&format!(
            "\n\n    // A {kind} that `reconcile_kind` tracks (`ctx.tracker().track_reference`)\n    \
             // enqueues the {owner} tracking it when it changes: kubebuilder's `Watches`.\n    \
             // {cache}\n    \
             {module}::get(ctx).add_event_handler(controller.tracker().handler());"
        ));
    }
    if !code.is_empty() {
        code.push('\n');
    }
    // Each `use` on a line of its own after the template's last one.
    let uses: String = uses.into_iter().map(|line| format!("\n{line}")).collect();
    (uses, code)
}

/// The comment that makes an informer's cache form a visible choice: the
/// scaffold caches whole objects, and says what caches less.
fn cache_choice(kind: &str, module: &str) -> String {
    format!(
        "The cache holds whole {kind}s, decoded;\n    \
         // `{module}::metadata::get` holds their metadata alone (for a reconciler that\n    \
         // reads only names, labels and owners), `{module}::compact::get` compact JSON."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing_scanned() -> Scanned {
        Scanned::default()
    }

    #[test]
    fn kinds_resolve_by_name_group_version_or_path() {
        let scanned = nothing_scanned();
        let at = Path::new("codegen.toml");
        let job = resolve("Job", &scanned, at).unwrap();
        assert_eq!(job.rust_path, "k8s_openapi::api::batch::v1::Job");
        assert_eq!(job.generated_module, "batch::v1::job");
        assert_eq!(resolve("batch/v1/Job", &scanned, at).unwrap(), job);
        assert_eq!(
            resolve("k8s_openapi::api::batch::v1::Job", &scanned, at).unwrap(),
            job
        );
        let pod = resolve("v1/Pod", &scanned, at).unwrap();
        assert_eq!(pod.generated_module, "core::v1::pod");
        assert!(resolve("Namespace", &scanned, at).unwrap().cluster_scoped);
        let err = resolve("Gizmo", &scanned, at).unwrap_err().to_string();
        assert!(err.contains("cannot tell which kind \"Gizmo\" is"), "{err}");
        assert!(err.contains("batch/v1/Job"), "{err}");
        let err = resolve("widgets.example.com/v1/Widget", &scanned, at)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a Kubernetes API group"), "{err}");
    }

    #[test]
    fn an_external_entry_is_added_once_and_gains_a_reconciler() {
        let toml = "output = \"g\"\n\n[[external]]\npath = \"k8s_openapi::api::core::v1::Pod\"\nstatus = true\n\n[scaffold]\nreconcilers = \"r\"\n";
        let job = ensure_external(toml, "k8s_openapi::api::batch::v1::Job", false);
        assert!(
            job.contains(
                "status = true\n\n[[external]]\npath = \"k8s_openapi::api::batch::v1::Job\"\n\n[scaffold]"
            ),
            "{job}"
        );
        assert_eq!(
            ensure_external(&job, "k8s_openapi::api::batch::v1::Job", false),
            job
        );
        let pod = ensure_external(toml, "k8s_openapi::api::core::v1::Pod", true);
        assert!(
            pod.contains("path = \"k8s_openapi::api::core::v1::Pod\"\nreconciler = true\nstatus = true\n"),
            "{pod}"
        );
        assert_eq!(
            ensure_external(&pod, "k8s_openapi::api::core::v1::Pod", true),
            pod
        );
        let none = ensure_external("output = \"g\"\n", "k8s_openapi::api::batch::v1::Job", true);
        assert!(
            none.ends_with(
                "\n\n[[external]]\npath = \"k8s_openapi::api::batch::v1::Job\"\nreconciler = true\n"
            )
        );
    }
}
