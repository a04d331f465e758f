//! Versions of a kind that differ, converted through a hub: kubebuilder's
//! `Hub` and `Convertible`, Knative's `ConvertTo`/`ConvertFrom`.
//!
//! One version of a kind is its hub (`#[kind(..., hub)]`); every other
//! version (a spoke) implements [`Convertible`], from itself to the hub and
//! back. Any version then converts to any other through the hub, which is
//! how the conversion webhook answers the API server. The API crate that
//! holds the types needs nothing but this crate: the conversions are plain
//! functions of the objects, with no I/O and no runtime.
//!
//! **Nothing is lost on a round trip.** A hub field that a spoke cannot hold
//! would be lost when an object stored in the hub is written back through
//! that spoke. [`from_hub`] therefore keeps the hub's object, when the spoke
//! cannot carry all of it, in the spoke's [`RESTORE_ANNOTATION`] (as Cluster
//! API's `conversion-data` annotation does), and [`to_hub`] hands it back to
//! [`Convertible::convert_to`] as [`Restored`], so that the spoke's
//! conversion copies the hub-only fields from it. A spoke that carries
//! everything gets no annotation.
//!
//! ```
//! use kinject_types::conversion::{Convertible, Restored};
//! use kinject_types::FieldError;
//! # use kinject_macros::Kind;
//! # use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//! # pub mod v1 {
//! #     use super::*;
//! /// The hub: one address, split in two.
//! #[derive(Kind, Clone, Debug, Default, PartialEq)]
//! #[kind(group = "example.com", version = "v1", namespaced, hub)]
//! pub struct Mirror {
//!     pub metadata: ObjectMeta,
//!     pub spec: MirrorSpec,
//! }
//! #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
//! #[serde(rename_all = "camelCase")]
//! pub struct MirrorSpec { pub host: String, pub port: i32 }
//! # }
//! # pub mod v1alpha1 {
//! #     use super::*;
//! /// The first version: one `host:port` string.
//! #[derive(Kind, Clone, Debug, Default, PartialEq)]
//! #[kind(group = "example.com", version = "v1alpha1", namespaced)]
//! pub struct Mirror {
//!     pub metadata: ObjectMeta,
//!     pub spec: MirrorSpec,
//! }
//! #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
//! #[serde(rename_all = "camelCase")]
//! pub struct MirrorSpec { pub address: String }
//! # }
//!
//! impl Convertible for v1alpha1::Mirror {
//!     type Hub = v1::Mirror;
//!
//!     fn convert_to(self, _restored: &Restored<v1::Mirror>) -> Result<v1::Mirror, FieldError> {
//!         let (host, port) = self.spec.address.rsplit_once(':').unwrap_or((&self.spec.address, "80"));
//!         let port = port.parse().map_err(|_| FieldError::invalid_value(port, "spec.address"))?;
//!         Ok(v1::Mirror {
//!             metadata: self.metadata,
//!             spec: v1::MirrorSpec { host: host.to_owned(), port },
//!         })
//!     }
//!
//!     fn convert_from(hub: v1::Mirror) -> Result<Self, FieldError> {
//!         Ok(v1alpha1::Mirror {
//!             metadata: hub.metadata,
//!             spec: v1alpha1::MirrorSpec { address: format!("{}:{}", hub.spec.host, hub.spec.port) },
//!         })
//!     }
//! }
//!
//! # fn main() {
//! let old = v1alpha1::Mirror { spec: v1alpha1::MirrorSpec { address: "db:5432".into() }, ..Default::default() };
//! let hub = kinject_types::conversion::to_hub(old).unwrap();
//! assert_eq!((hub.spec.host.as_str(), hub.spec.port), ("db", 5432));
//! # }
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{FieldError, KindInfo};

/// The path at which the conversion webhook serves `ConversionReview`s
/// (Knative's), which the CRD of a kind with a hub names.
pub const WEBHOOK_PATH: &str = "/resource-conversion";

