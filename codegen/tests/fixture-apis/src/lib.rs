//! API types for the generator's `build.rs` fixture (`codegen/tests/buildrs-fixture`):
//! a namespaced kind with a status, a client and a reconciler, and a
//! cluster-scoped kind with a client only. They are the generator's own, so
//! its tests build without the sample app.

pub mod v1;
