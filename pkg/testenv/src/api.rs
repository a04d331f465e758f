//! Routing of API requests to verbs, request options, lists, and response shapes.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use base64::Engine as _;
use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use crate::discovery;
use crate::errors::ErrorStatus;
use crate::go_format::go_json_type;
use crate::hooks::Action;
use crate::patches::PatchType;
use crate::registry::Registry;
use crate::registry::options::{DeleteOpts, FieldValidation, Selection, WriteOpts, check_fields};
use crate::registry::resource::ResourceDef;
use crate::registry::verbs::unsupported_patch_type;
use crate::selector::{FieldSelector, LabelSelector};
use crate::table;
use crate::watch;
use crate::{Inner, TestEnv};

/// A request as the server sees it, whichever face it came through.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) accept: String,
    pub(crate) content_type: String,
    pub(crate) body: Bytes,
    /// `host:port` the client used, for `/api`'s serverAddressByClientCIDRs.
    pub(crate) host: String,
    /// `User-Agent`; its part before the first `/` names the field manager by default.
    pub(crate) user_agent: String,
    /// Who makes the request (see [`crate::rbac`]).
    pub(crate) user: crate::registry::rbac::User,
}

/// What to send back.
#[derive(Debug)]
pub(crate) enum Reply {
    Json {
        code: u16,
        body: Value,
        warnings: Vec<String>,
    },
    Text {
        code: u16,
        text: String,
    },
    /// A 200 JSON body with its own media type (aggregated discovery).
    JsonAs {
        content_type: &'static str,
        body: Value,
    },
    /// A watch: newline-delimited JSON events, streamed.
    Stream(tokio::sync::mpsc::Receiver<Bytes>),
}

impl Reply {
    pub(crate) fn ok(body: Value) -> Self {
        Self::Json {
            code: 200,
            body,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn error(e: &ErrorStatus) -> Self {
        Self::Json {
            code: e.code,
            body: e.to_json(),
            warnings: Vec::new(),
        }
    }
}

/// How objects are rendered, from the `Accept` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    Full,
    Meta,
    Table,
}

impl Output {
    pub(crate) fn from_accept(accept: &str) -> Self {
        for media in accept.split(',') {
            let mut parts = media.split(';').map(str::trim);
            let base = parts.next().unwrap_or_default();
            let as_ = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| *k == "as")
                .map(|(_, v)| v);
            match as_ {
                Some("Table") => return Self::Table,
                Some("PartialObjectMetadata" | "PartialObjectMetadataList") => return Self::Meta,
                Some(_) => {}
                None if base.contains("json") || base == "*/*" => return Self::Full,
                None => {}
            }
        }
        Self::Full
    }

    /// One object in this output.
    pub(crate) fn object(self, def: &ResourceDef, obj: &Value) -> Value {
        match self {
            Self::Full => Registry::present(def, obj),
            Self::Meta => partial(obj),
            Self::Table => table::table(def, &[Registry::present(def, obj)], None),
        }
    }
}

pub(crate) fn partial(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The target of a resource request.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) def: Arc<ResourceDef>,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
    pub(crate) legacy_watch: bool,
}

enum Route {
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

fn route(state: &Registry, path: &str) -> Route {
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

/// The request's query, with lookups.
pub(crate) struct QueryView<'a>(pub(crate) &'a [(String, String)]);

impl QueryView<'_> {
    pub(crate) fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    pub(crate) fn flag(&self, k: &str) -> Option<bool> {
        self.get(k).map(|v| v == "true" || v == "1")
    }
}

