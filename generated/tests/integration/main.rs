//! Tests of the generated code, one binary.

mod reconciler;
mod smoke;
mod testing;
