//! `fixtures.example.dev/v1alpha1`: an older version of `Gadget`, converted
//! through the `v1` hub.

mod gadget;

pub use gadget::{Gadget, GadgetSpec, Loudness};
