//! Only its tests: `tests/ui.rs` runs the compile-fail cases in `tests/ui/`.
