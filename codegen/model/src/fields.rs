//! The shape of a kind's struct: public, not generic, and with the fields
//! `metadata`, optionally `spec`, and optionally `status: Option<S>`.

use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, GenericArgument, PathArguments, Type};

use crate::attr::Errors;

/// The types of a kind's `spec` and status.
pub(crate) struct KindFields {
    /// The type of the `spec` field, if there is one.
    pub(crate) spec: Option<Type>,
    /// The `T` of the `status: Option<T>` field, if there is one.
    pub(crate) status: Option<Type>,
}

/// Errors for a struct that cannot be a kind whatever its fields: generic,
/// or not `pub`.
pub(crate) fn check_declaration(input: &DeriveInput, errors: &mut Errors) {
    if !input.generics.params.is_empty() {
        errors.push(syn::Error::new(
            input.generics.span(),
            format!(
                "`{}` derives Kind but is generic; a kind is one concrete type: remove the \
                 parameters and give its fields concrete types",
                input.ident
            ),
        ));
    }
    if !matches!(input.vis, syn::Visibility::Public(_)) {
        errors.push(syn::Error::new(
            input.ident.span(),
            format!(
                "`{0}` derives Kind but is not `pub`; the generated clients, informers and \
                 reconcilers live in another crate: declare it `pub struct {0}`",
                input.ident
            ),
        ));
    }
}

/// The kind's fields; `None`, with an error, when `input` is not a struct
/// with named fields.
pub(crate) fn read_fields(input: &DeriveInput, errors: &mut Errors) -> Option<KindFields> {
    let named = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => named,
            _ => {
                errors.push(syn::Error::new(
                    input.ident.span(),
                    "Kind needs a struct with named fields `metadata`, `spec` and `status`",
                ));
                return None;
            }
        },
        _ => {
            errors.push(syn::Error::new(
                input.ident.span(),
                "Kind can only be derived for a struct with fields `metadata`, `spec` and `status`",
            ));
            return None;
        }
    };
    let mut fields = KindFields {
        spec: None,
        status: None,
    };
    let mut has_metadata = false;
    for field in &named.named {
        let Some(name) = &field.ident else { continue };
        match name.to_string().as_str() {
            "metadata" => has_metadata = true,
            "spec" => fields.spec = Some(field.ty.clone()),
            "status" => match option_inner(&field.ty) {
                Some(inner) => fields.status = Some(inner.clone()),
                None => errors.push(syn::Error::new(
                    field.ty.span(),
                    "`status` must be an `Option<...>` so that objects without a status round-trip; \
                     write `pub status: Option<YourStatus>`",
                )),
            },
            other => errors.push(syn::Error::new(
                name.span(),
                format!(
                    "unsupported field `{other}`: a kind has `metadata`, `spec` and `status`; \
                     move `{other}` into the spec or the status"
                ),
            )),
        }
    }
    if !has_metadata {
        errors.push(syn::Error::new(
            input.ident.span(),
            format!(
                "`{}` has no `metadata` field; add `pub metadata: ObjectMeta`",
                input.ident
            ),
        ));
    }
    Some(fields)
}

fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(inner) if args.args.len() == 1 => Some(inner),
        _ => None,
    }
}
