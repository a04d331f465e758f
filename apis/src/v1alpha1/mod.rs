//! `samples.knative.dev/v1alpha1`.
//!
//! Each kind is split as in Knative: `*_types.rs` (the marked-up types),
//! `*_lifecycle.rs` (condition set and status helpers), `*_defaults.rs` and
//! `*_validation.rs`.

mod addressable_service_defaults;
mod addressable_service_lifecycle;
mod addressable_service_types;
mod addressable_service_validation;
mod simple_deployment_defaults;
mod simple_deployment_lifecycle;
mod simple_deployment_types;
mod simple_deployment_validation;

pub use addressable_service_lifecycle::ADDRESSABLE_SERVICE_CONDITION_READY;
pub use addressable_service_types::{
    AddressableService, AddressableServiceList, AddressableServiceSpec, AddressableServiceStatus,
};
pub use simple_deployment_lifecycle::SIMPLE_DEPLOYMENT_CONDITION_READY;
pub use simple_deployment_types::{
    SimpleDeployment, SimpleDeploymentList, SimpleDeploymentSpec, SimpleDeploymentStatus,
};

/// The version of every kind in this module.
pub const VERSION: &str = "v1alpha1";

/// `samples.knative.dev/v1alpha1`.
pub const API_VERSION: &str = "samples.knative.dev/v1alpha1";
