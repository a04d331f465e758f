//! A crate that generates its typed layer at build time with `kinject_codegen::Builder`
//! (see `build.rs`) instead of checking it in.

/// The output of `build.rs`: `<group>::<version>::<kind>` modules.
pub mod generated;
