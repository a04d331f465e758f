//! The sample controllers' business logic, nothing else: each module holds a
//! `Reconciler` implementing `ReconcileKind` for its kind and a
//! `new_controller` that wires its informers. Everything around
//! `reconcile_kind` (status updates, finalizers, events, leader election) is
//! `kinject_runtime::reconciler`'s.
//!
//! The modules are declared once, below: [`controllers()`] lists one
//! controller per module, and the `controller` binary, the local example and
//! the end-to-end tests all run (and count) that list. A new reconciler module
//! is one more line here (`hack/new-kind.sh` writes it).

kinject_runtime::controllers! {
    pub mod addressableservice;
    pub mod simpledeployment;
}