/// The annotation in which a spoke carries its hub object's fields that the
/// spoke cannot hold, so that writing the spoke back loses none of them.
pub const RESTORE_ANNOTATION: &str = "kinject.dev/conversion-data";

/// The version of a kind that every other version converts to and from
/// (kubebuilder's `Hub`): implemented by `#[derive(Kind)]` for a version
/// marked `#[kind(..., hub)]`.
pub trait Hub: KindInfo + Clone + Serialize + DeserializeOwned {}

/// A version of a kind that is not its hub: how its objects convert to the
/// hub and back (kubebuilder's `Convertible`). Each conversion takes the
/// whole object and returns the whole other one, its `metadata` included;
/// a field that cannot convert is an error naming its path.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a version of a kind with a hub, and does not say how it converts to the hub and back",
    label = "a spoke of a kind with a hub",
    note = "write `impl kinject_types::conversion::Convertible for {Self} {{ type Hub = <the type marked #[kind(..., hub)]>; \
            fn convert_to(self, restored: &Restored<Self::Hub>) -> Result<Self::Hub, FieldError> {{ .. }} \
            fn convert_from(hub: Self::Hub) -> Result<Self, FieldError> {{ .. }} }}`; docs/markers-and-crds.md, \
            \"Versions that differ\", shows one"
)]
pub trait Convertible: KindInfo + Clone + Serialize + DeserializeOwned {
    /// The kind's hub version.
    type Hub: Hub;

    /// This object in the hub's version. `restored` is the hub object this
    /// object was converted from, when it carries one: copy from it the
    /// fields the hub has and this version lacks.
    fn convert_to(self, restored: &Restored<Self::Hub>) -> Result<Self::Hub, FieldError>;

    /// The hub object in this version.
    fn convert_from(hub: Self::Hub) -> Result<Self, FieldError>;
}

/// The hub object a spoke was converted from, kept in its
/// [`RESTORE_ANNOTATION`]: what [`Convertible::convert_to`] copies the
/// hub-only fields from.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored<H>(Option<H>);

impl<H> Restored<H> {
    /// Nothing to restore: the object was written in its own version.
    pub fn none() -> Self {
        Restored(None)
    }

    /// The hub object as it was, if the spoke carried it.
    pub fn hub(&self) -> Option<&H> {
        self.0.as_ref()
    }
}

/// Why an object did not convert.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversionError {
    /// The version's conversion refused the object.
    #[error("{0}")]
    Refused(FieldError),
    /// The object is not one of the version's objects, or its conversion
    /// produced something that does not encode.
    #[error("{0}")]
    Malformed(String),
}

impl From<FieldError> for ConversionError {
    fn from(error: FieldError) -> Self {
        ConversionError::Refused(error)
    }
}

/// A conversion's error as a validation error: what the conversion refused,
/// or what does not encode, at the object itself.
impl From<ConversionError> for FieldError {
    fn from(error: ConversionError) -> Self {
        match error {
            ConversionError::Refused(error) => error,
            ConversionError::Malformed(message) => FieldError::generic(message, [crate::CURRENT_FIELD]),
        }
    }
}

/// A value of a type that two versions each declare alike, from one
/// version's copy to the other's, through its JSON form: for the fields of
/// a new version that keep their shape. `path` names the field in the error.
pub fn same_shape<A: Serialize, B: DeserializeOwned>(value: A, path: &str) -> Result<B, FieldError> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| FieldError::generic(format!("does not convert: {e}"), [path]))
}

/// `spoke` in its kind's hub version. What the spoke's
/// [`RESTORE_ANNOTATION`] keeps is handed to its conversion and not carried
/// on: the hub holds every field itself.
pub fn to_hub<S: Convertible>(mut spoke: S) -> Result<S::Hub, ConversionError> {
    let kept = take_annotation(spoke.meta_mut());
    let restored = match kept {
        Some(text) => Restored(Some(restore::<S::Hub>(&text, spoke.meta())?)),
        None => Restored::none(),
    };
    Ok(spoke.convert_to(&restored)?)
}