fn verb_of(method: &Method, t: &Target, q: &QueryView<'_>) -> Result<&'static str, ErrorStatus> {
    let watch = t.legacy_watch || q.flag("watch") == Some(true);
    let item = t.name.is_some();
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
        let state = env.inner.registry();
        route(&state, &req.path)
    };
    let target = match route {
        Route::Version => return Reply::ok(discovery::version()),
        Route::ApiVersions | Route::GroupList if discovery::wants_aggregated(&req.accept) => {
            let core = matches!(route, Route::ApiVersions);
            return discovery::aggregated(&env.inner.registry(), core);
        }
        Route::ApiVersions => return Reply::ok(discovery::api_versions(&req.host)),
        Route::GroupList => return Reply::ok(discovery::group_list(&env.inner.registry())),
        Route::Group(g) => return discovery::group(&env.inner.registry(), &g),
        Route::ResourceList(g, v) => {
            return Reply::ok(discovery::resource_list(&env.inner.registry(), &g, &v));
        }
        Route::OpenApi => return discovery::openapi(&env.inner.registry(), &req.path),
        Route::Health => {
            return Reply::Text {
                code: 200,
                text: "ok".into(),
            };
        }
        Route::Unrouted => return no_route(),
        Route::NotFoundText => {
            return Reply::Text {
                code: 404,
                text: "404 page not found\n".into(),
            };
        }
        Route::Resource(t) => t,
    };
    // A subresource the resource does not have is an unknown path, not a request.
    let served = match target.subresource.as_deref() {
        None => true,
        Some("status") => target.def.status,
        Some("scale") => target.def.scale.is_some(),
        Some(_) => false,
    };
    if !served {
        if target.def.is_custom() {
            // The custom resource handler's answer for a subresource it lacks.
            return Reply::error(&ErrorStatus::not_found(
                &target.def.group,
                &target.def.plural,
                target.name.as_deref().unwrap_or_default(),
            ));
        }
        return no_route();
    }
    let q = QueryView(&req.query);
    let verb = match verb_of(&req.method, &target, &q) {
        Ok(v) => v,
        Err(e) => return Reply::error(&e),
    };
    let def = Arc::clone(&target.def);
    let attributes = crate::registry::rbac::Attributes {
        verb,
        group: &def.group,
        resource: &def.plural,
        subresource: target.subresource.as_deref().unwrap_or_default(),
        namespace: target.namespace.as_deref().unwrap_or_default(),
        name: target.name.as_deref().unwrap_or_default(),
    };
    let authorized = crate::registry::rbac::authorize(&env.inner.registry(), &req.user, &attributes);
    if let Err(e) = authorized {
        env.inner.denials().push(e.message.clone());
        return Reply::error(&e);
    }
    let action = Action {
        verb: verb.to_owned(),
        group: def.group.clone(),
        version: def.version.clone(),
        resource: def.plural.clone(),
        subresource: target.subresource.clone().unwrap_or_default(),
        namespace: target.namespace.clone().unwrap_or_default(),
        name: target.name.clone().unwrap_or_default(),
        content_type: req.content_type.clone(),
        body: (!req.body.is_empty()).then(|| req.body.clone()),
        query: req.query.clone(),
        user_agent: req.user_agent.clone(),
    };
    if let Some(e) = env.inner.hooks().record(action) {
        return Reply::error(&e);
    }
    if verb == "watch" {
        wait_for_revision(&env.inner, &q).await;
    }
    if matches!(verb, "create" | "update" | "patch" | "delete")
        && target.subresource.as_deref() != Some("scale")
        && let Some(r) = crate::admission::write(env, verb, &target, &req, &q).await
    {
        return r.unwrap_or_else(|e| Reply::error(&e));
    }
    match dispatch(&env.inner, verb, &target, &req, &q) {
        Ok(r) => r,
        Err(e) => Reply::error(&e),
    }
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

pub(crate) fn write_opts(q: &QueryView<'_>, req: &Request) -> Result<WriteOpts, ErrorStatus> {
    let validation = match q.get("fieldValidation") {
        None | Some("" | "Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ErrorStatus::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn, or Strict, got {other}"
            )));
        }
    };
    let dry_run = match q.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ErrorStatus::bad_request(format!(
                "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
            )));
        }
    };
    Ok(WriteOpts {
        dry_run,
        validation,
        field_manager: Some(
            q.get("fieldManager")
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| req.user_agent.split('/').next().unwrap_or_default())
                .chars()
                .take(128)
                .collect(),
        ),
        explicit_manager: q.get("fieldManager").is_some_and(|m| !m.is_empty()),
        force: q.flag("force") == Some(true),
        managed_fields: None,
        skip_validation: false,
    })
}

