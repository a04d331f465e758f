//! The merge keys of the built-in kinds' lists, which strategic merge patch and
//! server-side apply merge them by.

use crate::patches::ListStrategy;
use crate::registry::resource::Builtin;

/// How a list merges: atomically, as a set of scalars, or as a map keyed by fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

const POD_SPEC: &[(&str, ListStrategy)] = &[
    ("containers", ListStrategy::Key("name")),
    ("initContainers", ListStrategy::Key("name")),
    ("ephemeralContainers", ListStrategy::Key("name")),
    ("volumes", ListStrategy::Key("name")),
    ("imagePullSecrets", ListStrategy::Key("name")),
    ("hostAliases", ListStrategy::Key("ip")),
    ("topologySpreadConstraints", ListStrategy::Key("topologyKey")),
    ("schedulingGates", ListStrategy::Key("name")),
    ("resourceClaims", ListStrategy::Key("name")),
    ("containers.ports", ListStrategy::Key("containerPort")),
    ("containers.env", ListStrategy::Key("name")),
    ("containers.volumeMounts", ListStrategy::Key("mountPath")),
    ("containers.volumeDevices", ListStrategy::Key("devicePath")),
    ("initContainers.ports", ListStrategy::Key("containerPort")),
    ("initContainers.env", ListStrategy::Key("name")),
    ("initContainers.volumeMounts", ListStrategy::Key("mountPath")),
];

/// The patch strategy of a list at `path` (dotted, without indices) in a built-in kind.
pub(crate) fn list_strategy(kind: Builtin, path: &str) -> Option<ListStrategy> {
    match path {
        "metadata.finalizers" => return Some(ListStrategy::Set),
        "metadata.ownerReferences" => return Some(ListStrategy::Key("uid")),
        "status.conditions" => return Some(ListStrategy::Key("type")),
        _ => {}
    }
    let pod_prefix = match kind {
        Builtin::Pod => "spec.",
        Builtin::Deployment => "spec.template.spec.",
        Builtin::Service => {
            return (path == "spec.ports").then_some(ListStrategy::Key("port"));
        }
        Builtin::ServiceAccount => {
            return matches!(path, "secrets" | "imagePullSecrets").then_some(ListStrategy::Key("name"));
        }
        Builtin::Other => {
            // The kinds without rules of their own that embed a pod template (workloads,
            // Jobs, CronJobs, PodTemplates) keep it at one of these paths, which no
            // other kind has.
            let rest = [
                "spec.template.spec.",
                "spec.jobTemplate.spec.template.spec.",
                "template.spec.",
            ]
            .iter()
            .find_map(|p| path.strip_prefix(p))?;
            return POD_SPEC.iter().find(|(p, _)| *p == rest).map(|(_, s)| *s);
        }
        _ => return None,
    };
    if kind == Builtin::Pod && matches!(path, "status.podIPs" | "status.hostIPs") {
        return Some(ListStrategy::Key("ip"));
    }
    let rest = path.strip_prefix(pod_prefix)?;
    POD_SPEC.iter().find(|(p, _)| *p == rest).map(|(_, s)| *s)
}

/// How server-side apply merges a list of a built-in kind, from the same table.
pub(crate) fn list_kind(kind: Builtin, path: &str) -> ListKind {
    match list_strategy(kind, path) {
        Some(ListStrategy::Key(k)) => ListKind::Map(vec![k.to_owned()]),
        Some(ListStrategy::Set) => ListKind::Set,
        None => ListKind::Atomic,
    }
}
