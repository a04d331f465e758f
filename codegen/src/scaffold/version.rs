//! Another version of an existing kind, with fields of its own: its types,
//! copied from the hub's file, and its conversion to and from the hub,
//! filled in field by field (`kinject_types::conversion`).
//!
//! The hub is the kind's version marked `hub`, else the one it stores (which
//! then gets the `hub` marker): a new version is a spoke of it, as
//! kubebuilder's `create api` for a second version is of the `Hub`.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Fields, Item, Type};

use crate::scan::KindPlan;

/// What a new version copies from its hub's types file.
pub(super) struct HubFile {
    /// The file's `use` items.
    uses: Vec<Item>,
    /// Every struct and enum but the kind, with the impls of those types.
    types: Vec<Item>,
    /// The names of those structs and enums.
    local: BTreeSet<String>,
    /// The spec's fields (name, type) and the status's, when the kind has them.
    spec: Option<(String, Vec<(syn::Ident, Type)>)>,
    status: Option<(String, Vec<(syn::Ident, Type)>)>,
    /// The `#[rule]`s of the kind itself and of its `spec` and `status`
    /// fields, which the new version keeps.
    kind_rules: Vec<syn::Attribute>,
    spec_rules: Vec<syn::Attribute>,
    status_rules: Vec<syn::Attribute>,
}

fn rules(attrs: &[syn::Attribute]) -> Vec<syn::Attribute> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("rule"))
        .cloned()
        .collect()
}

