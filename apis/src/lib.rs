//! The sample API group `samples.knative.dev`: `AddressableService` and
//! `SimpleDeployment`, with Knative's JSON shape, lifecycle, defaults and
//! validation. No I/O lives here.

pub mod v1alpha1;

/// The API group of every kind in this crate.
pub const GROUP_NAME: &str = "samples.knative.dev";
