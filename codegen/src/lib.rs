//! The generator: reads annotated API types and emits the typed layer (clients,
//! listers, informers, injection accessors and reconciler traits).
//!
//! [`model`] is the one parser of marker attributes; the `macros` crate's derive
//! uses it too, so both agree on what a marker means.

pub mod model;