/// Decodes a create/update body: JSON, YAML or (for built-in kinds) protobuf, as
/// kube-apiserver accepts (CBOR is not implemented here).
pub(crate) fn json_body(req: &Request, def: &ResourceDef) -> Result<Value, ErrorStatus> {
    let ct = req.content_type.split(';').next().unwrap_or_default().trim();
    let cannot = |e: String| {
        ErrorStatus::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
            kind = def.kind,
            v = def.version
        ))
    };
    match ct {
        "" | "application/json" | "*/*" => {
            serde_json::from_slice(&req.body).map_err(|e| cannot(e.to_string()))
        }
        "application/yaml" => std::str::from_utf8(&req.body)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_saphyr::from_str::<Value>(t).map_err(|e| e.to_string()))
            .map_err(cannot),
        "application/vnd.kubernetes.protobuf" if crate::proto::decodes(&def.api_version(), &def.kind) => {
            crate::proto::decode(&def.api_version(), &def.kind, &req.body).map_err(cannot)
        }
        // Custom resources have no protobuf schema, so kube-apiserver offers them none.
        "application/vnd.kubernetes.protobuf" if def.is_custom() => Err(ErrorStatus::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml".to_owned(),
        )),
        _ => Err(ErrorStatus::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (testenv does not decode {ct})"
        ))),
    }
}

/// Custom resources decode as unstructured objects, which must name their kind (built-in
/// bodies take it from the endpoint). The message depends on which decoder ran: the
/// strict one (fieldValidation Warn or Strict) or the lenient one (Ignore).
pub(crate) fn custom_kind_present(
    req: &Request,
    q: &QueryView<'_>,
    def: &ResourceDef,
    body: &Value,
) -> Result<(), ErrorStatus> {
    if !def.is_custom()
        || !body.is_object()
        || body
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| !k.is_empty())
    {
        return Ok(());
    }
    let raw = String::from_utf8_lossy(&req.body);
    let missing = format!("Object 'Kind' is missing in '{raw}'");
    if q.get("fieldValidation") == Some("Ignore") {
        return Err(ErrorStatus::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: {missing}",
            kind = def.kind,
            v = def.version,
        )));
    }
    Err(ErrorStatus::bad_request(format!(
        "the object provided is unrecognized (must be of type {}): {missing} ({})",
        def.kind,
        summarize(&req.body, 30)
    )))
}

/// The start of a body for an error message: text when it looks like JSON, else hex.
fn summarize(data: &[u8], max: usize) -> String {
    let cut = &data[..data.len().min(max)];
    let more = if data.len() > max { " ..." } else { "" };
    match data.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(cut)),
        Some(_) => {
            let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

pub(crate) fn written(w: crate::registry::options::Written, output: Output, def: &ResourceDef) -> Reply {
    Reply::Json {
        code: if w.created { 201 } else { 200 },
        body: output.object(def, &w.object),
        warnings: w.warnings,
    }
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
    if t.subresource.as_deref() == Some("scale") {
        return scale(inner, verb, t, req, q);
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
                sel.fields.terms.push(crate::selector::FieldTerm {
                    field: "metadata.name".into(),
                    value: n.clone(),
                    negate: false,
                });
            }
            watch::start(inner, def, sel, q, output)
        }
        "create" => {
            let body = json_body(req, def)?;
            custom_kind_present(req, q, def, &body)?;
            let opts = write_opts(q, req)?;
            let w = write(inner, |st| st.create(def, t.namespace.as_deref(), body, &opts))?;
            Ok(written(w, output, def))
        }
        "update" => {
            let body = json_body(req, def)?;
            custom_kind_present(req, q, def, &body)?;
            let opts = write_opts(q, req)?;
            let w = write(inner, |st| st.update(def, ns, name, body, status_only, &opts))?;
            Ok(written(w, output, def))
        }
        "patch" => {
            let Some(ptype) = PatchType::from_content_type(&req.content_type) else {
                return Err(unsupported_patch_type(def));
            };
            let opts = write_opts(q, req)?;
            let w = write(inner, |st| {
                st.patch(def, ns, name, ptype, &req.body, status_only, &opts)
            })?;
            Ok(written(w, output, def))
        }
        "delete" => {
            let opts = delete_opts(req, q)?;
            let body = write(inner, |st| st.delete(def, ns, name, &opts))?;
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
            Ok(Reply::ok(write(inner, |st| {
                st.delete_collection(def, &sel, &opts)
            })?))
        }
        _ => Err(ErrorStatus::method_not_allowed()),
    }
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
        "update" => {
            let ct = req.content_type.split(';').next().unwrap_or_default().trim();
            if ct == "application/vnd.kubernetes.protobuf" {
                crate::proto::decode("autoscaling/v1", "Scale", &req.body)
            } else {
                serde_json::from_slice::<Value>(&req.body).map_err(|e| e.to_string())
            }
            .map_err(|e| {
                ErrorStatus::bad_request(format!(
                    "Scale in version \"v1\" cannot be handled as a Scale: {e}"
                ))
            })?
        }
        "patch" => {
            let current = inner.registry().scale_get(def, ns, name)?;
            match PatchType::from_content_type(&req.content_type) {
                Some(PatchType::Json) => crate::patches::json_patch(
                    &current,
                    &req.body,
                    opts.validation != crate::registry::options::FieldValidation::Ignore,
                ),
                // Scale has no lists, so a strategic merge patch is a merge patch.
                Some(PatchType::Merge | PatchType::Strategic) => {
                    crate::patches::merge_patch(&current, &req.body)
                }
                _ => return Err(unsupported_patch_type(def)),
            }?
        }
        _ => return Err(ErrorStatus::method_not_allowed()),
    };
    let scale = write(inner, |st| st.scale_write(def, ns, name, &body, &opts))?;
    Ok(Reply::ok(scale))
}

