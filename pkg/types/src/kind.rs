//! The traits a kind implements: [`KindInfo`] and [`HasStatus`] from
//! `#[derive(Kind)]`, [`KRShaped`], [`Defaultable`] and [`Validatable`] by hand.

use std::fmt::Debug;

use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::duck::v1::{DuckStatus, Status};
use crate::marker::CrdMarker;
use crate::{ConditionSet, FieldError};

/// Any Kubernetes object the runtime can cache, watch and write: a static kind
/// with serde support. Implemented for every type that qualifies.
pub trait Object:
    Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

impl<T> Object for T where
    T: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// What a CRD needs to know about a kind beyond [`kube::Resource`](Resource): its
/// markers; implemented by `#[derive(Kind)]`.
///
/// The other constants say what the markers say of the kind's names and
/// scope, for code that needs them as constants.
pub trait KindInfo: Resource<DynamicType = ()> {
    /// The kind's markers, each applied to its CRD in this order (see
    /// [`crd::custom_resource_definition`](crate::crd::custom_resource_definition)):
    /// one per `#[kind(...)]` key that shapes the CRD, the singular name always
    /// (by default the kind in lower case), then the status subresource when
    /// the kind has a status.
    const MARKERS: &'static [CrdMarker];
    /// Lower-case singular name (`addressableservice`).
    const SINGULAR: &'static str = CrdMarker::singular_of(Self::MARKERS);
    /// Short names for kubectl (`asvc`).
    const SHORT_NAMES: &'static [&'static str] = CrdMarker::short_names_of(Self::MARKERS);
    /// Categories for kubectl (`all`, `knative`).
    const CATEGORIES: &'static [&'static str] = CrdMarker::categories_of(Self::MARKERS);
    /// True for namespaced kinds, false for cluster-scoped ones.
    const NAMESPACED: bool = CrdMarker::namespaced_of(Self::MARKERS);
}

/// A kind with a `status`; implemented by `#[derive(Kind)]` when the struct has a
/// `status: Option<S>` field.
pub trait HasStatus {
    /// The status type.
    type Status: Clone + Debug + Default + PartialEq + Send + Sync + 'static;

    /// The status, if the object has one.
    fn status(&self) -> Option<&Self::Status>;

    /// The status, created empty if the object has none.
    fn status_mut(&mut self) -> &mut Self::Status;
}

/// A Knative-shaped kind: its status embeds the duck [`Status`] and a
/// [`ConditionSet`] governs its conditions. The generated reconciler relies on
/// this for observed-generation and condition bookkeeping.
pub trait KRShaped: HasStatus<Status: DuckStatus> {
    /// The condition set of the kind.
    fn condition_set() -> &'static ConditionSet;

    /// The embedded duck status, if the object has a status.
    fn duck_status(&self) -> Option<&Status> {
        self.status().map(DuckStatus::duck)
    }

    /// The embedded duck status, created empty if needed.
    fn duck_status_mut(&mut self) -> &mut Status {
        self.status_mut().duck_mut()
    }
}

/// Fills in defaults before an object is validated or reconciled.
pub trait Defaultable {
    /// Sets the default value of every unset field that has one.
    fn set_defaults(&mut self);
}

/// Checks an object against the kind's rules.
pub trait Validatable {
    /// `Err` lists every rule the object breaks, with field paths.
    fn validate(&self) -> Result<(), FieldError>;
}
