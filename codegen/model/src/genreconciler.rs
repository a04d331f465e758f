//! `#[genreconciler(...)]`: the typed reconciler traits and `new_impl`.

use std::collections::BTreeSet;

use kinject_types::validation::is_qualified_name;
use syn::meta::ParseNestedMeta;
use syn::{Attribute, ExprArray, Ident, LitStr};

use crate::attr::{Errors, find_single, given_once, key_of, string_value, strings_of, unreachable_key};
use crate::genclient::GenClient;

/// `#[genreconciler(...)]`: generate the typed reconciler traits and `new_impl`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GenReconciler {
    /// Class annotation keys; when set, the reconciler only acts on objects whose
    /// first present key has the reconciler's class value.
    pub classes: Vec<String>,
    /// Whether the generic Knative-shaped status logic (defaults, conditions,
    /// observed generation) runs around `reconcile_kind`.
    pub krshapedlogic: bool,
    /// The finalizer name; defaults to `<plural>.<group>`.
    pub finalizer: Option<String>,
}

impl Default for GenReconciler {
    fn default() -> Self {
        GenReconciler {
            classes: Vec::new(),
            krshapedlogic: true,
            finalizer: None,
        }
    }
}

const KEYS: [&str; 3] = ["class", "krshapedlogic", "finalizer"];

/// What `#[genclient]` gave the kind: `None` without the attribute,
/// `Some(None)` when it was malformed (which is an error of its own).
pub(crate) type GenClientGiven<'a> = Option<Option<&'a GenClient>>;

/// Reads the `#[genreconciler(...)]` of `input`, if it has one, for a kind
/// with a status field or not (`None` when its fields could not be read) and
/// the `#[genclient]` it has.
pub(crate) fn read_genreconciler(
    input: &syn::DeriveInput,
    has_status: Option<bool>,
    genclient: GenClientGiven<'_>,
    errors: &mut Errors,
) -> Option<GenReconciler> {
    let attr = find_single(&input.attrs, "genreconciler", errors)?;
    let reconciler = parse(attr, &input.ident, has_status, errors);
    let lacks_informer = match genclient {
        None => true,
        Some(Some(client)) => !client.has_informer(),
        // A malformed #[genclient] has its own error already.
        Some(None) => false,
    };
    if lacks_informer {
        errors.push(needs_informer(attr, &input.ident));
    }
    reconciler
}

fn parse(
    attr: &Attribute,
    ident: &Ident,
    has_status: Option<bool>,
    errors: &mut Errors,
) -> Option<GenReconciler> {
    let mut reconciler = GenReconciler::default();
    if !matches!(attr.meta, syn::Meta::Path(_)) {
        let mut given = BTreeSet::new();
        let parsed = attr.parse_nested_meta(|meta| {
            let key = key_of(&meta, "#[genreconciler(...)]", &KEYS)?;
            given_once(&meta, &key, "#[genreconciler(...)]", &mut given)?;
            match key.as_str() {
                "class" => reconciler.classes.extend(classes(&meta)?),
                "krshapedlogic" => reconciler.krshapedlogic = meta.value()?.parse::<syn::LitBool>()?.value,
                "finalizer" => reconciler.finalizer = Some(finalizer(&meta)?),
                _ => unreachable_key(&meta)?,
            }
            Ok(())
        });
        if let Err(err) = parsed {
            errors.push(err);
            return None;
        }
    }
    if reconciler.krshapedlogic && has_status == Some(false) {
        errors.push(syn::Error::new_spanned(
            attr,
            format!(
                "#[genreconciler] on `{ident}`, which has no `status` field: the generated reconciler keeps \
                 status conditions and observedGeneration up to date. Add `pub status: Option<{ident}Status>` \
                 (a struct embedding kinject_types::duck::v1::Status), or write \
                 #[genreconciler(krshapedlogic = false)] to reconcile without status"
            ),
        ));
        return None;
    }
    Some(reconciler)
}

/// `class = "a/b"` or `class = ["a/b", "c/d"]`: annotation keys.
fn classes(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<String>> {
    let value = meta.value()?;
    let list = if value.peek(syn::token::Bracket) {
        strings_of(&value.parse::<ExprArray>()?)?
    } else {
        vec![value.parse::<LitStr>()?]
    };
    list.into_iter()
        .map(|lit| {
            let key = lit.value();
            if is_qualified_name(&key).is_empty() {
                return Ok(key);
            }
            Err(syn::Error::new(
                lit.span(),
                format!("class annotation key {key:?} is not a qualified name; use e.g. \"networking.knative.dev/ingress.class\""),
            ))
        })
        .collect()
}

fn finalizer(meta: &ParseNestedMeta<'_>) -> syn::Result<String> {
    let lit = string_value(meta)?;
    if !is_qualified_name(&lit.value()).is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "finalizer names are qualified names, e.g. \"addressableservices.samples.knative.dev\"",
        ));
    }
    Ok(lit.value())
}

/// The generated reconciler reads objects through the informer and lister of
/// `#[genclient]`, and writes through its client.
fn needs_informer(attr: &Attribute, ident: &Ident) -> syn::Error {
    syn::Error::new_spanned(
        attr,
        format!(
            "#[genreconciler] on `{ident}` needs the client, informer and lister of #[genclient] with the \
             `list` and `watch` verbs; add #[genclient] (or put list and watch back into its verbs)"
        ),
    )
}
