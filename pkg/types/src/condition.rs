//! `Condition` and its parts, in the JSON shape Knative resources use.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The type of a condition, such as `Ready` or `Succeeded`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ConditionType(Cow<'static, str>);

impl ConditionType {
    /// The happy condition of long-running resources.
    pub const READY: ConditionType = ConditionType::from_static("Ready");
    /// The happy condition of run-to-completion resources.
    pub const SUCCEEDED: ConditionType = ConditionType::from_static("Succeeded");

    /// A condition type known at compile time, usable in `const` items.
    pub const fn from_static(name: &'static str) -> Self {
        ConditionType(Cow::Borrowed(name))
    }

    /// The type's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ConditionType {
    fn from(name: &str) -> Self {
        ConditionType(Cow::Owned(name.to_owned()))
    }
}

impl From<String> for ConditionType {
    fn from(name: String) -> Self {
        ConditionType(Cow::Owned(name))
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// Whether a condition holds: `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known (yet) whether the condition holds.
    Unknown,
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        })
    }
}

/// How to treat a condition that is not `True`.
///
/// `Error` is written as the empty string and left out of JSON, as in Knative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionSeverity {
    /// A failure of this condition makes the resource unhappy.
    #[default]
    #[serde(rename = "")]
    Error,
    /// A failure worth a look that does not make the resource unhappy.
    Warning,
    /// Informational only.
    Info,
}

/// Statuses and severities are plain strings in the schema, as in Knative: a
/// `oneOf` of single-value enums is not a structural schema, and an `enum` would
/// make the API server reject conditions written by newer controllers.
macro_rules! string_schema {
    ($($ty:ty),*) => {$(
        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                stringify!($ty).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }
    )*};
}

string_schema!(ConditionStatus, ConditionSeverity, VolatileTime);

impl ConditionSeverity {
    /// True for the default severity, which JSON leaves out.
    pub fn is_error(&self) -> bool {
        *self == ConditionSeverity::Error
    }
}

/// A point in time that semantic equality ignores.
///
/// Knative marks `lastTransitionTime` as volatile so that comparing two statuses
/// (to decide whether a status update is needed) does not see a difference that
/// is only a timestamp. Here that rule lives in `PartialEq`, which is always true:
/// every type that derives `PartialEq` over a condition gets the semantic equality
/// for free. Read [`VolatileTime::time`] when the instant itself matters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VolatileTime(pub Option<Time>);

impl VolatileTime {
    /// The current time.
    pub fn now() -> Self {
        VolatileTime(Some(Time(Timestamp::now())))
    }

    /// The instant, if one was recorded.
    pub fn time(&self) -> Option<Timestamp> {
        self.0.as_ref().map(|t| t.0)
    }

    /// True when no time was recorded; JSON leaves the field out then.
    pub fn is_unset(&self) -> bool {
        self.0.is_none()
    }
}

impl PartialEq for VolatileTime {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// One observation of a resource's state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The kind of observation, such as Ready.
    #[serde(rename = "type")]
    pub type_: ConditionType,

    /// Whether the condition holds: True, False or Unknown.
    pub status: ConditionStatus,

    /// How to treat this condition when it does not hold; empty means Error.
    #[serde(default, skip_serializing_if = "ConditionSeverity::is_error")]
    pub severity: ConditionSeverity,

    /// When the condition last changed status. Ignored when statuses are compared,
    /// so a new timestamp alone never causes a status update.
    #[serde(default, skip_serializing_if = "VolatileTime::is_unset")]
    pub last_transition_time: VolatileTime,

    /// A one-word, CamelCase reason for the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,

    /// A message for people explaining the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Condition {
    /// A condition of the given type and status, with no reason or message.
    pub fn new(type_: ConditionType, status: ConditionStatus) -> Self {
        Condition {
            type_,
            status,
            severity: ConditionSeverity::Error,
            last_transition_time: VolatileTime::default(),
            reason: String::new(),
            message: String::new(),
        }
    }

    /// True when the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }

    /// True when the status is `False`.
    pub fn is_false(&self) -> bool {
        self.status == ConditionStatus::False
    }

    /// True when the status is `Unknown`.
    pub fn is_unknown(&self) -> bool {
        self.status == ConditionStatus::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn condition_uses_knative_json_names_and_omits_defaults() {
        let mut c = Condition::new(ConditionType::READY, ConditionStatus::False);
        c.reason = "ServiceUnavailable".into();
        c.message = "gone".into();
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"type": "Ready", "status": "False", "reason": "ServiceUnavailable", "message": "gone"})
        );
        c.severity = ConditionSeverity::Info;
        c.last_transition_time = VolatileTime(Some(Time("2024-05-01T10:00:00Z".parse().unwrap())));
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"type": "Ready", "status": "False", "severity": "Info",
                   "lastTransitionTime": "2024-05-01T10:00:00Z",
                   "reason": "ServiceUnavailable", "message": "gone"})
        );
    }

    #[test]
    fn empty_severity_reads_as_error() {
        let c: Condition =
            serde_json::from_value(json!({"type": "Ready", "status": "Unknown", "severity": ""})).unwrap();
        assert_eq!(c.severity, ConditionSeverity::Error);
        assert!(c.is_unknown());
    }

    #[test]
    fn equality_ignores_transition_time_only() {
        let a = Condition::new(ConditionType::READY, ConditionStatus::True);
        let mut b = a.clone();
        b.last_transition_time = VolatileTime::now();
        assert_eq!(a, b);
        b.reason = "Different".into();
        assert_ne!(a, b);
    }
}