/// Runs a write, then lets the optional controllers react to it before anyone else
/// sees the store.
pub(crate) fn write<T>(
    inner: &Inner,
    f: impl FnOnce(&mut Registry) -> Result<T, ErrorStatus>,
) -> Result<T, ErrorStatus> {
    let mut st = inner.registry();
    let r = f(&mut st);
    if r.is_ok() {
        st.settle();
    }
    r
}

fn selection(def: &ResourceDef, t: &Target, q: &QueryView<'_>) -> Result<Selection, ErrorStatus> {
    let labels =
        LabelSelector::parse(q.get("labelSelector").unwrap_or_default()).map_err(ErrorStatus::bad_request)?;
    let fields =
        FieldSelector::parse(q.get("fieldSelector").unwrap_or_default()).map_err(ErrorStatus::bad_request)?;
    check_fields(def, &fields)?;
    Ok(Selection {
        namespace: t.namespace.clone(),
        labels,
        fields,
    })
}

pub(crate) fn delete_opts(req: &Request, q: &QueryView<'_>) -> Result<DeleteOpts, ErrorStatus> {
    let mut opts = DeleteOpts::default();
    if !req.body.is_empty() {
        let body: Value = serde_json::from_slice(&req.body).map_err(|e| {
            ErrorStatus::bad_request(format!(
                "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: {e}"
            ))
        })?;
        let s = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_owned);
        opts.preconditions.uid = s("/preconditions/uid");
        opts.preconditions.resource_version = s("/preconditions/resourceVersion");
        opts.propagation = s("/propagationPolicy");
        if opts.propagation.is_none() {
            opts.propagation = match body.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some("Orphan".into()),
                Some(false) => Some("Background".into()),
                None => None,
            };
        }
        opts.dry_run = body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    }
    if let Some(p) = q.get("propagationPolicy") {
        opts.propagation = Some(p.to_owned());
    }
    if q.get("dryRun") == Some("All") {
        opts.dry_run = true;
    }
    if let Some(p) = &opts.propagation
        && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
    {
        return Err(ErrorStatus::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            vec![crate::errors::FieldError::not_supported(
                "propagationPolicy",
                json!(p),
                &[
                    "Foreground".into(),
                    "Background".into(),
                    "Orphan".into(),
                    "nil".into(),
                ],
            )],
        ));
    }
    Ok(opts)
}

