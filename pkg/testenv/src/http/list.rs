//! `list`: a selection of a resource at a revision, a page at a time.

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::registry::Registry;
use crate::registry::options::Selection;
use crate::registry::resource::ResourceDef;
use crate::store::ObjKey;

use super::continue_token::{decode_continue, encode_continue};
use super::options::{parse_rv, too_large};
use super::reply::{Output, Reply};
use super::request::QueryView;
use super::table::{self, partial};

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

pub(super) fn list(
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
                    vec![FieldError::forbidden(
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
                        vec![FieldError::forbidden(
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
                        vec![FieldError::not_supported(
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
    let mut last: Option<&ObjKey> = None;
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
