//! API types for the generator's `build.rs` fixture (`codegen/tests/buildrs-fixture`):
//! a namespaced kind with a status, a client and a reconciler, and a
//! cluster-scoped kind with a client only, and an older version of it that
//! converts through the newer one. They are the generator's own, so
//! its tests build without the sample app.

pub mod v1;
pub mod v1alpha1;