/// A `continue` token, shaped as kube-apiserver's: unpadded URL-safe base64 of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<key below the list's prefix>\u0000"}`.
/// `rv` -1 continues at the latest revision.
fn encode_continue(rv: i64, start: &str) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// Decodes a `continue` token as kube-apiserver's storage does, with its errors:
/// the revision (negative: the latest) and the key (below the list's prefix) to
/// start from, inclusive.
fn decode_continue(token: &str) -> Result<(i64, String), ErrorStatus> {
    let bad = |why: String| {
        ErrorStatus::bad_request(format!("invalid continue token: continue key is not valid{why}"))
    };
    let raw = go_base64_raw_url(token).map_err(|e| bad(format!(": {e}")))?;
    let parsed: Value =
        serde_json::from_slice(&raw).map_err(|e| bad(format!(": {}", go_json_error(&raw, &e))))?;
    let Some(fields) = parsed.as_object() else {
        return Err(bad(format!(
            ": json: cannot unmarshal {} into Go value of type storage.continueToken",
            go_json_type(&parsed)
        )));
    };
    // encoding/json matches field names case-insensitively, preferring an exact match.
    let field = |name: &str| {
        fields.get(name).or_else(|| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    };
    let wrong = |name: &str, v: &Value, want: &str| {
        let what = match v {
            Value::Number(n) => format!("number {n}"),
            other => go_json_type(other).to_owned(),
        };
        bad(format!(
            ": json: cannot unmarshal {what} into Go struct field continueToken.{name} of type {want}"
        ))
    };
    let version = match field("v") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(wrong("v", other, "string")),
    };
    let rv = match field("rv") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(rv) => rv,
            None => return Err(wrong("rv", &Value::Number(n.clone()), "int64")),
        },
        Some(other) => return Err(wrong("rv", other, "int64")),
    };
    let start = match field("start") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(wrong("start", other, "string")),
    };
    if version != "meta.k8s.io/v1" {
        return Err(bad(format!(
            ": server does not recognize this encoded version {version}"
        )));
    }
    if rv == 0 {
        return Err(bad(
            ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
        ));
    }
    if start.is_empty() {
        return Err(bad(": encoded start key empty (version meta.k8s.io/v1)".into()));
    }
    // No climbing out of the list's prefix: the key must already be a clean path.
    let rooted = if start.starts_with('/') {
        start.to_owned()
    } else {
        format!("/{start}")
    };
    if clean_path(&rooted) != rooted {
        return Err(bad(format!(": {start}")));
    }
    Ok((rv, rooted[1..].to_owned()))
}

/// Go's `path.Clean` for a rooted path.
fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Go's `base64.RawURLEncoding.DecodeString`, errors included (it skips CR and LF and
/// ignores the unused bits of the last character).
fn go_base64_raw_url(s: &str) -> Result<Vec<u8>, String> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    };
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3 + 2);
    let mut quad = [0u8; 4];
    let mut n = 0;
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'\r' || c == b'\n' {
            continue;
        }
        let Some(v) = value(c) else {
            return Err(format!("illegal base64 data at input byte {i}"));
        };
        quad[n] = v;
        n += 1;
        if n == 4 {
            out.extend([
                (quad[0] << 2) | (quad[1] >> 4),
                (quad[1] << 4) | (quad[2] >> 2),
                (quad[2] << 6) | quad[3],
            ]);
            n = 0;
        }
    }
    match n {
        1 => {
            return Err(format!(
                "illegal base64 data at input byte {}",
                bytes.len().saturating_sub(1)
            ));
        }
        2 => out.push((quad[0] << 2) | (quad[1] >> 4)),
        3 => out.extend([(quad[0] << 2) | (quad[1] >> 4), (quad[1] << 4) | (quad[2] >> 2)]),
        _ => {}
    }
    Ok(out)
}

/// A byte as encoding/json quotes it in errors (`strconv.Quote` of the byte as a rune).
fn go_quote_char(c: u8) -> String {
    let inner = match c {
        b'\'' => "\\'".to_owned(),
        b'"' => "\"".to_owned(),
        b'\\' => "\\\\".to_owned(),
        0x07 => "\\a".to_owned(),
        0x08 => "\\b".to_owned(),
        0x0c => "\\f".to_owned(),
        b'\n' => "\\n".to_owned(),
        b'\r' => "\\r".to_owned(),
        b'\t' => "\\t".to_owned(),
        0x0b => "\\v".to_owned(),
        0x00..=0x1f | 0x7f => format!("\\x{c:02x}"),
        0x80..=0xa0 | 0xad => format!("\\u{c:04x}"),
        _ => char::from(c).to_string(),
    };
    format!("'{inner}'")
}

