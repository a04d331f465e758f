//! The controllers' business logic: each module holds a `Reconciler`
//! implementing `ReconcileKind` for its kind and a `new_controller` that
//! wires its informers. `kinject create api` adds one module per kind to the
//! list below; `controllers()` is what the `controller` binary runs.

kinject_runtime::controllers! {
}