/// `hub` in the spoke version `S`. When `S` cannot hold all of it (its
/// conversion back to the hub would differ), the hub's fields go in the
/// spoke's [`RESTORE_ANNOTATION`].
pub fn from_hub<S: Convertible>(hub: S::Hub) -> Result<S, ConversionError> {
    let mut spoke = S::convert_from(hub.clone())?;
    take_annotation(spoke.meta_mut());
    let lossless = spoke
        .clone()
        .convert_to(&Restored::none())
        .ok()
        .is_some_and(|back| fields_of(&back).ok() == fields_of(&hub).ok());
    if !lossless {
        let kept = serde_json::to_string(&fields_of(&hub)?)
            .map_err(|e| ConversionError::Malformed(e.to_string()))?;
        spoke
            .meta_mut()
            .annotations
            .get_or_insert_default()
            .insert(RESTORE_ANNOTATION.to_owned(), kept);
    }
    Ok(spoke)
}

/// The object's fields but its identity: everything but `apiVersion`, `kind`
/// and `metadata`.
fn fields_of<K: Serialize>(object: &K) -> Result<Value, ConversionError> {
    let mut value = serde_json::to_value(object).map_err(|e| ConversionError::Malformed(e.to_string()))?;
    if let Some(fields) = value.as_object_mut() {
        for identity in ["apiVersion", "kind", "metadata"] {
            fields.remove(identity);
        }
    }
    Ok(value)
}

fn take_annotation(metadata: &mut ObjectMeta) -> Option<String> {
    let annotations = metadata.annotations.as_mut()?;
    let kept = annotations.remove(RESTORE_ANNOTATION);
    if annotations.is_empty() {
        metadata.annotations = None;
    }
    kept
}

/// The hub object a spoke kept, with the spoke's metadata.
fn restore<H: Hub>(kept: &str, metadata: &ObjectMeta) -> Result<H, ConversionError> {
    let malformed = |e: serde_json::Error| {
        ConversionError::Malformed(format!(
            "metadata.annotations[{RESTORE_ANNOTATION}] does not hold a {} {}: {e}; remove the annotation to \
             convert the object from its own fields alone",
            H::kind(&()),
            H::version(&()),
        ))
    };
    let mut fields: Value = serde_json::from_str(kept).map_err(malformed)?;
    if let Some(fields) = fields.as_object_mut() {
        fields.insert(
            "metadata".to_owned(),
            serde_json::to_value(metadata).map_err(|e| ConversionError::Malformed(e.to_string()))?,
        );
    }
    serde_json::from_value(fields).map_err(malformed)
}

/// A spoke's conversions over JSON objects, for code that holds objects of
/// many versions as JSON (the conversion webhook, the API server's stand-in).
pub(crate) fn spoke_to_hub_json<S: Convertible>(object: &Value) -> Result<Value, ConversionError> {
    let spoke: S = decode(object)?;
    encode(&to_hub(spoke)?)
}

pub(crate) fn hub_to_spoke_json<S: Convertible>(object: &Value) -> Result<Value, ConversionError> {
    let hub: S::Hub = decode(object)?;
    encode(&from_hub::<S>(hub)?)
}

fn decode<K: KindInfo + DeserializeOwned>(object: &Value) -> Result<K, ConversionError> {
    serde_json::from_value(object.clone()).map_err(|e| {
        ConversionError::Malformed(format!(
            "the object is not a {} {}: {e}",
            K::kind(&()),
            K::version(&())
        ))
    })
}

fn encode<K: Serialize>(object: &K) -> Result<Value, ConversionError> {
    serde_json::to_value(object).map_err(|e| ConversionError::Malformed(e.to_string()))
}
