//! `hello.example.com/v1alpha1`.

mod greeting;

pub use greeting::*;
