//! `#[rules]`: the `#[rule(...)]` markers of a `#[derive(JsonSchema)]`
//! struct, on the struct and on its fields, turned into schemars transforms
//! that add them to the schema where they sit.

use kinject_model::{rule, rule_markers};
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{Attribute, Fields, ItemStruct};

/// The struct with every `#[rule]` replaced by a
/// `#[schemars(transform = kinject_types::Rule ...)]`.
pub(crate) fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    if !args.is_empty() {
        return Err(syn::Error::new_spanned(
            args,
            "#[rules] takes no arguments; write each rule as #[rule(\"<CEL>\", message = \"...\")] \
             on the struct or on a field",
        ));
    }
    let mut item: ItemStruct = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            "#[rules] goes on a struct that derives JsonSchema (an enum's rules go on the field that holds it)",
        )
    })?;
    if !derives_json_schema(&item.attrs) {
        return Err(syn::Error::new_spanned(
            &item.ident,
            format!(
                "#[rules] adds rules through schemars, so `{}` needs #[derive(JsonSchema)] below #[rules] \
                 (an attribute above #[rules] has already run)",
                item.ident
            ),
        ));
    }
    let mut count = replace_rules(&mut item.attrs)?;
    let fields = match &mut item.fields {
        Fields::Named(named) => named.named.iter_mut().collect::<Vec<_>>(),
        Fields::Unnamed(unnamed) => unnamed.unnamed.iter_mut().collect(),
        Fields::Unit => Vec::new(),
    };
    let mut errors: Option<syn::Error> = None;
    for field in fields {
        match replace_rules(&mut field.attrs) {
            Ok(n) => count += n,
            Err(e) => match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            },
        }
    }
    if let Some(errors) = errors {
        return Err(errors);
    }
    if count == 0 {
        return Err(syn::Error::new_spanned(
            &item.ident,
            "#[rules] found no #[rule(...)] on the struct or its fields; add one, or remove #[rules]",
        ));
    }
    Ok(quote!(#item))
}

/// Replaces each `#[rule(...)]` of `attrs` by its schemars transform, in
/// place; how many there were.
fn replace_rules(attrs: &mut [Attribute]) -> syn::Result<usize> {
    let rules = rule_markers(attrs)?;
    let mut transforms = rules.iter().map(|rule| {
        let value = rule.to_tokens();
        syn::parse_quote!(#[schemars(transform = #value)])
    });
    for attr in attrs.iter_mut() {
        if rule::is_rule(attr)
            && let Some(transform) = transforms.next()
        {
            *attr = transform;
        }
    }
    Ok(rules.len())
}

fn derives_json_schema(attrs: &[Attribute]) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("derive")).any(|a| {
        a.parse_args_with(syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
            .is_ok_and(|paths| {
                paths
                    .iter()
                    .any(|p| p.segments.last().is_some_and(|s| s.ident == "JsonSchema"))
            })
    })
}