/// encoding/json's wording of a syntax error, for the common cases.
fn go_json_error(raw: &[u8], e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".into();
    }
    // serde_json reports 1-based line and column of the offending character.
    let offset = raw
        .split_inclusive(|b| *b == b'\n')
        .take(e.line().saturating_sub(1))
        .map(<[u8]>::len)
        .sum::<usize>()
        + e.column().saturating_sub(1);
    let c = raw.get(offset).copied().unwrap_or_default();
    let msg = e.to_string();
    if msg.starts_with("expected ident") {
        // Inside `true`, `false` or `null`: say which letter was due.
        let begin = raw[..offset.min(raw.len())]
            .iter()
            .rposition(|b| !b.is_ascii_lowercase())
            .map_or(0, |p| p + 1);
        let literal = match raw.get(begin) {
            Some(b't') => "true",
            Some(b'f') => "false",
            _ => "null",
        };
        if let Some(due) = literal.as_bytes().get(offset - begin) {
            return format!(
                "invalid character {} in literal {literal} (expecting {})",
                go_quote_char(c),
                go_quote_char(*due)
            );
        }
    }
    let context = if msg.starts_with("expected `:`") {
        "after object key"
    } else if msg.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if msg.starts_with("expected `,` or `]`") {
        "after array element"
    } else if msg.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if msg.starts_with("trailing characters") {
        "after top-level value"
    } else if msg.starts_with("control character") {
        "in string literal"
    } else if msg.starts_with("invalid escape") {
        "in string escape code"
    } else {
        "looking for beginning of value"
    };
    let shown = go_quote_char(c);
    format!("invalid character {shown} {context}")
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

pub(crate) fn parse_rv(s: &str) -> Result<u64, ErrorStatus> {
    s.parse::<u64>().map_err(|_| {
        ErrorStatus::bad_request(format!("invalid resource version: \"{s}\"")).with_cause(
            "",
            "",
            "resourceVersion",
        )
    })
}

pub(crate) fn too_large(rv: u64, current: u64) -> ErrorStatus {
    let mut e = ErrorStatus::new(
        504,
        "Timeout",
        format!("Timeout: Too large resource version: {rv}, current: {current}"),
    )
    .with_cause("ResourceVersionTooLarge", "Too large resource version", "");
    e.retry_after_seconds = Some(1);
    e
}