impl HubFile {
    /// Reads the types of `hub` from the file it is declared in; an error
    /// says what is wrong with that file, which the caller names.
    pub(super) fn read(hub: &KindPlan) -> Result<HubFile, String> {
        let text = std::fs::read_to_string(&hub.source)
            .map_err(|e| format!("cannot read the file to copy its types: {e}"))?;
        let file = syn::parse_file(&text).map_err(|e| format!("the file does not parse: {e}"))?;
        let last = |ty: &Option<String>| ty.as_ref().map(|t| t.rsplit("::").next().unwrap_or(t).to_owned());
        let (spec_name, status_name) = (last(&hub.spec_type), last(&hub.status_type));
        let mut out = HubFile {
            uses: Vec::new(),
            types: Vec::new(),
            local: BTreeSet::new(),
            spec: None,
            status: None,
            kind_rules: Vec::new(),
            spec_rules: Vec::new(),
            status_rules: Vec::new(),
        };
        for item in &file.items {
            match item {
                Item::Use(_) => out.uses.push(item.clone()),
                Item::Struct(s) if s.ident == hub.kind => {
                    out.kind_rules = rules(&s.attrs);
                    for field in &s.fields {
                        match field.ident.as_ref().map(ToString::to_string).as_deref() {
                            Some("spec") => out.spec_rules = rules(&field.attrs),
                            Some("status") => out.status_rules = rules(&field.attrs),
                            _ => {}
                        }
                    }
                }
                Item::Struct(s) => {
                    out.local.insert(s.ident.to_string());
                    let fields = named_fields(&s.fields);
                    if Some(s.ident.to_string()) == spec_name {
                        out.spec = Some((s.ident.to_string(), fields));
                    } else if Some(s.ident.to_string()) == status_name {
                        out.status = Some((s.ident.to_string(), fields));
                    }
                    out.types.push(item.clone());
                }
                Item::Enum(e) => {
                    out.local.insert(e.ident.to_string());
                    out.types.push(item.clone());
                }
                _ => {}
            }
        }
        // The impls of the copied types (a status's `DuckStatus`, say).
        for item in &file.items {
            if let Item::Impl(imp) = item
                && let Type::Path(path) = imp.self_ty.as_ref()
                && path
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| out.local.contains(&s.ident.to_string()))
            {
                out.types.push(item.clone());
            }
        }
        if hub.spec_type.is_some() && out.spec.is_none() {
            return Err(format!(
                "the spec type of {} is not declared in this file; a new version copies its types from the \
                 file that declares the kind, so move the spec there",
                hub.kind
            ));
        }
        Ok(out)
    }

    /// The new version's `*_types.rs`: the hub file's imports and types,
    /// and the kind in the new version.
    pub(super) fn types_file(&self, hub: &KindPlan, version: &str, scope: &str) -> String {
        let kind = format_ident!("{}", hub.kind);
        let list = format_ident!("{}List", hub.kind);
        let group = &hub.group;
        let scope = format_ident!("{scope}");
        let doc = doc_lines(&format!(
            " A {} in `{version}`: the fields of `{}` as they were when this version began, \
             each version with its own copy. `{}` is the hub this version converts to and from \
             (see the conversion beside this file).",
            hub.kind, hub.version, hub.version
        ));
        let (spec_rules, status_rules, kind_rules) = (&self.spec_rules, &self.status_rules, &self.kind_rules);
        let spec = self.spec.as_ref().map(|(name, _)| {
            let ty = format_ident!("{name}");
            quote!(#[doc = " The desired state, written by its user."] #(#spec_rules)* pub spec: #ty,)
        });
        let status = self.status.as_ref().map(|(name, _)| {
            let ty = format_ident!("{name}");
            quote!(#[doc = " The observed state, written by the controller."] #(#status_rules)* pub status: Option<#ty>,)
        });
        let (uses, types) = (&self.uses, &self.types);
        let tokens = quote! {
            #(#uses)*

            #(#[doc = #doc])*
            #[derive(Kind, Clone, Debug, Default, PartialEq)]
            #[kind(group = #group, version = #version, #scope)]
            #(#kind_rules)*
            #[genclient]
            pub struct #kind {
                #[doc = " Standard object metadata."]
                pub metadata: ObjectMeta,
                #spec
                #status
            }

            #(#types)*

            #[doc = " A list of the kind's objects, as the API server returns it."]
            pub type #list = ObjectList<#kind>;
        };
        unparse(tokens)
    }

    /// The new version's conversion to and from `hub` (in `hub_module`),
    /// field by field, with the hub's defaults and validation when it has
    /// them.
    pub(super) fn conversion_file(&self, hub: &KindPlan, hub_module: &syn::Path, version: &str) -> String {
        let kind = format_ident!("{}", hub.kind);
        let hub_version = format_ident!("{}", hub.version);
        let doc = doc_lines(&format!(
            " How a `{version}` {} converts to and from `{}`, the hub: field by field for the fields \
             both versions have. When this version's fields change, change the conversion with them: \
             a field only the hub has is copied from `restored`, the hub object this one was read \
             from. `kinject_testing::conversion::check_round_trips` checks both directions on \
             generated objects.",
            hub.kind, hub.version
        ));
        let target = quote!(#hub_version);
        let (spec_to, status_to) = self.field_moves(&target, "self");
        let (spec_from, status_from) = self.field_moves(&quote!(super), "hub");
        let mut conversion_items = vec![quote!(Convertible), quote!(Restored)];
        if hub.defaulted || hub.validated {
            conversion_items.insert(0, quote!(self));
        }
        if self.uses_same_shape() {
            conversion_items.push(quote!(same_shape));
        }
        let (type_items, defaults, validation) = hub_hooks(hub);
        let type_import = if type_items.len() == 1 {
            quote!(
                use kinject_types::FieldError;
            )
        } else {
            quote!(use kinject_types::{#(#type_items),*};)
        };
        let tokens = quote! {
            #(#![doc = #doc])*

            use kinject_types::conversion::{#(#conversion_items),*};
            #type_import

            use #hub_module;

            impl Convertible for super::#kind {
                type Hub = #hub_version::#kind;

                fn convert_to(self, _restored: &Restored<#hub_version::#kind>) -> Result<#hub_version::#kind, FieldError> {
                    Ok(#hub_version::#kind {
                        metadata: self.metadata,
                        #spec_to
                        #status_to
                    })
                }

                fn convert_from(hub: #hub_version::#kind) -> Result<Self, FieldError> {
                    Ok(super::#kind {
                        metadata: hub.metadata,
                        #spec_from
                        #status_from
                    })
                }
            }

            #defaults

            #validation
        };
        unparse(tokens)
    }

    /// What the version module re-exports of the new types file: the kind,
    /// its list, and its spec and status.
    pub(super) fn exported(&self, kind: &str) -> Vec<String> {
        let mut names = vec![kind.to_owned(), format!("{kind}List")];
        names.extend(self.spec.iter().chain(&self.status).map(|(name, _)| name.clone()));
        names.sort();
        names
    }

    fn uses_same_shape(&self) -> bool {
        self.spec
            .iter()
            .chain(&self.status)
            .flat_map(|(_, fields)| fields)
            .any(|(_, ty)| self.mentions_local(ty))
    }

    fn mentions_local(&self, ty: &Type) -> bool {
        let text = quote!(#ty).to_string();
        text.split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|word| self.local.contains(word))
    }

    /// The `spec:` and `status:` fields of the object built in `target`
    /// (a module path) from the object `source`.
    fn field_moves(&self, target: &TokenStream, source: &str) -> (TokenStream, TokenStream) {
        let source = format_ident!("{source}");
        let moves = |from: &str, fields: &[(syn::Ident, Type)]| -> (Vec<TokenStream>, bool) {
            let from_ident = format_ident!("{from}");
            let mut fallible = false;
            let moved = fields
                .iter()
                .map(|(name, ty)| {
                    if self.mentions_local(ty) {
                        fallible = true;
                        let path = format!("{from}.{name}");
                        quote!(#name: same_shape(#from_ident.#name, #path)?,)
                    } else {
                        quote!(#name: #from_ident.#name,)
                    }
                })
                .collect();
            (moved, fallible)
        };
        let spec = self
            .spec
            .as_ref()
            .map(|(name, fields)| {
                let ty = format_ident!("{name}");
                let (moved, _) = moves("spec", fields);
                quote! {
                    spec: {
                        let spec = #source.spec;
                        #target::#ty { #(#moved)* }
                    },
                }
            })
            .unwrap_or_default();
        let status = self
            .status
            .as_ref()
            .map(|(name, fields)| {
                let ty = format_ident!("{name}");
                let (moved, fallible) = moves("status", fields);
                if fallible {
                    quote! {
                        status: #source
                            .status
                            .map(|status| -> Result<_, FieldError> { Ok(#target::#ty { #(#moved)* }) })
                            .transpose()?,
                    }
                } else {
                    quote!(status: #source.status.map(|status| #target::#ty { #(#moved)* }),)
                }
            })
            .unwrap_or_default();
        (spec, status)
    }
}

/// The `kinject_types` items the conversion module imports besides the
/// conversion's, and the spoke's `Defaultable` and `Validatable` through the
/// hub's, where the hub has them.
fn hub_hooks(hub: &KindPlan) -> (Vec<TokenStream>, Option<TokenStream>, Option<TokenStream>) {
    let kind = format_ident!("{}", hub.kind);
    let mut type_items = vec![quote!(FieldError)];
    let defaults = hub.defaulted.then(|| {
        type_items.insert(0, quote!(Defaultable));
        quote! {
            #[doc = " Defaults as the hub does, through the conversion."]
            impl Defaultable for super::#kind {
                fn set_defaults(&mut self) {
                    let Ok(mut hub) = conversion::to_hub(self.clone()) else {
                        return;
                    };
                    hub.set_defaults();
                    if let Ok(defaulted) = conversion::from_hub(hub) {
                        *self = defaulted;
                    }
                }
            }
        }
    });
    let validation = hub.validated.then(|| {
        type_items.push(quote!(Validatable));
        quote! {
            #[doc = " Validates as the hub does, through the conversion."]
            impl Validatable for super::#kind {
                fn validate(&self) -> Result<(), FieldError> {
                    conversion::to_hub(self.clone())?.validate()
                }
            }
        }
    });
    (type_items, defaults, validation)
}

/// `text` as doc lines of about 90 columns, for `#[doc]` or `#![doc]`.
fn doc_lines(text: &str) -> Vec<String> {
    crate::emit::wrap(text)
        .iter()
        .map(|line| crate::emit::doc_line(line))
        .collect()
}

fn named_fields(fields: &Fields) -> Vec<(syn::Ident, Type)> {
    fields
        .iter()
        .filter_map(|f| Some((f.ident.clone()?, f.ty.clone())))
        .collect()
}

fn unparse(tokens: TokenStream) -> String {
    match syn::parse2::<syn::File>(tokens) {
        Ok(file) => crate::emit::space_items(&prettyplease::unparse(&file)),
        Err(e) => format!("compile_error!({:?});\n", e.to_string()),
    }
}

/// `text` (the hub's types file) with `hub` added to the `#[kind(...)]` of
/// `kind`; `None` when the attribute is not found as written by hand or by
/// the scaffold.
pub(super) fn with_hub_marker(text: &str, kind: &str) -> Option<String> {
    let at = text.find(&format!("pub struct {kind} {{"))?;
    let attr = text[..at].rfind("#[kind(")?;
    let open = attr + "#[kind(".len();
    let mut out = String::with_capacity(text.len() + 5);
    out.push_str(&text[..open]);
    out.push_str("hub, ");
    out.push_str(&text[open..]);
    Some(out)
}

/// The span of the `#[kind(...)]` attribute of `kind` in `text`, from `#[`
/// to its closing `)]`, as written by hand or by the scaffold.
fn kind_attribute(text: &str, kind: &str) -> Option<std::ops::Range<usize>> {
    let at = text.find(&format!("pub struct {kind} {{"))?;
    let start = text[..at].rfind("#[kind(")?;
    let end = start + text[start..at].find(")]")? + 2;
    Some(start..end)
}

/// `text` (a kind's types file) with the kind's `#[kind(...)]` naming
/// version `new` instead of `old`; `None` when it does not name `old`.
pub(super) fn in_version(text: &str, kind: &str, old: &str, new: &str) -> Option<String> {
    let span = kind_attribute(text, kind)?;
    let attribute = &text[span.clone()];
    let (from, to) = (format!("version = \"{old}\""), format!("version = \"{new}\""));
    if !attribute.contains(&from) {
        return None;
    }
    Some(format!(
        "{}{}{}",
        &text[..span.start],
        attribute.replacen(&from, &to, 1),
        &text[span.end..]
    ))
}

/// `text` (a kind's types file) with no `hub` in the kind's `#[kind(...)]`:
/// a kind left with one version converts nothing.
pub(super) fn without_hub_marker(text: &str, kind: &str) -> String {
    match kind_attribute(text, kind) {
        Some(span) => {
            let attribute = text[span.clone()].replace("hub, ", "").replace(", hub", "");
            format!("{}{attribute}{}", &text[..span.start], &text[span.end..])
        }
        None => text.to_owned(),
    }
}

/// `text` (a kind's types file) as a spoke's: the kind's `#[kind(...)]`
/// without `hub` and `storage`, and no `#[genreconciler]`, which go with
/// the hub.
pub(super) fn as_spoke(text: &str, kind: &str) -> String {
    let unmarked = without_hub_marker(text, kind);
    let mut out = match kind_attribute(&unmarked, kind) {
        Some(span) => {
            let attribute = unmarked[span.clone()]
                .replace("storage, ", "")
                .replace(", storage", "");
            format!("{}{attribute}{}", &unmarked[..span.start], &unmarked[span.end..])
        }
        None => unmarked,
    };
    if let Some(at) = out.find(&format!("pub struct {kind} {{")) {
        let head = &out[..at];
        if let Some(line_start) = head.rfind("#[genreconciler") {
            let line_end = head[line_start..].find('\n').map_or(at, |n| line_start + n + 1);
            if head[line_start..line_end].trim_end().ends_with(']') {
                out.replace_range(line_start..line_end, "");
            }
        }
    }
    out
}

/// `role` (the webhook's ClusterRole manifest) with the rule the
/// `conversionwebhook` reconciler needs to keep the CRD `crd` pointed at the
/// webhook: the name added to an existing rule on CRDs, else a new rule at
/// the end. `None` when the role already names the CRD.
pub(super) fn with_crd_rule(role: &str, crd: &str) -> Option<String> {
    let quoted = format!("\"{crd}\"");
    if role.contains(&quoted) {
        return None;
    }
    if let Some(at) = role.find("resources: [\"customresourcedefinitions\"]")
        && let Some(names) = role[at..].find("resourceNames: [")
    {
        let open = at + names + "resourceNames: [".len();
        return Some(format!("{}{quoted}, {}", &role[..open], &role[open..]));
    }
    let mut out = role.trim_end().to_owned();
    out.push_str(&format!(
        "\n  # The CRDs that convert through the webhook, whose conversion and\n  \
         # caBundle its conversionwebhook reconciler keeps current.\n  \
         - apiGroups: [\"apiextensions.k8s.io\"]\n    \
         resources: [\"customresourcedefinitions\"]\n    \
         resourceNames: [{quoted}]\n    \
         verbs: [\"get\", \"list\", \"watch\", \"update\"]\n"
    ));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_rule_is_added_once_and_then_extended() {
        let role = "rules:\n  - apiGroups: [\"\"]\n    resources: [\"namespaces\"]\n    verbs: [\"get\"]\n";
        let first = with_crd_rule(role, "widgets.tutorial.example.com").unwrap();
        assert!(first.starts_with(role.trim_end()), "{first}");
        assert!(
            first.contains("resourceNames: [\"widgets.tutorial.example.com\"]\n    verbs: [\"get\", \"list\", \"watch\", \"update\"]\n"),
            "{first}"
        );
        assert_eq!(with_crd_rule(&first, "widgets.tutorial.example.com"), None);
        let second = with_crd_rule(&first, "gadgets.tutorial.example.com").unwrap();
        assert!(
            second.contains(
                "resourceNames: [\"gadgets.tutorial.example.com\", \"widgets.tutorial.example.com\"]"
            ),
            "{second}"
        );
        assert_eq!(second.matches("customresourcedefinitions").count(), 1, "{second}");
    }

    #[test]
    fn the_hub_marker_goes_into_the_kinds_own_attribute() {
        let text = "#[kind(group = \"a.b\", version = \"v1\")]\npub struct Other {}\n\
                    #[derive(Kind)]\n#[kind(group = \"a.b\", version = \"v1\", namespaced)]\n#[genclient]\npub struct Widget {\n}\n";
        let marked = with_hub_marker(text, "Widget").unwrap();
        assert!(
            marked.contains("#[kind(hub, group = \"a.b\", version = \"v1\", namespaced)]"),
            "{marked}"
        );
        assert!(
            marked.contains("#[kind(group = \"a.b\", version = \"v1\")]\npub struct Other"),
            "{marked}"
        );
        assert_eq!(with_hub_marker(text, "Gadget"), None);
    }

    #[test]
    fn a_new_hub_takes_the_kinds_file_in_its_version_and_the_old_one_becomes_a_spoke() {
        let text = "#[derive(Kind)]\n#[kind(hub, group = \"a.b\", version = \"v1alpha1\", namespaced, storage)]\n\
                    #[genclient]\n#[genreconciler]\npub struct Widget {\n}\n";
        let copied = in_version(text, "Widget", "v1alpha1", "v1beta1").unwrap();
        assert!(copied.contains("version = \"v1beta1\""), "{copied}");
        assert_eq!(in_version(text, "Widget", "v1", "v2"), None);
        let spoke = as_spoke(text, "Widget");
        assert_eq!(
            spoke,
            "#[derive(Kind)]\n#[kind(group = \"a.b\", version = \"v1alpha1\", namespaced)]\n#[genclient]\npub struct Widget {\n}\n"
        );
    }
}
