//! The traits a kind implements: [`KindInfo`] and [`HasStatus`] from
//! `#[derive(Kind)]`, [`KRShaped`], [`Defaultable`] and [`Validatable`] by hand.

use std::fmt::Debug;

use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::duck::v1::{DuckStatus, Status};
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

/// What a CRD needs to know about a kind beyond [`kube::Resource`]; implemented
/// by `#[derive(Kind)]`.
pub trait KindInfo: Resource<DynamicType = ()> {
    /// Lower-case singular name (`addressableservice`).
    const SINGULAR: &'static str;
    /// Short names for kubectl (`asvc`).
    const SHORT_NAMES: &'static [&'static str];
    /// Categories for kubectl (`all`, `knative`).
    const CATEGORIES: &'static [&'static str];
    /// True for namespaced kinds, false for cluster-scoped ones.
    const NAMESPACED: bool;
    /// True when the kind has a status, served through the status subresource.
    const HAS_STATUS: bool;
    /// Columns `kubectl get` shows before the generated ones, from the
    /// `printcolumn(...)` markers, in marker order.
    const PRINTER_COLUMNS: &'static [PrinterColumn] = &[];
    /// The scale subresource, from the `scale(...)` marker.
    const SCALE: Option<ScalePaths> = None;
    /// Descriptions in the CRD's schema are cut to this many bytes, from the
    /// `max_description_len` marker (0 drops them; controller-gen's `maxDescLen`).
    const MAX_DESCRIPTION_LEN: Option<usize> = None;
    /// Of several versions of a kind, the one the API server stores, from the
    /// `storage` marker. A kind with one version is stored in it regardless.
    const STORAGE: bool = false;
}

/// A column `kubectl get` shows: `printcolumn(name = .., type = .., json_path = ..)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The header (`Replicas`).
    pub name: &'static str,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: &'static str,
    /// Where the value is, from the object (`.spec.replicas`).
    pub json_path: &'static str,
    /// What the column means; empty for none.
    pub description: &'static str,
    /// An OpenAPI format refining the type (`int32`, `date-time`); empty for none.
    pub format: &'static str,
    /// 0 shows the column always; higher shows it only with `kubectl get -o wide`.
    pub priority: i32,
}

/// Where the scale subresource (`kubectl scale`, a HorizontalPodAutoscaler)
/// reads and writes replicas: `scale(spec_replicas = .., status_replicas = ..)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas (`.spec.replicas`).
    pub spec_replicas: &'static str,
    /// The observed replicas (`.status.replicas`).
    pub status_replicas: &'static str,
    /// A label selector in string form, for autoscalers (`.status.selector`); empty for none.
    pub label_selector: &'static str,
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
