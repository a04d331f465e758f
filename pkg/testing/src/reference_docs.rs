//! The page `docs/reference.md`, whose examples run as this crate's doctests.
#![doc = include_str!("../../../docs/reference.md")]
