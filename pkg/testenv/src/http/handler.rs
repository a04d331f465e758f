//! One API request, from its route to its reply: authorization, the testing hooks,
//! admission, and the verb.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::errors::ErrorStatus;
use crate::patches::{self, PatchType};
use crate::registry::options::FieldValidation;
use crate::registry::rbac::{self, Attributes};
use crate::registry::verbs::unsupported_patch_type;
use crate::selector::FieldTerm;
use crate::test_env::{Inner, TestEnv};

use super::admission;
use super::body::{custom_kind_present, json_body, subresource_body};
use super::conversion;
use super::discovery;
use super::list::list;
use super::openapi;
use super::reply::{Output, Reply, written};
use super::request::{QueryView, Request};
use super::request_options::{delete_opts, selection, write_opts};
use super::route::{Route, Target, route, verb_of};
use super::watch;
use crate::hooks::Action;

/// go-restful's 404 for a path in a web service that matches no route.
fn no_route() -> Reply {
    let mut body = ErrorStatus::unknown_path().to_json();
    body["details"] = json!({});
    Reply::Json {
        code: 404,
        body,
        warnings: Vec::new(),
    }
}

/// Answers one request.
pub(crate) async fn handle(env: &TestEnv, req: Request) -> Reply {
    let latency = *env
        .inner
        .latency
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let route = {
        let registry = env.inner.registry();
        route(&registry, &req.path)
    };
    let target = match route {
        Route::Resource(t) => t,
        other => return not_a_resource(&env.inner, other, &req),
    };
    // A review kind has no routes but its collection's POST (and, namespaced, no
    // collection across namespaces).
    let def = &target.def;
    if def.create_only
        && (target.name.is_some() || target.legacy_watch || (def.namespaced && target.namespace.is_none()))
    {
        return no_route();
    }
    if let Some(reply) = unserved_subresource(&target) {
        return reply;
    }
    let q = QueryView(&req.query);
    let verb = match verb_of(&req.method, &target, &q) {
        Ok(v) => v,
        Err(e) => return Reply::error(&e),
    };
    if let Err(e) = authorize(&env.inner, verb, &target, &req) {
        return Reply::error(&e);
    }
    if let Some(e) = record(&env.inner, verb, &target, &req) {
        return Reply::error(&e);
    }
    if verb == "watch" {
        wait_for_revision(&env.inner, &q).await;
    }
    // A watch asks the webhook for each event as it sends it.
    if target.def.webhook_conversion && verb != "watch" {
        let routes = env.routes();
        return conversion::answered(&routes, || admit_and_serve(env, verb, &target, &req, &q)).await;
    }
    admit_and_serve(env, verb, &target, &req, &q).await
}

/// The verb, through the admission webhooks for a write.
async fn admit_and_serve(
    env: &TestEnv,
    verb: &str,
    target: &Target,
    req: &Request,
    q: &QueryView<'_>,
) -> Reply {
    // Reviews and tokens store nothing, so no webhook is asked about them.
    if matches!(verb, "create" | "update" | "patch" | "delete")
        && !matches!(target.subresource.as_deref(), Some("scale" | "token"))
        && !target.def.create_only
        && let Some(r) = admission::write(env, verb, target, req, q).await
    {
        return r.unwrap_or_else(|e| Reply::error(&e));
    }
    match dispatch(&env.inner, verb, target, req, q) {
        Ok(r) => r,
        Err(e) => Reply::error(&e),
    }
}

/// The reply to a request for anything but a resource: discovery, health, or a path
/// nothing serves.
fn not_a_resource(inner: &Inner, route: Route, req: &Request) -> Reply {
    match route {
        Route::Version => Reply::ok(discovery::version()),
        Route::ApiVersions | Route::GroupList if discovery::wants_aggregated(&req.accept) => {
            let core = matches!(route, Route::ApiVersions);
            discovery::aggregated(&inner.registry(), core)
        }
        Route::ApiVersions => Reply::ok(discovery::api_versions(&req.host)),
        Route::GroupList => Reply::ok(discovery::group_list(&inner.registry())),
        Route::Group(g) => discovery::group(&inner.registry(), &g),
        Route::ResourceList(g, v) => Reply::ok(discovery::resource_list(&inner.registry(), &g, &v)),
        Route::OpenApi => {
            let builtins = openapi::builtins();
            openapi::openapi(builtins, &inner.registry(), &req.path, &req.accept)
        }
        Route::Health => Reply::Text {
            code: 200,
            text: "ok".into(),
        },
        Route::Unrouted => no_route(),
        Route::NotFoundText | Route::Resource(_) => Reply::Text {
            code: 404,
            text: "404 page not found\n".into(),
        },
    }
}

