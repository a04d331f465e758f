//! The `hello.example.com` API group.

pub mod v1alpha1;
