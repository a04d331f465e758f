//! `#[derive(Kind)]`: makes a Knative-shaped API type a Kubernetes kind, with
//! its CRD, from marker attributes.
//!
//! # Where it stands
//!
//! This is the compile-time end of kinject's code generation. It reads a
//! struct's markers through `kinject-model`, the one marker parser (the
//! generator, `kinject-codegen`, uses the same), and depends on nothing else
//! but `syn`, `quote` and `proc-macro2`: no Kubernetes, formatting or I/O
//! crates, so a crate of API types builds it quickly (kinject-types' layering
//! test holds it to that). The code it expands to names only
//! `kinject-types`, which re-exports what that code needs (k8s-openapi,
//! kube-core, serde, schemars), so an API crate depends on `kinject-types`,
//! this crate and `serde`.
//!
//! What a kind looks like (the same example runs in `kinject-types`' crate
//! docs: a proc-macro crate's own doctests would build kube and k8s-openapi a
//! second time, for the host):
//!
//! ```ignore
//! # use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! # use kinject_macros::Kind;
//! # #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! # pub struct AddressableServiceSpec { pub service_name: String }
//! # #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! # pub struct AddressableServiceStatus {}
//! #[derive(Kind, Clone, Debug, PartialEq)]
//! #[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced,
//!        shortnames = ["asvc"], categories = ["all", "knative"])]
//! #[genclient]
//! #[genreconciler(krshapedlogic = false)]
//! pub struct AddressableService {
//!     pub metadata: ObjectMeta,
//!     pub spec: AddressableServiceSpec,
//!     pub status: Option<AddressableServiceStatus>,
//! }
//!
//! use kinject_types::KindInfo;
//! use kube::Resource;
//! assert_eq!(AddressableService::plural(&()), "addressableservices");
//! assert_eq!(AddressableService::SHORT_NAMES, ["asvc"]);
//! let asvc = AddressableService::new("rut", AddressableServiceSpec::default());
//! assert_eq!(serde_json::to_value(&asvc).unwrap()["kind"], "AddressableService");
//!
//! // The markers, folded over the kind's identity and schema, make its CRD.
//! let crd = kinject_types::crd::custom_resource_definition::<AddressableService>().unwrap();
//! assert_eq!(crd.metadata.name.as_deref(), Some("addressableservices.samples.knative.dev"));
//! assert_eq!(crd.spec.names.categories, Some(vec!["all".to_owned(), "knative".to_owned()]));
//! assert!(crd.spec.versions[0].subresources.as_ref().is_some_and(|s| s.status.is_some()));
//! ```
//!
//! # What it writes
//!
//! The struct has `metadata`, optionally `spec` (whose type implements `Default`)
//! and optionally `status: Option<S>`. The derive implements `kube::Resource`
//! (from the identity markers: group, version, plural, scope),
//! `kinject_types::KindInfo` (every marker that shapes the CRD, as a
//! `kinject_types::CrdMarker` value), `kinject_types::HasStatus` (with a status),
//! `serde::Serialize` and `Deserialize` (writing `apiVersion` and `kind`, checking
//! them when read), `schemars::JsonSchema` in Knative's shape (`spec` and
//! `status` only), and a constructor `new(name, spec)`. `#[genclient]` and
//! `#[genreconciler]` are read by the generator; the derive checks them so
//! that a bad marker fails the build.
//!
//! See `kinject_model`'s documentation for every key and how a marker is
//! added.
#![warn(missing_docs)]

mod fields;
mod kind;
mod rules;
mod schema;
mod serde_impls;

use proc_macro::TokenStream;

/// Derives the traits that make a struct a Kubernetes kind; see the crate docs.
#[proc_macro_derive(Kind, attributes(kind, genclient, genreconciler, rule))]
pub fn derive_kind(input: TokenStream) -> TokenStream {
    kind::derive(input)
}

/// Validation rules the API server enforces (CEL, `x-kubernetes-validations`)
/// on a `#[derive(JsonSchema)]` struct: each `#[rule("<CEL>", ...)]` on the
/// struct checks a value of it (`self`), each on a field checks the field.
/// Put `#[rules]` above the derive:
///
/// ```ignore
/// #[rules]
/// #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
/// #[serde(rename_all = "camelCase")]
/// #[rule("self.minReplicas <= self.maxReplicas", message = "minReplicas must not be above maxReplicas")]
/// pub struct WidgetSpec {
///     pub min_replicas: i32,
///     pub max_replicas: i32,
///     #[rule("self == oldSelf", message = "size cannot change", reason = "FieldValueForbidden")]
///     pub size: String,
/// }
/// ```
///
/// A rule names fields as the API sees them (`minReplicas`, after serde's
/// renaming). Keys: `message`, `message_expression` (a CEL expression that
/// computes the message), `reason` (`FieldValueInvalid`, the default,
/// `FieldValueForbidden`, `FieldValueRequired`, `FieldValueDuplicate`),
/// `field_path` (where the error points, from the rule's value: `.maxReplicas`)
/// and `optional_old_self` (a transition rule that also runs on create, with
/// `oldSelf` null). A rule that reads `oldSelf` runs only on updates. On a
/// kind itself, `#[rule]` needs no `#[rules]`: on the struct it sits at the
/// root (and may read `self.metadata.name`), on `spec` or `status` at that
/// field. `hack/update-codegen.sh` compiles every rule against the schema
/// and fails, naming the marker's file and line, where the API server would
/// refuse the CRD.
#[proc_macro_attribute]
pub fn rules(args: TokenStream, item: TokenStream) -> TokenStream {
    rules::expand(args.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
