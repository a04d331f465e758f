//! Objects decoded once, straight from the response's bytes, with a way out
//! for those that do not fit their type.
//!
//! A list or watch through kube's watcher needs a type that deserializes.
//! `K` itself would fail a whole list on one object it cannot hold (a replica
//! count beyond `i32` stored through a CRD without bounds), forever. Decoding
//! each object into a `DynamicObject` first and then into `K` parses every
//! object twice and allocates a JSON tree for each. [`Lenient`] keeps the
//! object's JSON text as the response has it (a `RawValue`: one copy of the
//! bytes, no tree), decodes `K` from it in one pass, and only when that fails
//! reads the metadata from the same text, so the informer can skip and
//! report the object.
//!
//! The text is there because kube-apiserver writes a watch event's `type`
//! before its `object`, so serde reads the object while it reads the line;
//! a server that wrote `object` first would have serde buffer it, and
//! every watch event would fail to decode (testenv writes kube-apiserver's
//! order).

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::apis::Object;

/// An object of `K`'s resource as it arrived: decoded, or its metadata and
/// why it does not decode.
#[derive(Clone, Debug)]
pub(crate) enum Lenient<K> {
    Decoded(K),
    Undecodable {
        metadata: Box<ObjectMeta>,
        error: Arc<serde_json::Error>,
    },
}

impl<'de, K: Object> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        match serde_json::from_str::<K>(raw.get()) {
            Ok(decoded) => Ok(Lenient::Decoded(decoded)),
            Err(error) => {
                #[derive(Deserialize)]
                struct Metadata {
                    #[serde(default)]
                    metadata: ObjectMeta,
                }
                let Metadata { metadata } = serde_json::from_str(raw.get()).map_err(D::Error::custom)?;
                Ok(Lenient::Undecodable {
                    metadata: Box::new(metadata),
                    error: Arc::new(error),
                })
            }
        }
    }
}

impl<K: Object> kube::Resource for Lenient<K> {
    type DynamicType = ();
    // Whatever `K`'s scope, the informer names the namespace (or none).
    type Scope = kube::core::DynamicResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    // A `PartialObjectMeta` informer lists and watches metadata alone, as
    // kube's `Api` does for that type.
    fn metadata_api() -> bool {
        K::metadata_api()
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Lenient::Decoded(obj) => obj.meta(),
            Lenient::Undecodable { metadata, .. } => metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Lenient::Decoded(obj) => obj.meta_mut(),
            Lenient::Undecodable { metadata, .. } => metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;

    use super::*;

    #[test]
    fn an_object_decodes_in_one_pass_or_keeps_its_metadata() {
        let fits = r#"{"apiVersion":"apps/v1","kind":"Deployment",
            "metadata":{"name":"web","namespace":"ns","resourceVersion":"7"},"spec":{"replicas":2,"selector":{},"template":{}}}"#;
        let Ok(Lenient::Decoded(web)) = serde_json::from_str::<Lenient<Deployment>>(fits) else {
            panic!("a Deployment that fits decodes");
        };
        assert_eq!(web.spec.and_then(|s| s.replicas), Some(2));

        let too_big = fits.replace("\"replicas\":2", "\"replicas\":3000000000");
        let Ok(Lenient::Undecodable { metadata, error }) =
            serde_json::from_str::<Lenient<Deployment>>(&too_big)
        else {
            panic!("a replica count beyond i32 does not decode");
        };
        assert_eq!(
            (metadata.name.as_deref(), metadata.resource_version.as_deref()),
            (Some("web"), Some("7"))
        );
        assert!(error.to_string().contains("3000000000"), "{error}");

        // In a list, one bad item leaves the others decoded.
        let list = format!("[{fits},{too_big},{fits}]");
        let items: Vec<Lenient<Deployment>> = serde_json::from_str(&list).unwrap();
        let decoded = items.iter().filter(|i| matches!(i, Lenient::Decoded(_))).count();
        assert_eq!((items.len(), decoded), (3, 2));
    }
}