/// A subresource the resource does not have is an unknown path, not a request.
fn unserved_subresource(target: &Target) -> Option<Reply> {
    let served = match target.subresource.as_deref() {
        None => true,
        Some("status") => target.def.status,
        Some("scale") => target.def.scale.is_some(),
        Some("token") => target.def.token_request,
        Some(_) => false,
    };
    if served {
        return None;
    }
    if target.def.is_custom() {
        // The custom resource handler's answer for a subresource it lacks.
        return Some(Reply::error(&ErrorStatus::not_found(
            &target.def.group,
            &target.def.plural,
            target.name.as_deref().unwrap_or_default(),
        )));
    }
    Some(no_route())
}

/// RBAC: a request its user may not make is refused, and its message kept for
/// [`TestEnv::denied_requests`].
fn authorize(inner: &Inner, verb: &str, target: &Target, req: &Request) -> Result<(), ErrorStatus> {
    let def = &target.def;
    let selected;
    let name = match target.name.as_deref() {
        Some(name) => name,
        None if verb == "list" || verb == "watch" => {
            selected = selected_name(req);
            selected.as_deref().unwrap_or_default()
        }
        None => "",
    };
    let attributes = Attributes {
        verb,
        group: &def.group,
        resource: &def.plural,
        subresource: target.subresource.as_deref().unwrap_or_default(),
        namespace: target.namespace.as_deref().unwrap_or_default(),
        name,
    };
    let authorized = rbac::authorize(&inner.registry(), &req.user, &attributes);
    if let Err(e) = &authorized {
        inner.denials().push(e.message.clone());
    }
    authorized
}

/// The name a list or watch is authorized for, as kube-apiserver's
/// RequestInfo takes it: the value of a `metadata.name=` (or `==`) term of
/// the field selector, when it is a valid path segment. So a Role with
/// `resourceNames` grants list and watch of exactly those objects.
fn selected_name(req: &Request) -> Option<String> {
    let query = QueryView(&req.query);
    let selector = query.get("fieldSelector")?;
    let fields = crate::selector::FieldSelector::parse(selector).ok()?;
    fields
        .terms
        .into_iter()
        .find(|t| t.field == "metadata.name" && !t.negate)
        .map(|t| t.value)
        .filter(|name| !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']))
}

/// Logs and counts the request; the failure a reactor answers it with, if any.
fn record(inner: &Inner, verb: &str, target: &Target, req: &Request) -> Option<ErrorStatus> {
    let def = &target.def;
    let action = Action {
        verb: verb.to_owned(),
        group: def.group.clone(),
        version: def.version.clone(),
        resource: def.plural.clone(),
        subresource: target.subresource.clone().unwrap_or_default(),
        namespace: target.namespace.clone().unwrap_or_default(),
        name: target.name.clone().unwrap_or_default(),
        content_type: req.content_type.clone(),
        accept: req.accept.clone(),
        body: (!req.body.is_empty()).then(|| req.body.clone()),
        query: req.query.clone(),
        user_agent: req.user_agent.clone(),
    };
    inner.hooks().record(action)
}

/// A watch from a revision the store has not reached yet waits for it a little (3 s, as
/// the watch cache does) before it is refused as too large.
async fn wait_for_revision(inner: &Inner, q: &QueryView<'_>) {
    let Some(wanted) = q.get("resourceVersion").and_then(|r| r.parse::<u64>().ok()) else {
        return;
    };
    let mut changes = {
        let state = inner.registry();
        if state.store.rv() >= wanted {
            return;
        }
        state.store.subscribe()
    };
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        changes.wait_for(|rv| *rv >= wanted),
    )
    .await;
}

