//! Duck types: the shapes many kinds share, so generic code can read them.

pub mod v1;
