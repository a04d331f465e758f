//! Duck types of `duck.knative.dev/v1`: the common `Status` and `Addressable`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::{Condition, ConditionType};
use crate::url::Url;

/// The status fields every Knative-shaped resource embeds (flattened) in its status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The metadata.generation the controller last acted on.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,

    /// The latest observations of the resource's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// Extra state the controller records for itself or for users, like metadata
    /// annotations but written by the controller.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Status {
    /// The condition of the given type, if present.
    pub fn get_condition(&self, t: &ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == *t)
    }
}

/// A status type that embeds the duck [`Status`]; lets generic code (condition
/// management, observed generation) reach it.
pub trait DuckStatus {
    /// The embedded duck status.
    fn duck(&self) -> &Status;
    /// The embedded duck status, mutably.
    fn duck_mut(&mut self) -> &mut Status;
}

impl DuckStatus for Status {
    fn duck(&self) -> &Status {
        self
    }
    fn duck_mut(&mut self) -> &mut Status {
        self
    }
}

/// Where to reach a resource that can receive requests or events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Addressable {
    /// The name of this address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// The URL to send to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Url>,

    /// PEM-encoded (RFC 7468) certificates of the authorities that sign this
    /// address's serving certificate.
    #[serde(rename = "CACerts", default, skip_serializing_if = "Option::is_none")]
    pub ca_certs: Option<String>,

    /// The OIDC audience of this address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::ConditionStatus;
    use serde_json::json;

    #[test]
    fn status_omits_empty_fields() {
        assert_eq!(serde_json::to_value(Status::default()).unwrap(), json!({}));
        let mut s = Status {
            observed_generation: 3,
            ..Status::default()
        };
        s.conditions
            .push(Condition::new(ConditionType::READY, ConditionStatus::True));
        s.annotations.insert("k".into(), "v".into());
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}],
                   "annotations": {"k": "v"}})
        );
    }

    #[test]
    fn addressable_uses_knative_names() {
        let a = Addressable {
            name: Some("http".into()),
            url: Some(Url::http("svc.ns.svc.cluster.local").unwrap()),
            ca_certs: Some("PEM".into()),
            audience: Some("aud".into()),
        };
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"name": "http", "url": "http://svc.ns.svc.cluster.local", "CACerts": "PEM", "audience": "aud"})
        );
        assert_eq!(serde_json::to_value(Addressable::default()).unwrap(), json!({}));
    }
}
