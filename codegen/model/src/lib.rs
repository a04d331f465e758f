//! The one parser of kinject's markers: `#[kind(...)]`, `#[genclient(...)]`
//! and `#[genreconciler(...)]` on an API type, read into a [`KindModel`].
//!
//! # Where it stands
//!
//! This crate is the bottom of the code-generation stack. `#[derive(Kind)]`
//! (the `kinject-macros` crate) and the generator (`kinject-codegen`) both
//! call [`KindModel::from_derive_input`], so a marker means the same thing at
//! compile time and at generation time, and an unknown or malformed marker is
//! an error in both, naming the key, its place and the fix; nothing is
//! silently ignored. It does no I/O and depends only on `syn`, `quote`,
//! `proc-macro2`, `strsim` (for "did you mean") and the Kubernetes name
//! checks of `kinject-types` (without its Kubernetes types), so the
//! proc-macro stays cheap to build.
//!
//! ```
//! use kinject_model::kind::ShortNames;
//! use kinject_model::{KindModel, Scope};
//!
//! let input: syn::DeriveInput = syn::parse_quote! {
//!     #[derive(Kind)]
//!     #[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced, shortnames = ["asvc"])]
//!     #[genclient]
//!     #[genreconciler]
//!     pub struct AddressableService {
//!         pub metadata: ObjectMeta,
//!         pub spec: AddressableServiceSpec,
//!         pub status: Option<AddressableServiceStatus>,
//!     }
//! };
//! let model = KindModel::from_derive_input(&input).unwrap();
//! assert_eq!(model.plural(), "addressableservices");
//! assert_eq!(model.api_version(), "samples.knative.dev/v1alpha1");
//! assert_eq!(model.scope(), Scope::Namespaced);
//! assert_eq!(model.marker::<ShortNames>(), Some(&ShortNames(vec!["asvc".to_owned()])));
//!
//! // What the derive emits as the kind's `KindInfo::MARKERS`, one value per
//! // marker that shapes the CRD (defaults included), then the status
//! // subresource of the `status` field.
//! let markers: Vec<String> = model.crd_markers().iter().map(ToString::to_string).collect();
//! assert_eq!(markers[0], r#":: kinject_types :: CrdMarker :: Singular ("addressableservice")"#);
//! assert_eq!(markers.last().unwrap(), ":: kinject_types :: CrdMarker :: StatusSubresource");
//! ```
//!
//! # Markers as typed values
//!
//! Each key of `#[kind(...)]` is one type implementing [`Marker`]: it names
//! its keys, parses its value from the attribute (with its own errors, each
//! spanning the part at fault and saying the fix), says what a kind that
//! leaves it out gets (a default, or an error), checks itself against the
//! rest of the kind, and emits itself as a value of `kinject_types::CrdMarker`.
//! That runtime value applies itself to the kind's CustomResourceDefinition
//! (`CrdMarker::apply_to_crd`, and `apply_to_schema` for the schema), and
//! `kinject_types::crd` folds a kind's markers over a base CRD made from its
//! `kube::Resource` identity and schema. controller-tools' CRD markers work
//! the same way (a struct per marker with `ApplyToCRD`/`ApplyToSchema`);
//! there one Go value does both, here the split is forced by the layers: the
//! model runs inside the proc-macro, where Kubernetes types are not
//! available, and the CRD is built at run time, where `syn` is not. So a new
//! key is one type here (listed in [`KindMarker`]) and one `CrdMarker`
//! variant there, each with its test; the derive, the CRD builder and the
//! generator need no change.
//!
//! # What may grow
//!
//! The parsed markers' structs ([`GenClient`], [`GenReconciler`],
//! [`kind::Scale`], [`kind::PrintColumn`]) are `#[non_exhaustive]`: a new key
//! adds a field without breaking a caller that reads them. The enums
//! ([`KindMarker`], [`ClientVerb`], [`Scope`]) are exhaustive on purpose:
//! the derive and the generator, this crate's two users, match every
//! variant, so the compiler shows each place a new marker must be handled,
//! where a `_` arm would let it pass silently.
//!
//! The markers of a kind are kept as a list of [`KindMarker`], an enum with
//! one variant per marker type (declared once, by a small macro, with the
//! dispatch from keys to types), rather than as trait objects: a caller asks
//! for a marker by its type ([`KindModel::marker`]) and gets the type back,
//! and a new variant is checked everywhere by the compiler. Group, version
//! and plural emit no `CrdMarker`: they reach the CRD through the derive's
//! `kube::Resource` impl, which every client needs anyway, so the CRD's
//! identity has one source. They, with the scope, are also what the
//! generator names clients and files after, so [`KindModel`] has accessors
//! for them. Field-level validation (ranges, patterns, formats) is written
//! with `schemars` attributes on the spec's fields and reaches the schema
//! through `JsonSchema`; CEL rules are `#[rule(...)]` markers ([`rule`]),
//! which the derive and `#[rules]` turn into schemars transforms; the one
//! thing a field adds to the CRD by itself is the status subresource of a
//! `status` field.
//!
//! # Layout
//!
//! `attr` reads values and reports the shared errors (unknown or repeated
//! keys); `fields` reads the struct's shape; `kind` holds one module per
//! group of `#[kind]` markers; `genclient` and `genreconciler` read their
//! attributes. Each points only at modules below it. `kind_model` puts them together into one [`KindModel`].
#![warn(missing_docs)]

mod attr;
mod fields;
mod genclient;
mod genreconciler;
pub mod kind;
mod kind_model;
pub mod rule;

pub use genclient::{ClientVerb, GenClient};
pub use genreconciler::GenReconciler;
pub use kind::{KindMarker, Marker, Scope, Variant, pluralize};
pub use kind_model::{KindModel, MARKERS, derives_kind};
/// Kubernetes' name checks, shared with the runtime (from `kinject-types`).
pub use kinject_types::validation;
pub use rule::{RuleMarker, rule_markers};
