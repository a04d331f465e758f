//! Routing of request paths to discovery documents and resources, and of methods to
//! client-go's verbs.

use std::sync::Arc;

use http::Method;

use crate::errors::ErrorStatus;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;

use super::request::QueryView;

/// The target of a resource request.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) def: Arc<ResourceDef>,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
    pub(crate) legacy_watch: bool,
}

pub(super) enum Route {
    Version,
    ApiVersions,
    GroupList,
    Group(String),
    ResourceList(String, String),
    OpenApi,
    Health,
    Resource(Target),
    /// A path inside a built-in group version's web service that matches no route:
    /// go-restful's 404, a Status with empty details.
    Unrouted,
    /// A path no handler claims (unknown groups and versions, and anything the custom
    /// resource handler passes on): Go's plain-text 404.
    NotFoundText,
}

pub(super) fn route(state: &Registry, path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["api"] => Route::ApiVersions,
        ["apis"] => Route::GroupList,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["openapi", ..] => Route::OpenApi,
        ["api", "v1", rest @ ..] => resource_route(state, "", "v1", rest),
        // Under `/api` (a go-restful web service), an unknown route is a Status.
        ["api", ..] => Route::Unrouted,
        ["apis", g] => {
            if state.resources.iter().any(|d| d.group == *g) {
                Route::Group((*g).to_owned())
            } else {
                Route::NotFoundText
            }
        }
        ["apis", g, v, rest @ ..] => resource_route(state, g, v, rest),
        _ => Route::NotFoundText,
    }
}

fn resource_route(state: &Registry, group: &str, version: &str, rest: &[&str]) -> Route {
    let Some(any) = state
        .resources
        .iter()
        .find(|d| d.group == group && d.version == version)
    else {
        return Route::NotFoundText;
    };
    // The custom resource handler passes what it does not serve to the plain 404.
    let custom = any.is_custom();
    if rest.is_empty() {
        return Route::ResourceList(group.to_owned(), version.to_owned());
    }
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let find = |plural: &str| state.find(group, version, plural);
    let target = |def: Arc<ResourceDef>, ns: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(Target {
            def,
            namespace: ns.map(str::to_owned),
            name: name.map(str::to_owned),
            subresource: sub.map(str::to_owned),
            legacy_watch,
        })
    };
    let missing = if custom {
        Route::NotFoundText
    } else {
        Route::Unrouted
    };
    let namespaced = |plural: &str| find(plural).filter(|d| d.namespaced);
    match rest {
        [plural] => match find(plural) {
            Some(d) => target(d, None, None, None),
            None => missing,
        },
        ["namespaces", ns, plural] if namespaced(plural).is_some() => match namespaced(plural) {
            Some(d) => target(d, Some(ns), None, None),
            None => missing,
        },
        ["namespaces", ns, plural, name] => match namespaced(plural) {
            Some(d) => target(d, Some(ns), Some(name), None),
            None => missing,
        },
        ["namespaces", ns, plural, name, sub] => match namespaced(plural) {
            Some(d) => target(d, Some(ns), Some(name), Some(sub)),
            None => missing,
        },
        [plural, name] => match find(plural).filter(|d| !d.namespaced) {
            Some(d) => target(d, None, Some(name), None),
            None => missing,
        },
        [plural, name, sub] => match find(plural).filter(|d| !d.namespaced) {
            Some(d) => target(d, None, Some(name), Some(sub)),
            None => missing,
        },
        _ => missing,
    }
}

pub(super) fn verb_of(method: &Method, t: &Target, q: &QueryView<'_>) -> Result<&'static str, ErrorStatus> {
    if t.def.create_only {
        return match method.as_str() {
            "POST" => Ok("create"),
            _ => Err(ErrorStatus::method_not_allowed()),
        };
    }
    let watch = t.legacy_watch || q.flag("watch") == Some(true);
    let item = t.name.is_some();
    if t.subresource.as_deref() == Some("token") {
        // A TokenRequest is created on the service account's path.
        return match method.as_str() {
            "POST" if item => Ok("create"),
            _ => Err(ErrorStatus::method_not_allowed()),
        };
    }
    let v = match (method.as_str(), item) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) if t.def.deletecollection => "deletecollection",
        _ => return Err(ErrorStatus::method_not_allowed()),
    };
    if t.subresource.is_some() && !matches!(v, "get" | "update" | "patch") {
        return Err(ErrorStatus::method_not_allowed());
    }
    if v == "create" && t.def.namespaced && t.namespace.is_none() {
        return Err(ErrorStatus::method_not_allowed());
    }
    Ok(v)
}
