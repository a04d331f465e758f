//! Impersonation, as kube-apiserver's filter does it before any other
//! authorization: the `Impersonate-User`, `Impersonate-Group` (repeatable),
//! `Impersonate-Uid` and `Impersonate-Extra-<key>` headers (`kubectl --as`,
//! `--as-group`, `--as-uid`) make the request another user's, once the requestor
//! may `impersonate` each part.

use std::collections::BTreeMap;

use http::HeaderMap;

use crate::registry::rbac::{self, Attributes, User, service_account_groups};
use crate::test_env::TestEnv;

use super::reply::Reply;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// One thing a request asks to act as, as kube-apiserver lists them (an
/// `ObjectReference` each).
enum Part {
    ServiceAccount { namespace: String, name: String },
    User(String),
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Part {
    /// The `impersonate` request that must be allowed: its API group, resource,
    /// subresource, namespace and name.
    fn attributes(&self) -> (&str, &str, &str, &str, &str) {
        match self {
            Self::ServiceAccount { namespace, name } => ("", "serviceaccounts", "", namespace, name),
            Self::User(name) => ("", "users", "", "", name),
            Self::Group(name) => ("", "groups", "", "", name),
            Self::Extra { key, value } => ("authentication.k8s.io", "userextras", key, "", value),
            Self::Uid(uid) => ("authentication.k8s.io", "uids", "", "", uid),
        }
    }

    /// As Go's `%v` prints the part's `ObjectReference` (kind, namespace, name, uid,
    /// apiVersion, resourceVersion, fieldPath).
    fn go_text(&self) -> String {
        let (kind, namespace, name, api_version, field_path) = match self {
            Self::ServiceAccount { namespace, name } => {
                ("ServiceAccount", namespace.as_str(), name.as_str(), "", "")
            }
            Self::User(name) => ("User", "", name.as_str(), "", ""),
            Self::Group(name) => ("Group", "", name.as_str(), "", ""),
            Self::Extra { key, value } => (
                "UserExtra",
                "",
                value.as_str(),
                "authentication.k8s.io/v1",
                key.as_str(),
            ),
            Self::Uid(uid) => ("UID", "", uid.as_str(), "authentication.k8s.io/v1", ""),
        };
        format!("{{{kind} {namespace} {name}  {api_version}  {field_path}}}")
    }
}

fn values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = String> + 'a {
    headers
        .get_all(name)
        .into_iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// What the headers ask to act as, in kube-apiserver's order (extras by key).
fn parts(headers: &HeaderMap) -> Vec<Part> {
    let mut out = Vec::new();
    // Only the first user counts, as Go's `Header.Get` reads it.
    if let Some(user) = values(headers, USER).next().filter(|u| !u.is_empty()) {
        out.push(match service_account(&user) {
            Some((namespace, name)) => Part::ServiceAccount { namespace, name },
            None => Part::User(user),
        });
    }
    out.extend(values(headers, GROUP).map(Part::Group));
    let mut extra_names: Vec<(&str, &str)> = headers
        .keys()
        .map(http::HeaderName::as_str)
        .filter_map(|n| Some((n, n.strip_prefix(EXTRA_PREFIX)?)))
        .collect();
    extra_names.sort_unstable();
    extra_names.dedup();
    for (header, escaped) in extra_names {
        let key = unescape(escaped);
        out.extend(values(headers, header).map(|value| Part::Extra {
            key: key.clone(),
            value,
        }));
    }
    if let Some(uid) = values(headers, UID).next().filter(|u| !u.is_empty()) {
        out.push(Part::Uid(uid));
    }
    out
}

/// `system:serviceaccount:<namespace>:<name>`, with names a service account may have.
fn service_account(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    let valid = !name.contains(':')
        && kinject_types::validation::is_dns1123_label(namespace).is_empty()
        && kinject_types::validation::is_dns1123_subdomain(name).is_empty();
    valid.then(|| (namespace.to_owned(), name.to_owned()))
}

/// An extra's key is percent-encoded in its header name (which cannot hold every
/// character a key may); one that does not decode is taken as it is.
fn unescape(key: &str) -> String {
    let raw = key.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        let hex = raw
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => out.push(byte),
            None => return key.to_owned(),
        }
        i += 3;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_owned())
}

