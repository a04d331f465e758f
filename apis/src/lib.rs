//! apis
