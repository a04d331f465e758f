use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;
use kinject_types::FieldError;
use kinject_types::conversion::{Convertible, Restored};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::v1;

/// Gadget as it was first served: its loudness as a word.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(group = "fixtures.example.dev", version = "v1alpha1", cluster_scoped)]
#[genclient(non_namespaced)]
pub struct Gadget {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Its setting.
    pub spec: GadgetSpec,
}

/// A gadget's setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GadgetSpec {
    /// `quiet` (volume 0 to 127) or `loud` (128 to 255).
    #[serde(default)]
    pub loudness: String,
}

impl Convertible for Gadget {
    type Hub = v1::Gadget;

    fn convert_to(self, restored: &Restored<v1::Gadget>) -> Result<v1::Gadget, FieldError> {
        let kept = restored.hub().map(|hub| &hub.spec);
        let volume = match (self.spec.loudness.as_str(), kept.map(|spec| spec.volume)) {
            // The exact volume the hub had, while the word still says it.
            ("quiet", Some(volume @ 0..=127)) | ("loud", Some(volume @ 128..)) => volume,
            ("quiet" | "", _) => 0,
            ("loud", _) => 255,
            (other, _) => return Err(FieldError::invalid_value(other, "spec.loudness")),
        };
        Ok(v1::Gadget {
            metadata: self.metadata,
            spec: v1::GadgetSpec {
                volume,
                muted: kept.is_some_and(|spec| spec.muted),
            },
        })
    }

    fn convert_from(hub: v1::Gadget) -> Result<Self, FieldError> {
        let loudness = if hub.spec.volume < 128 { "quiet" } else { "loud" };
        Ok(Gadget {
            metadata: hub.metadata,
            spec: GadgetSpec {
                loudness: loudness.to_owned(),
            },
        })
    }
}