fn list(
    state: &Registry,
    def: &ResourceDef,
    sel: &Selection,
    q: &QueryView<'_>,
    output: Output,
) -> Result<Reply, ErrorStatus> {
    let current = state.store.rv();
    let limit = match q.get("limit") {
        None | Some("") => None,
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Ok(_) => None,
            Err(_) => {
                return Err(ErrorStatus::bad_request(format!(
                    "limit: Invalid value: \"{l}\": must be an integer"
                )));
            }
        },
    };
    let rv_param = q.get("resourceVersion").filter(|s| !s.is_empty());
    let rvm = q.get("resourceVersionMatch").filter(|s| !s.is_empty());
    let (at, start, continuing) = match q.get("continue").filter(|s| !s.is_empty()) {
        Some(token) => {
            if rvm.is_some() {
                return Err(ErrorStatus::invalid(
                    "meta.k8s.io",
                    "ListOptions",
                    "",
                    vec![crate::errors::FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    )],
                ));
            }
            let (rv, start) = decode_continue(token)?;
            if rv_param.is_some_and(|r| r != "0") {
                return Err(ErrorStatus::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let at = match u64::try_from(rv) {
                Err(_) => current,
                Ok(rv) if rv > current => {
                    // etcd's error for a revision it has not reached, passed on untyped.
                    return Err(ErrorStatus::new(
                        500,
                        "",
                        "etcdserver: mvcc: required revision is a future revision",
                    ));
                }
                Ok(rv) => rv,
            };
            (at, Some(start), true)
        }
        None => {
            let at = match (rv_param, rvm) {
                (None, Some(_)) => {
                    return Err(ErrorStatus::invalid(
                        "meta.k8s.io",
                        "ListOptions",
                        "",
                        vec![crate::errors::FieldError::forbidden(
                            "resourceVersionMatch",
                            "resourceVersionMatch is forbidden unless resourceVersion is provided",
                        )],
                    ));
                }
                (None, None) | (Some("0"), _) => current,
                (Some(r), Some("Exact")) => {
                    let rv = parse_rv(r)?;
                    if rv > current {
                        return Err(too_large(rv, current));
                    }
                    rv
                }
                (Some(r), None | Some("NotOlderThan")) => {
                    let rv = parse_rv(r)?;
                    if rv > current {
                        return Err(too_large(rv, current));
                    }
                    current
                }
                (Some(_), Some(other)) => {
                    return Err(ErrorStatus::invalid(
                        "meta.k8s.io",
                        "ListOptions",
                        "",
                        vec![crate::errors::FieldError::not_supported(
                            "resourceVersionMatch",
                            json!(other),
                            &["Exact".into(), "NotOlderThan".into(), String::new()],
                        )],
                    ));
                }
            };
            (at, None, false)
        }
    };
    let in_namespace = sel.namespace.is_some();
    // Where the page starts in etcd's key order: `<namespace>/` and the
    // token's name within a namespace, the token's key across namespaces.
    let from = match (&sel.namespace, start.as_deref()) {
        (Some(ns), start) => Some(format!("{ns}/{}", start.unwrap_or_default())),
        (None, start) => start.map(str::to_owned),
    };
    let snapshot = match state.store.snapshot_from(&def.key(), at, from.as_deref()) {
        Ok(s) => s,
        Err(_) if continuing => {
            // etcd has compacted the token's revision: 410, with a token that
            // continues from the same key at the latest revision.
            let mut body = ErrorStatus::expired(CONTINUE_EXPIRED).to_json();
            body["metadata"]["continue"] = json!(encode_continue(-1, start.as_deref().unwrap_or_default()));
            return Ok(Reply::Json {
                code: 410,
                body,
                warnings: Vec::new(),
            });
        }
        Err(c) => {
            return Err(ErrorStatus::expired(format!(
                "too old resource version: {at} ({})",
                c.oldest
            )));
        }
    };
    let mut in_ns = snapshot.take_while(|(k, _)| sel.namespace.as_ref().is_none_or(|ns| &k.namespace == ns));
    let mut items = Vec::new();
    let mut next = None;
    let mut remaining = None;
    let mut last: Option<&crate::store::ObjKey> = None;
    while let Some((key, obj)) = in_ns.next() {
        if limit.is_some_and(|l| items.len() >= l) {
            next = last.map(|k| {
                encode_continue(
                    i64::try_from(at).unwrap_or(i64::MAX),
                    &format!("{}\u{0}", k.below(in_namespace)),
                )
            });
            if sel.labels.is_empty() && sel.fields.is_empty() {
                remaining = Some(1 + in_ns.count());
            }
            break;
        }
        if sel.matches(def, &obj) {
            items.push(obj);
        }
        last = Some(key);
    }
    let rv = at.to_string();
    if output == Output::Table {
        let objs: Vec<Value> = items.iter().map(|o| Registry::present(def, o)).collect();
        let mut t = table::table(def, &objs, Some(&rv));
        if let Some(c) = &next {
            t["metadata"]["continue"] = json!(c);
        }
        return Ok(Reply::ok(t));
    }
    let rendered: Vec<Value> = items
        .iter()
        .map(|o| match output {
            Output::Meta => partial(o),
            // Items of built-in lists carry no kind, as kube-apiserver encodes them.
            _ if def.is_custom() => Registry::present(def, o),
            _ => {
                let mut v = Registry::present(def, o);
                if let Some(m) = v.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                v
            }
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = next {
        meta["continue"] = json!(c);
    }
    if let Some(r) = remaining {
        meta["remainingItemCount"] = json!(r);
    }
    let (kind, api_version) = match output {
        Output::Meta => (
            "PartialObjectMetadataList".to_owned(),
            "meta.k8s.io/v1".to_owned(),
        ),
        _ => (def.list_kind.clone(), def.api_version()),
    };
    Ok(Reply::ok(json!({
        "kind": kind,
        "apiVersion": api_version,
        "metadata": meta,
        "items": rendered,
    })))
}

/// Whether the next watch request must be answered with `410 Gone`.
pub(crate) fn take_forced_expiry(inner: &Inner) -> bool {
    inner
        .expire_watches
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}
