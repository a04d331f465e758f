//! What kube-apiserver's registry strategies do to the built-in kinds beyond the generic
//! registry: their defaults on create, their kind-specific validation, and the merge
//! keys of their lists.

pub(crate) mod defaults;
pub(crate) mod merge_keys;
pub(crate) mod validation;
