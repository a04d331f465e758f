//! The `knative.dev/pkg/apis` analogue: conditions and condition sets, duck types,
//! field errors, URLs, and the traits a Knative-shaped kind implements.
//!
//! **Where it stands.** The bottom of the framework: every other `kinject-*`
//! crate and every application's API crate builds on it, and it depends on
//! none of them. Everything here is plain data and pure functions: no I/O, no
//! async runtime, so a CLI, a webhook or another operator can read these
//! types cheaply. It may depend on serde, schemars, k8s-openapi (without a
//! version feature) and kube-core, and with `default-features = false` on
//! nothing at all: only [`validation`], [`FieldError`] and [`Verb`] remain
//! (the marker parser and the test API server use that).
//!
//! A kind gets [`KindInfo`] and [`HasStatus`] from `#[derive(Kind)]`, and
//! implements [`KRShaped`], [`Defaultable`] and [`Validatable`] by hand in its
//! lifecycle, defaults and validation files:
//!
//! ```
//! use std::sync::LazyLock;
//! use kinject_types::duck::v1::{DuckStatus, Status};
//! use kinject_types::{ConditionSet, ConditionType, HasStatus, KRShaped};
//!
//! #[derive(Clone, Debug, Default, PartialEq)]
//! struct WidgetStatus { status: Status }
//! impl DuckStatus for WidgetStatus {
//!     fn duck(&self) -> &Status { &self.status }
//!     fn duck_mut(&mut self) -> &mut Status { &mut self.status }
//! }
//! struct Widget { status: Option<WidgetStatus> }
//! impl HasStatus for Widget {
//!     type Status = WidgetStatus;
//!     fn status(&self) -> Option<&WidgetStatus> { self.status.as_ref() }
//!     fn status_mut(&mut self) -> &mut WidgetStatus { self.status.get_or_insert_with(Default::default) }
//! }
//! static CONDITIONS: LazyLock<ConditionSet> = LazyLock::new(|| ConditionSet::living([]));
//! impl KRShaped for Widget {
//!     fn condition_set() -> &'static ConditionSet { &CONDITIONS }
//! }
//!
//! assert_eq!(Widget::condition_set().happy(), &ConditionType::READY);
//! let mut widget = Widget { status: None };
//! widget.duck_status_mut().observed_generation = 1;
//! assert_eq!(widget.duck_status().map(|s| s.observed_generation), Some(1));
//! ```
//!
//! `#[derive(Kind)]` (from `kinject-macros`) writes those trait impls, and the
//! kind's CRD comes from its markers:
//!
//! ```
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
//! use kinject_types::__private::kube::Resource;
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
#![warn(missing_docs)]

#[cfg(feature = "kinds")]
mod condition;
#[cfg(feature = "kinds")]
mod condition_set;
#[cfg(feature = "kinds")]
pub mod conversion;
#[cfg(feature = "kinds")]
pub mod crd;
#[cfg(feature = "kinds")]
pub mod duck;
mod field_error;
#[cfg(feature = "kinds")]
mod kind;
#[cfg(feature = "kinds")]
mod marker;
#[cfg(feature = "kinds")]
pub mod registry;
#[cfg(feature = "kinds")]
pub mod rule;
#[cfg(feature = "kinds")]
pub mod schema;
#[cfg(feature = "kinds")]
mod url;
pub mod validation;
mod verb;

#[cfg(feature = "kinds")]
pub use condition::{Condition, ConditionSeverity, ConditionStatus, ConditionType, VolatileTime};
#[cfg(feature = "kinds")]
pub use condition_set::{ClearTerminalConditionError, ConditionManager, ConditionSet};
pub use field_error::{CURRENT_FIELD, DiagnosticLevel, FieldError, go_quote};
#[cfg(feature = "kinds")]
pub use kind::{Defaultable, HasStatus, KRShaped, KindInfo, Object, Validatable};
#[cfg(feature = "kinds")]
pub use marker::{CrdMarker, PrinterColumn, ScalePaths};
#[cfg(feature = "kinds")]
pub use rule::Rule;
#[cfg(feature = "kinds")]
pub use url::{Url, UrlParseError};
pub use verb::{UnknownVerb, Verb};

/// Crates the derive's expansion names, so a crate using `#[derive(Kind)]` needs
/// only this crate (and `serde` for its own derives).
#[cfg(feature = "kinds")]
#[doc(hidden)]
pub mod __private;