fn dispatch(
    inner: &Arc<Inner>,
    verb: &str,
    t: &Target,
    req: &Request,
    q: &QueryView<'_>,
) -> Result<Reply, ErrorStatus> {
    let def = &t.def;
    let output = Output::from_accept(&req.accept);
    let ns = t.namespace.as_deref().unwrap_or_default();
    let name = t.name.as_deref().unwrap_or_default();
    let status_only = t.subresource.as_deref() == Some("status");
    match t.subresource.as_deref() {
        Some("scale") => return scale(inner, verb, t, req, q),
        Some("token") => {
            let body = subresource_body(req, "authentication.k8s.io/v1", "TokenRequest")?;
            let opts = write_opts(q, req)?;
            let w = inner.registry().token_request(def, ns, name, body, &opts)?;
            return Ok(Reply::Json {
                code: 201,
                body: w.object,
                warnings: w.warnings,
            });
        }
        _ => {}
    }
    match verb {
        "get" => {
            let obj = inner.registry().get(def, ns, name)?;
            Ok(Reply::ok(output.object(def, &obj)))
        }
        "list" => {
            let sel = selection(def, t, q)?;
            let state = inner.registry();
            list(&state, def, &sel, q, output)
        }
        "watch" => {
            let mut sel = selection(def, t, q)?;
            if let Some(n) = &t.name {
                sel.fields.terms.push(FieldTerm {
                    field: "metadata.name".into(),
                    value: n.clone(),
                    negate: false,
                });
            }
            watch::start(inner, def, sel, q, output)
        }
        "create" => create(inner, t, req, q, output),
        "update" => {
            let body = json_body(req, def)?;
            custom_kind_present(req, q, def, &body)?;
            let opts = write_opts(q, req)?;
            let w = inner.write(|st| st.update(def, ns, name, body, status_only, &opts))?;
            Ok(written(w, output, def))
        }
        "patch" => {
            let Some(ptype) = PatchType::from_content_type(&req.content_type) else {
                return Err(unsupported_patch_type(def));
            };
            let opts = write_opts(q, req)?;
            let w = inner.write(|st| st.patch(def, ns, name, ptype, &req.body, status_only, &opts))?;
            Ok(written(w, output, def))
        }
        "delete" => {
            let opts = delete_opts(req, q)?;
            let body = inner.write(|st| st.delete(def, ns, name, &opts))?;
            let body = if body.get("kind").and_then(Value::as_str) == Some("Status") {
                body
            } else {
                output.object(def, &body)
            };
            Ok(Reply::ok(body))
        }
        "deletecollection" => {
            let opts = delete_opts(req, q)?;
            let sel = selection(def, t, q)?;
            Ok(Reply::ok(
                inner.write(|st| st.delete_collection(def, &sel, &opts))?,
            ))
        }
        _ => Err(ErrorStatus::method_not_allowed()),
    }
}

/// `POST` to a collection: a stored object, or a review's answer.
fn create(
    inner: &Arc<Inner>,
    t: &Target,
    req: &Request,
    q: &QueryView<'_>,
    output: Output,
) -> Result<Reply, ErrorStatus> {
    let def = &t.def;
    let body = json_body(req, def)?;
    let opts = write_opts(q, req)?;
    let ns = t.namespace.as_deref();
    let w = if def.create_only {
        inner.registry().review(def, ns, &req.user, body, &opts)?
    } else {
        custom_kind_present(req, q, def, &body)?;
        inner.write(|st| st.create(def, ns, body, &opts))?
    };
    Ok(written(w, output, def))
}

/// `get`, `update` and `patch` of the scale subresource.
fn scale(
    inner: &Arc<Inner>,
    verb: &str,
    t: &Target,
    req: &Request,
    q: &QueryView<'_>,
) -> Result<Reply, ErrorStatus> {
    let def = &t.def;
    let ns = t.namespace.as_deref().unwrap_or_default();
    let name = t.name.as_deref().unwrap_or_default();
    let opts = write_opts(q, req)?;
    let body = match verb {
        "get" => return Ok(Reply::ok(inner.registry().scale_get(def, ns, name)?)),
        "update" => subresource_body(req, "autoscaling/v1", "Scale")?,
        "patch" => {
            let current = inner.registry().scale_get(def, ns, name)?;
            match PatchType::from_content_type(&req.content_type) {
                Some(PatchType::Json) => {
                    patches::json_patch(&current, &req.body, opts.validation != FieldValidation::Ignore)
                }
                // Scale has no lists, so a strategic merge patch is a merge patch.
                Some(PatchType::Merge | PatchType::Strategic) => patches::merge_patch(&current, &req.body),
                _ => return Err(unsupported_patch_type(def)),
            }?
        }
        _ => return Err(ErrorStatus::method_not_allowed()),
    };
    let scale = inner.write(|st| st.scale_write(def, ns, name, &body, &opts))?;
    Ok(Reply::ok(scale))
}