/// The user the request is made as: `requestor`, or whom the headers impersonate
/// once `requestor` may impersonate every part of it. `uri` is the request's, which
/// kube-apiserver's plain-text 500 quotes.
pub(crate) fn impersonate(
    env: &TestEnv,
    requestor: User,
    headers: &HeaderMap,
    uri: &str,
) -> Result<User, Reply> {
    let parts = parts(headers);
    if parts.is_empty() {
        return Ok(requestor);
    }
    if !parts
        .iter()
        .any(|p| matches!(p, Part::User(_) | Part::ServiceAccount { .. }))
    {
        let listed: Vec<String> = parts.iter().map(Part::go_text).collect();
        let text = format!(
            "Internal Server Error: {uri:?}: requested [{}] without impersonating a user",
            listed.join(" ")
        );
        return Err(Reply::Text {
            code: 500,
            text: format!(
                "{}\n",
                text.replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            ),
        });
    }
    for part in &parts {
        let (group, resource, subresource, namespace, name) = part.attributes();
        let attributes = Attributes {
            verb: "impersonate",
            group,
            resource,
            subresource,
            namespace,
            name,
        };
        let allowed = rbac::authorize(&env.inner.registry(), &requestor, &attributes);
        if let Err(e) = allowed {
            env.inner.denials().push(e.message.clone());
            return Err(Reply::error(&e));
        }
    }
    Ok(acting_as(&parts, headers))
}

/// The impersonated user: the named user or service account, the groups asked for
/// (a service account's own when none are), `system:authenticated` (or, for
/// `system:anonymous`, `system:unauthenticated`) unless a group says which, and the
/// uid and extras.
fn acting_as(parts: &[Part], headers: &HeaderMap) -> User {
    let groups_given = headers.contains_key(GROUP);
    let mut user = User::new(String::new(), Vec::new());
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for part in parts {
        match part {
            Part::ServiceAccount { namespace, name } => {
                user.name = format!("system:serviceaccount:{namespace}:{name}");
                if !groups_given {
                    user.groups = service_account_groups(namespace);
                }
            }
            Part::User(name) => user.name.clone_from(name),
            Part::Group(group) => user.groups.push(group.clone()),
            Part::Extra { key, value } => extra.entry(key.clone()).or_default().push(value.clone()),
            Part::Uid(uid) => user.uid.clone_from(uid),
        }
    }
    user.extra = extra;
    let (marker, others) = if user.name == "system:anonymous" {
        ("system:unauthenticated", &["system:unauthenticated"][..])
    } else {
        (
            "system:authenticated",
            &["system:authenticated", "system:unauthenticated"][..],
        )
    };
    if !user.groups.iter().any(|g| others.contains(&g.as_str())) {
        user.groups.push(marker.to_owned());
    }
    user
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn user_of(pairs: &[(&str, &str)]) -> User {
        let h = headers(pairs);
        acting_as(&parts(&h), &h)
    }

    #[test]
    fn a_service_account_comes_with_its_groups_unless_groups_are_named() {
        let sa = user_of(&[("Impersonate-User", "system:serviceaccount:shop:bot")]);
        assert_eq!(sa.name, "system:serviceaccount:shop:bot");
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:shop",
                "system:authenticated"
            ]
        );
        let grouped = user_of(&[
            ("Impersonate-User", "system:serviceaccount:shop:bot"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "ops"),
        ]);
        assert_eq!(grouped.groups, ["devs", "ops", "system:authenticated"]);
        let invalid = user_of(&[("Impersonate-User", "system:serviceaccount:Shop:bot")]);
        assert_eq!(
            invalid.groups,
            ["system:authenticated"],
            "not a service account's name"
        );
    }

    #[test]
    fn the_authenticated_groups_are_added_unless_one_is_named() {
        let unauth = user_of(&[
            ("Impersonate-User", "jane"),
            ("Impersonate-Group", "system:unauthenticated"),
        ]);
        assert_eq!(unauth.groups, ["system:unauthenticated"]);
        let anonymous = user_of(&[("Impersonate-User", "system:anonymous")]);
        assert_eq!(anonymous.groups, ["system:unauthenticated"]);
        let extras = user_of(&[
            ("Impersonate-User", "jane"),
            ("Impersonate-Uid", "1234"),
            ("Impersonate-Extra-Scopes", "read"),
            ("Impersonate-Extra-Scopes", "write"),
            ("Impersonate-Extra-example.com%2Fteam", "a"),
        ]);
        assert_eq!(extras.uid, "1234");
        assert_eq!(
            extras.extra,
            BTreeMap::from([
                ("example.com/team".to_owned(), vec!["a".to_owned()]),
                ("scopes".to_owned(), vec!["read".to_owned(), "write".to_owned()]),
            ])
        );
    }

    #[test]
    fn parts_print_as_go_prints_their_object_references() {
        assert_eq!(Part::Group("devs".into()).go_text(), "{Group  devs    }");
        assert_eq!(
            Part::Extra {
                key: "k".into(),
                value: "v".into()
            }
            .go_text(),
            "{UserExtra  v  authentication.k8s.io/v1  k}"
        );
    }
}
