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
    /// How loud it is, in words.
    #[serde(default)]
    pub loudness: Loudness,
}

/// `quiet` (volume 0 to 127) or `loud` (128 to 255).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Loudness {
    /// Volume 0 to 127.
    #[default]
    Quiet,
    /// Volume 128 to 255.
    Loud,
}

impl Convertible for Gadget {
    type Hub = v1::Gadget;

    fn convert_to(self, restored: &Restored<v1::Gadget>) -> Result<v1::Gadget, FieldError> {
        let kept = restored.hub().map(|hub| &hub.spec);
        let volume = match (self.spec.loudness, kept.map(|spec| spec.volume)) {
            // The exact volume the hub had, while the word still says it.
            (Loudness::Quiet, Some(volume @ 0..=127)) | (Loudness::Loud, Some(volume @ 128..)) => volume,
            (Loudness::Quiet, _) => 0,
            (Loudness::Loud, _) => 255,
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
        let loudness = if hub.spec.volume < 128 {
            Loudness::Quiet
        } else {
            Loudness::Loud
        };
        Ok(Gadget {
            metadata: hub.metadata,
            spec: GadgetSpec { loudness },
        })
    }
}
