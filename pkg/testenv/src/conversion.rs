//! Conversion between the versions of a CRD that converts through a webhook
//! (`spec.conversion.strategy: Webhook`), as kube-apiserver converts: objects
//! are stored in the storage version, and every read, list, watch event and
//! write in another version is converted.
//!
//! testenv makes the conversion by a [`Converter`] registered for the CRD
//! ([`Builder::converter`](crate::Builder::converter)), in process and
//! synchronously: it calls no conversion webhook over HTTP. The framework's
//! harnesses register one built from the kinds' own conversions, which is
//! what the webhook would answer. A CRD that converts through a webhook and
//! has no converter registered keeps its objects as written, converted by
//! `apiVersion` alone.

use std::fmt::Debug;

use serde_json::Value;

/// Converts objects of one CRD between its versions.
pub trait Converter: Send + Sync + Debug {
    /// `object`, of any version of the kind, in `api_version`
    /// (`group/version`), or why it does not convert.
    ///
    /// # Errors
    ///
    /// What the conversion refused, as the webhook would answer it.
    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String>;
}
