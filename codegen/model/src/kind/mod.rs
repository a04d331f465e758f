//! `#[kind(...)]`: one type per key, each reading, checking and emitting
//! itself (see [`Marker`]), gathered in [`KindMarker`].
//!
//! A new key is a new type implementing [`Marker`] in a module here
//! (declared and re-exported below), its name in the `kind_markers!` list,
//! and the `kinject_types::CrdMarker` variant its [`Marker::crd_marker`]
//! names, with that variant's arm in `apply_to_crd` or `apply_to_schema`;
//! each with its test. Nothing else reads keys: the derive emits whatever
//! [`KindMarker::crd_marker`] gives, and the CRD builder folds whatever the
//! derive emitted.

mod identity;
mod kubectl;
mod marker;
mod options;
mod printcolumn;
mod scale;

use std::collections::BTreeSet;

use proc_macro2::{Ident, TokenStream};
use syn::Attribute;
use syn::meta::ParseNestedMeta;

use crate::attr::{Errors, given_once, key_of};
pub use identity::{Group, Plural, Scope, Singular, Version, pluralize};
pub use kubectl::{Categories, ShortNames};
pub use marker::{Absent, KindContext, Marker};
pub use options::{Hub, MaxDescriptionLen, Storage};
pub use printcolumn::PrintColumn;
pub use scale::Scale;

/// A marker type that is one variant of [`KindMarker`], so a kind's markers
/// can be searched by type.
pub trait Variant: Marker + 'static {
    /// The marker, if `marker` is one of this type.
    fn of(marker: &KindMarker) -> Option<&Self>;
}

/// Declares [`KindMarker`], one variant per marker type named like the type,
/// and the dispatch from keys to types. The order of the list is the order of
/// the keys in errors, of the checks, and of [`KindModel::markers`](crate::KindModel::markers).
macro_rules! kind_markers {
    ($($ty:ident),* $(,)?) => {
        /// One `#[kind(...)]` marker, read and checked.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum KindMarker {
            $(
                #[doc = concat!("See [`", stringify!($ty), "`].")]
                $ty($ty),
            )*
        }

        impl KindMarker {
            /// Each marker type's keys and whether it repeats, in declaration order.
            const TYPES: &'static [(&'static [&'static str], bool)] =
                &[$((<$ty as Marker>::KEYS, <$ty as Marker>::REPEATABLE)),*];

            /// Reads the marker of `key`, one of the known keys.
            fn parse(key: &str, meta: &ParseNestedMeta<'_>) -> syn::Result<KindMarker> {
                $(
                    if <$ty as Marker>::KEYS.contains(&key) {
                        return <$ty as Marker>::parse(meta).map(KindMarker::$ty);
                    }
                )*
                Err(meta.error("internal error: a known key has no parser"))
            }

            /// The keys of the marker's type.
            fn keys(&self) -> &'static [&'static str] {
                match self {
                    $(KindMarker::$ty(_) => <$ty as Marker>::KEYS,)*
                }
            }

            fn check(&self, kind: &KindContext<'_>) -> Vec<String> {
                match self {
                    $(KindMarker::$ty(marker) => marker.check(kind),)*
                }
            }

            /// The `kinject_types::CrdMarker` the derive emits for the marker;
            /// see [`Marker::crd_marker`].
            pub fn crd_marker(&self) -> Option<TokenStream> {
                match self {
                    $(KindMarker::$ty(marker) => marker.crd_marker(),)*
                }
            }

            /// Adds the defaults of the types `markers` lack, and returns the
            /// messages of the required ones they lack.
            fn fill_absent(markers: &mut Vec<KindMarker>, kind: &Ident) -> Vec<&'static str> {
                let mut missing = Vec::new();
                $(
                    if !markers.iter().any(|marker| matches!(marker, KindMarker::$ty(_))) {
                        match <$ty as Marker>::absent(kind) {
                            Absent::Nothing => {}
                            Absent::Default(marker) => markers.push(KindMarker::$ty(marker)),
                            Absent::Required(message) => missing.push(message),
                        }
                    }
                )*
                missing
            }
        }

        $(
            impl Variant for $ty {
                fn of(marker: &KindMarker) -> Option<&Self> {
                    match marker {
                        KindMarker::$ty(marker) => Some(marker),
                        _ => None,
                    }
                }
            }
        )*
    };
}

kind_markers! {
    Group,
    Version,
    Plural,
    Singular,
    Scope,
    ShortNames,
    Categories,
    PrintColumn,
    Scale,
    MaxDescriptionLen,
    Storage,
    Hub,
}

impl KindMarker {
    /// Every key, in declaration order.
    fn all_keys() -> Vec<&'static str> {
        KindMarker::TYPES
            .iter()
            .flat_map(|(keys, _)| keys.iter().copied())
            .collect()
    }

    /// The position of the marker's type in declaration order.
    fn rank(&self) -> usize {
        let keys = self.keys();
        KindMarker::TYPES
            .iter()
            .position(|(of_type, _)| *of_type == keys)
            .unwrap_or(usize::MAX)
    }

    fn repeatable(key: &str) -> bool {
        KindMarker::TYPES
            .iter()
            .any(|(keys, repeatable)| *repeatable && keys.contains(&key))
    }
}

/// The markers of `#[kind(...)]`, defaults filled in, in declaration order
/// (repeated markers in the order written). `None` when the attribute does
/// not parse or lacks a required key; every problem is in `errors`.
pub(crate) fn parse_kind(
    attr: &Attribute,
    kind: &KindContext<'_>,
    errors: &mut Errors,
) -> Option<Vec<KindMarker>> {
    let mut markers = match read_markers(attr) {
        Ok(markers) => markers,
        Err(err) => {
            errors.push(err);
            return None;
        }
    };
    let missing = KindMarker::fill_absent(&mut markers, kind.ident);
    if !missing.is_empty() {
        for message in missing {
            errors.push(syn::Error::new_spanned(attr, message));
        }
        return None;
    }
    markers.sort_by_key(KindMarker::rank);
    for problem in markers.iter().flat_map(|marker| marker.check(kind)) {
        errors.push(syn::Error::new_spanned(attr, problem));
    }
    Some(markers)
}

/// The markers as written, stopping at the first that does not parse.
fn read_markers(attr: &Attribute) -> syn::Result<Vec<KindMarker>> {
    let known = KindMarker::all_keys();
    let mut markers: Vec<KindMarker> = Vec::new();
    let mut given = BTreeSet::new();
    attr.parse_nested_meta(|meta| {
        let key = key_of(&meta, "#[kind(...)]", &known)?;
        if !KindMarker::repeatable(&key) {
            given_once(&meta, &key, "#[kind(...)]", &mut given)?;
            // Another key of the same type: its alternative.
            if let Some(other) = markers
                .iter()
                .find(|marker| marker.keys().contains(&key.as_str()))
            {
                let keys: Vec<String> = other.keys().iter().map(|k| format!("`{k}`")).collect();
                return Err(meta.error(format!("{} contradict each other; keep one", keys.join(" and "))));
            }
        }
        markers.push(KindMarker::parse(&key, &meta)?);
        Ok(())
    })?;
    Ok(markers)
}
