//! macros
