//! Reading the values inside marker attributes, with the errors every marker
//! shares: unknown and repeated keys, flags given a value, strings and lists
//! of the wrong shape.

use std::collections::BTreeSet;

use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprArray, Ident, Lit, LitStr};

/// Every problem found in one input, reported together.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, err: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(err),
            None => self.0 = Some(err),
        }
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// The attribute `#[name]` of `attrs`; a second one is an error, not merged.
pub(crate) fn find_single<'a>(
    attrs: &'a [Attribute],
    name: &str,
    errors: &mut Errors,
) -> Option<&'a Attribute> {
    let mut found = attrs.iter().filter(|a| a.path().is_ident(name));
    let first = found.next();
    for dup in found {
        errors.push(syn::Error::new_spanned(
            dup,
            format!("#[{name}] is given more than once; merge its options into one #[{name}(...)]"),
        ));
    }
    first
}

/// The key of a nested meta, or an error naming the attribute, the unknown key,
/// the closest known key and the full list.
pub(crate) fn key_of(meta: &ParseNestedMeta<'_>, attr: &str, known: &[&str]) -> syn::Result<String> {
    let key = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
    if known.contains(&key.as_str()) {
        return Ok(key);
    }
    let shown = if key.is_empty() {
        let path = &meta.path;
        quote::quote!(#path).to_string().replace(' ', "")
    } else {
        key.clone()
    };
    let suggestion = known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| format!("did you mean `{k}`? "))
        .unwrap_or_default();
    Err(meta.error(format!(
        "unknown key `{shown}` in {attr}; {suggestion}known keys: {}",
        known.join(", ")
    )))
}

/// A key given twice in one attribute is an error, not "the last one wins".
pub(crate) fn given_once(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    attr: &str,
    given: &mut BTreeSet<String>,
) -> syn::Result<()> {
    if given.insert(key.to_owned()) {
        return Ok(());
    }
    Err(meta.error(format!("`{key}` is given twice in {attr}; keep one")))
}

pub(crate) fn unreachable_key(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    Err(meta.error("internal error: a known key has no parser"))
}

pub(crate) fn flag(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren) {
        let key = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
        return Err(meta.error(format!(
            "`{key}` is a flag and takes no value; write just `{key}`"
        )));
    }
    Ok(())
}

pub(crate) fn string_value(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    let key = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
    let value = meta.value()?;
    match value.parse::<Lit>()? {
        Lit::Str(s) => Ok(s),
        other => Err(syn::Error::new(
            other.span(),
            format!("`{key}` takes a string, e.g. {key} = \"...\""),
        )),
    }
}

pub(crate) fn string_list(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<String>> {
    let array: ExprArray = meta.value()?.parse()?;
    Ok(strings_of(&array)?.iter().map(LitStr::value).collect())
}

pub(crate) fn strings_of(array: &ExprArray) -> syn::Result<Vec<LitStr>> {
    not_empty(array)?;
    array
        .elems
        .iter()
        .map(|e| match e {
            Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Ok(s.clone()),
            other => Err(syn::Error::new(
                other.span(),
                "expected a string literal, e.g. [\"asvc\"]",
            )),
        })
        .collect()
}

/// An empty list says nothing a missing key would not, and usually hides a
/// mistake.
pub(crate) fn not_empty(array: &ExprArray) -> syn::Result<()> {
    if array.elems.is_empty() {
        return Err(syn::Error::new(
            array.span(),
            "the list is empty; list at least one value, or leave the key out",
        ));
    }
    Ok(())
}

/// The lines of the `///` comments among `attrs`.
pub(crate) fn doc_lines(attrs: &[Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => {
                    let line = s.value();
                    Some(line.strip_prefix(' ').unwrap_or(&line).trim_end().to_owned())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}
