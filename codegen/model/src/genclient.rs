//! `#[genclient(...)]`: a typed client, lister and informer for the kind.

use std::collections::BTreeSet;
use std::fmt;

use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprArray, Ident};

use crate::attr::{Errors, flag, given_once, key_of, not_empty, unreachable_key};
use crate::kind::Scope;

/// A method of a generated typed client, as `only_verbs` and `skip_verbs`
/// name it (Knative's `+genclient:skipVerbs`). It is not an API verb: the
/// status methods send `update` and `patch` to the `status` subresource
/// (kinject-types' `Verb` is the API verb, which RBAC grants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClientVerb {
    /// Read one object.
    Get,
    /// Read many objects.
    List,
    /// Stream changes.
    Watch,
    /// Create an object.
    Create,
    /// Replace an object.
    Update,
    /// Replace an object's status.
    UpdateStatus,
    /// Patch an object.
    Patch,
    /// Patch an object's status.
    PatchStatus,
    /// Delete an object.
    Delete,
    /// Delete many objects.
    DeleteCollection,
}

impl ClientVerb {
    /// Every verb, in declaration order.
    pub const ALL: [ClientVerb; 10] = [
        ClientVerb::Get,
        ClientVerb::List,
        ClientVerb::Watch,
        ClientVerb::Create,
        ClientVerb::Update,
        ClientVerb::UpdateStatus,
        ClientVerb::Patch,
        ClientVerb::PatchStatus,
        ClientVerb::Delete,
        ClientVerb::DeleteCollection,
    ];

    /// The verb as written in markers (`update_status`).
    pub fn name(self) -> &'static str {
        match self {
            ClientVerb::Get => "get",
            ClientVerb::List => "list",
            ClientVerb::Watch => "watch",
            ClientVerb::Create => "create",
            ClientVerb::Update => "update",
            ClientVerb::UpdateStatus => "update_status",
            ClientVerb::Patch => "patch",
            ClientVerb::PatchStatus => "patch_status",
            ClientVerb::Delete => "delete",
            ClientVerb::DeleteCollection => "delete_collection",
        }
    }

    /// True for the verbs that act on the status subresource.
    pub fn is_status(self) -> bool {
        matches!(self, ClientVerb::UpdateStatus | ClientVerb::PatchStatus)
    }

    fn from_name(name: &str) -> Option<ClientVerb> {
        ClientVerb::ALL.into_iter().find(|v| v.name() == name)
    }
}

impl fmt::Display for ClientVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `#[genclient(...)]`: generate a typed client, lister and informer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GenClient {
    /// The client's verbs after `only_verbs`, `skip_verbs`, `no_verbs` and `no_status`.
    pub verbs: BTreeSet<ClientVerb>,
    /// `no_status`: the kind has no status subresource to write.
    pub no_status: bool,
}

impl GenClient {
    /// True when informers (and so listers and injection accessors) can be built,
    /// which needs `list` and `watch`.
    pub fn has_informer(&self) -> bool {
        self.verbs.contains(&ClientVerb::List) && self.verbs.contains(&ClientVerb::Watch)
    }
}

const KEYS: [&str; 5] = [
    "no_status",
    "no_verbs",
    "only_verbs",
    "skip_verbs",
    "non_namespaced",
];

/// The keys of `#[genclient(...)]` as written.
#[derive(Default)]
struct Given {
    no_status: bool,
    no_verbs: bool,
    only: Option<Vec<ClientVerb>>,
    skip: Vec<ClientVerb>,
}

impl Given {
    fn parse(attr: &Attribute, scope: Option<Scope>) -> syn::Result<Given> {
        let mut given = Given::default();
        if matches!(attr.meta, syn::Meta::Path(_)) {
            return Ok(given);
        }
        let mut keys = BTreeSet::new();
        attr.parse_nested_meta(|meta| {
            let key = key_of(&meta, "#[genclient(...)]", &KEYS)?;
            given_once(&meta, &key, "#[genclient(...)]", &mut keys)?;
            match key.as_str() {
                "no_status" => {
                    flag(&meta)?;
                    given.no_status = true;
                }
                "no_verbs" => {
                    flag(&meta)?;
                    given.no_verbs = true;
                }
                "only_verbs" => given.only = Some(verb_list(&meta)?),
                "skip_verbs" => given.skip = verb_list(&meta)?,
                "non_namespaced" => {
                    flag(&meta)?;
                    if scope == Some(Scope::Namespaced) {
                        return Err(meta
                            .error("`non_namespaced` contradicts #[kind(namespaced)]; remove one of them"));
                    }
                }
                _ => unreachable_key(&meta)?,
            }
            Ok(())
        })?;
        Ok(given)
    }
}

/// Reads `#[genclient(...)]` of a kind of `scope` (`None` when unknown)
/// that has a status field or not.
pub(crate) fn parse_genclient(
    attr: &Attribute,
    scope: Option<Scope>,
    has_status: bool,
    errors: &mut Errors,
) -> Option<GenClient> {
    let given = match Given::parse(attr, scope) {
        Ok(given) => given,
        Err(err) => {
            errors.push(err);
            return None;
        }
    };
    if given.only.is_some() && !given.skip.is_empty() {
        errors.push(syn::Error::new_spanned(
            attr,
            "#[genclient] takes `only_verbs` or `skip_verbs`, not both; keep one",
        ));
        return None;
    }
    let mut verbs: BTreeSet<ClientVerb> = match (given.no_verbs, given.only) {
        (true, _) => BTreeSet::new(),
        (false, Some(only)) => only.into_iter().collect(),
        (false, None) => ClientVerb::ALL.into_iter().collect(),
    };
    for v in given.skip {
        verbs.remove(&v);
    }
    if given.no_status || !has_status {
        verbs.retain(|v| !v.is_status());
    }
    Some(GenClient {
        verbs,
        no_status: given.no_status,
    })
}

fn verb_list(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<ClientVerb>> {
    let array: ExprArray = meta.value()?.parse()?;
    not_empty(&array)?;
    array
        .elems
        .iter()
        .map(|e| {
            let name = match e {
                Expr::Path(p) => p.path.get_ident().map(Ident::to_string),
                _ => None,
            };
            name.as_deref().and_then(ClientVerb::from_name).ok_or_else(|| {
                let known: Vec<&str> = ClientVerb::ALL.iter().map(|v| v.name()).collect();
                syn::Error::new(
                    e.span(),
                    format!("unknown verb; known verbs: {}", known.join(", ")),
                )
            })
        })
        .collect()
}
