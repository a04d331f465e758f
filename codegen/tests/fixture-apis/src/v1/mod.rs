//! `fixtures.example.dev/v1`.

mod gadget;
mod widget;

pub use gadget::{Gadget, GadgetSpec};
pub use widget::{Widget, WidgetSpec, WidgetStatus};
