//! The reconcilers' table tests, one module per reconciler, in one binary.
