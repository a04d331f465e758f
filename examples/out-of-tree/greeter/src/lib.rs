//! The Greeting controller.
//!
//! `generated` is the typed layer `build.rs` writes; `greeting` the business
//! logic; [`controllers()`] the list `main`, the tests and the RBAC command read.

/// The output of `build.rs`: `<group>::<version>::<kind>` modules and the registry.
#[allow(missing_docs, unreachable_pub)]
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/codegen.rs"));
}

kinject_runtime::controllers! {
    pub mod greeting;
}
