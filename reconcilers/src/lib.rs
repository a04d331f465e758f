//! The sample controllers' business logic, nothing else: each module holds a
//! `Reconciler` implementing `ReconcileKind` for its kind and a
//! `new_controller` that wires its informers. Everything around
//! `reconcile_kind` (status updates, finalizers, events, leader election) is
//! `kinject_runtime::reconciler`'s.

pub mod addressableservice;
pub mod simpledeployment;
