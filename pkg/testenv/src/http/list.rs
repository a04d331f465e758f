//! `list`: a selection of a resource at a revision, a page at a time.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::registry::Registry;
use crate::registry::options::Selection;
use crate::registry::resource::ResourceDef;
use crate::store::ObjKey;

use super::continue_token::{decode_continue, encode_continue};
use super::reply::{Output, Reply};
use super::request::QueryView;
use super::request_options::{parse_rv, too_large};
use super::table::{self, partial};

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Lists the selected objects of a resource: one page when the request sets a limit.
pub(super) fn list(
    registry: &Registry,
    def: &ResourceDef,
    sel: &Selection,
    q: &QueryView<'_>,
    output: Output,
) -> Result<Reply, ErrorStatus> {
    let limit = parse_limit(q)?;
    check_list_options(q)?;
    let start = list_start(q, registry.store.rv())?;
    // Where the page starts in etcd's key order: `<namespace>/` and the
    // token's name within a namespace, the token's key across namespaces.
    let from = match (&sel.namespace, start.key.as_deref()) {
        (Some(ns), key) => Some(format!("{ns}/{}", key.unwrap_or_default())),
        (None, key) => key.map(str::to_owned),
    };
    let snapshot = match registry
        .store
        .snapshot_from(&def.key(), start.at, from.as_deref())
    {
        Ok(s) => s,
        Err(_) if start.continuing => {
            // etcd has compacted the token's revision: 410, with a token that
            // continues from the same key at the latest revision.
            let mut body = ErrorStatus::expired(CONTINUE_EXPIRED).to_json();
            body["metadata"]["continue"] =
                json!(encode_continue(-1, start.key.as_deref().unwrap_or_default()));
            return Ok(Reply::Json {
                code: 410,
                body,
                warnings: Vec::new(),
            });
        }
        Err(c) => {
            return Err(ErrorStatus::expired(format!(
                "too old resource version: {} ({})",
                start.at, c.oldest
            )));
        }
    };
    let page = paginate(def, sel, snapshot, limit, start.at);
    Ok(render(def, output, page, start.at))
}

/// Where a list reads.
struct Start {
    /// The revision.
    at: u64,
    /// The key a continue token goes on from (below the list's prefix), inclusive.
    key: Option<String>,
    continuing: bool,
}

/// One page of a list, and what comes after it.
struct Page {
    items: Vec<Arc<Value>>,
    next: Option<String>,
    remaining: Option<usize>,
}

/// `limit`: a positive number caps the page; zero or less lists everything.
fn parse_limit(q: &QueryView<'_>) -> Result<Option<usize>, ErrorStatus> {
    match q.get("limit") {
        None | Some("") => Ok(None),
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n > 0 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            Ok(_) => Ok(None),
            Err(_) => Err(ErrorStatus::bad_request(format!(
                "limit: Invalid value: \"{l}\": must be an integer"
            ))),
        },
    }
}

/// The revision and key a list starts at, from its continue token or its
/// `resourceVersion` and `resourceVersionMatch`, with kube-apiserver's errors.
fn list_start(q: &QueryView<'_>, current: u64) -> Result<Start, ErrorStatus> {
    let rv_param = q.get("resourceVersion").filter(|s| !s.is_empty());
    let rvm = q.get("resourceVersionMatch").filter(|s| !s.is_empty());
    let Some(token) = q.get("continue").filter(|s| !s.is_empty()) else {
        return Ok(Start {
            at: revision_to_list(rv_param, rvm, current)?,
            key: None,
            continuing: false,
        });
    };
    let (rv, key) = decode_continue(token)?;
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
    Ok(Start {
        at,
        key: Some(key),
        continuing: true,
    })
}

/// The revision a list without a continue token reads at.
fn revision_to_list(rv_param: Option<&str>, rvm: Option<&str>, current: u64) -> Result<u64, ErrorStatus> {
    // `check_list_options` has refused every other match before.
    match rv_param {
        None | Some("0") => Ok(current),
        Some(r) => {
            let rv = parse_rv(r)?;
            if rv > current {
                return Err(too_large(rv, current));
            }
            Ok(if rvm == Some("Exact") { rv } else { current })
        }
    }
}

/// kube-apiserver's `ValidateListOptions` for a list (not a watch): every
/// cause at once, in its order.
fn check_list_options(q: &QueryView<'_>) -> Result<(), ErrorStatus> {
    let rv = q.get("resourceVersion").unwrap_or_default();
    let mut causes = Vec::new();
    if let Some(matched) = q.get("resourceVersionMatch").filter(|m| !m.is_empty()) {
        if rv.is_empty() {
            causes.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if q.get("continue").is_some_and(|c| !c.is_empty()) {
            causes.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if matched != "Exact" && matched != "NotOlderThan" {
            causes.push(FieldError::not_supported(
                "resourceVersionMatch",
                json!(matched),
                &["Exact".into(), "NotOlderThan".into(), String::new()],
            ));
        }
        if matched == "Exact" && rv == "0" {
            causes.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if q.get("sendInitialEvents").is_some() {
        causes.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ErrorStatus::invalid("meta.k8s.io", "ListOptions", "", causes))
    }
}

/// The selected objects of a snapshot, up to `limit`, with the continue token that
/// goes on after them (and, when nothing filters, how many objects are left).
fn paginate<'a>(
    def: &ResourceDef,
    sel: &Selection,
    snapshot: impl Iterator<Item = (&'a ObjKey, Arc<Value>)>,
    limit: Option<usize>,
    at: u64,
) -> Page {
    let in_namespace = sel.namespace.is_some();
    let mut in_ns = snapshot.take_while(|(k, _)| sel.namespace.as_ref().is_none_or(|ns| &k.namespace == ns));
    let mut page = Page {
        items: Vec::new(),
        next: None,
        remaining: None,
    };
    let mut last: Option<&ObjKey> = None;
    while let Some((key, obj)) = in_ns.next() {
        if limit.is_some_and(|l| page.items.len() >= l) {
            page.next = last.map(|k| {
                encode_continue(
                    i64::try_from(at).unwrap_or(i64::MAX),
                    &format!("{}\u{0}", k.below(in_namespace)),
                )
            });
            if sel.labels.is_empty() && sel.fields.is_empty() {
                page.remaining = Some(1 + in_ns.count());
            }
            break;
        }
        if sel.matches(def, &obj) {
            page.items.push(obj);
        }
        last = Some(key);
    }
    page
}

/// A page as the client asked for it: a Table, or a list of objects or of their
/// metadata.
fn render(def: &ResourceDef, output: Output, page: Page, at: u64) -> Reply {
    let rv = at.to_string();
    if output == Output::Table {
        let objs: Vec<Value> = page.items.iter().map(|o| Registry::present(def, o)).collect();
        let mut t = table::table(def, &objs, Some(&rv));
        if let Some(c) = &page.next {
            t["metadata"]["continue"] = json!(c);
        }
        return Reply::ok(t);
    }
    let rendered: Vec<Value> = page
        .items
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
    if let Some(c) = page.next {
        meta["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        meta["remainingItemCount"] = json!(r);
    }
    let (kind, api_version) = match output {
        Output::Meta => (
            "PartialObjectMetadataList".to_owned(),
            "meta.k8s.io/v1".to_owned(),
        ),
        _ => (def.list_kind.clone(), def.api_version()),
    };
    Reply::ok(json!({
        "kind": kind,
        "apiVersion": api_version,
        "metadata": meta,
        "items": rendered,
    }))
}
