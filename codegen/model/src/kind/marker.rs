//! What every `#[kind(...)]` key implements, and the checks several share.

use kinject_types::validation::is_dns1123_label;
use proc_macro2::{Ident, TokenStream};
use syn::LitStr;
use syn::meta::ParseNestedMeta;

/// One key of `#[kind(...)]` as a typed value: how it is written, read and
/// checked, and what the derive makes of it for the CRD.
///
/// A marker's errors come in two kinds. Those about its own value (a column
/// type kube-apiserver does not know) come from [`parse`](Marker::parse) and
/// span the value; those that need the rest of the kind (a group that is not a
/// DNS subdomain, a scale subresource without a status) come from
/// [`check`](Marker::check), after every key was read, and span the attribute.
pub trait Marker: Sized {
    /// The keys it is written with; several keys are alternatives, of which a
    /// kind gives one (`namespaced`, `cluster_scoped`).
    const KEYS: &'static [&'static str];
    /// Whether the key may be given more than once, each time adding one
    /// (`printcolumn`); other keys given twice are an error.
    const REPEATABLE: bool = false;

    /// Reads the marker at `meta`, the key already known to be one of
    /// [`KEYS`](Marker::KEYS).
    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self>;

    /// What a kind that leaves the key out gets.
    fn absent(kind: &Ident) -> Absent<Self> {
        let _ = kind;
        Absent::Nothing
    }

    /// What is wrong with the value given the rest of the kind; each message
    /// says the fix.
    fn check(&self, kind: &KindContext<'_>) -> Vec<String> {
        let _ = kind;
        Vec::new()
    }

    /// The `kinject_types::CrdMarker` value the derive emits for the marker,
    /// which applies it to the kind's CRD; `None` for the markers the CRD
    /// takes from the derive's `kube::Resource` impl instead (group,
    /// version, plural).
    fn crd_marker(&self) -> Option<TokenStream> {
        None
    }
}

/// What a kind gets for a key it leaves out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Absent<M> {
    /// Nothing: the key is optional.
    Nothing,
    /// A value made from the kind's name, as if it had been written.
    Default(M),
    /// An error: the key is required. The message says what to add.
    Required(&'static str),
}

/// What a marker's [`check`](Marker::check) sees of the rest of the kind.
#[derive(Clone, Copy, Debug)]
pub struct KindContext<'a> {
    /// The struct's name.
    pub ident: &'a Ident,
    /// Whether the struct has a `status` field; `None` when its fields could
    /// not be read (which is an error of its own).
    pub has_status: Option<bool>,
}

/// The problem with a name that must be a lower-case DNS label (a plural, a
/// short name), `what` naming it in the message.
pub(crate) fn not_a_label(what: &str, name: &str) -> Option<String> {
    (!is_dns1123_label(name).is_empty()).then(|| {
        format!("{what} {name:?} is not a lower-case DNS label; use lower-case letters, digits and '-'")
    })
}

/// A printer column's path starts at the object (`.`); the scale
/// subresource's are plain fields under `.spec` or `.status`, as
/// kube-apiserver requires. The CRD check of `hack/update-codegen.sh` reads
/// the rest of a printer column's JSONPath.
pub(crate) fn check_json_path(path: &LitStr, prefix: &str, what: &str) -> syn::Result<()> {
    let value = path.value();
    let example = if prefix == "." {
        ".spec.replicas".to_owned()
    } else {
        format!("{prefix}replicas")
    };
    if !value.starts_with(prefix) || value.len() <= prefix.len().max(1) {
        return Err(syn::Error::new(
            path.span(),
            format!("{value:?} must be a path into {what} starting with `{prefix}`, e.g. \"{example}\""),
        ));
    }
    let plain = value[1..].split('.').all(|field| {
        !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    if prefix != "." && !plain {
        return Err(syn::Error::new(
            path.span(),
            format!(
                "{value:?} is not a plain field path; write fields joined by dots, without indexes or filters, e.g. \"{example}\""
            ),
        ));
    }
    Ok(())
}
