use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;
use kinject_types::duck::v1::{DuckStatus, Status};
use kinject_types::{ConditionSet, ConditionType, Defaultable, FieldError, KRShaped, Validatable};
use kube_core::ObjectList;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Greeting: a message the controller publishes in a ConfigMap of the same
/// namespace, named after the Greeting, for other workloads to mount.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(group = "hello.example.com", version = "v1alpha1", namespaced, shortnames = ["greet"])]
#[genclient]
#[genreconciler]
pub struct Greeting {
    /// Standard object metadata.
    pub metadata: ObjectMeta,

    /// The desired state of the Greeting, written by its user.
    pub spec: GreetingSpec,

    /// The observed state of the Greeting, written by the controller.
    pub status: Option<GreetingStatus>,
}

/// The longest message accepted, in characters.
pub const MAX_MESSAGE_CHARS: usize = 128;

/// The desired state of a Greeting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GreetingSpec {
    /// What to say; "Hello, world!" when left out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 128))]
    pub message: String,
}

/// The observed state of a Greeting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GreetingStatus {
    #[serde(flatten)]
    pub status: Status,

    /// The ConfigMap holding the message, once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_name: Option<String>,
}

impl DuckStatus for GreetingStatus {
    fn duck(&self) -> &Status {
        &self.status
    }
    fn duck_mut(&mut self) -> &mut Status {
        &mut self.status
    }
}

/// A list of Greetings, as the API server returns it.
pub type GreetingList = ObjectList<Greeting>;

/// Ready is True once the ConfigMap holds the message.
pub const GREETING_CONDITION_READY: ConditionType = ConditionType::READY;

static CONDITION_SET: LazyLock<ConditionSet> = LazyLock::new(|| ConditionSet::living([]));

impl KRShaped for Greeting {
    fn condition_set() -> &'static ConditionSet {
        &CONDITION_SET
    }
}

impl GreetingStatus {
    /// Ready=True: `config_map` holds the message.
    pub fn mark_published(&mut self, config_map: &str) {
        self.config_map_name = Some(config_map.to_owned());
        CONDITION_SET
            .manage(&mut self.status.conditions)
            .mark_true(&GREETING_CONDITION_READY);
    }

    /// Ready=False, `InvalidSpec`: `problem` says which field is wrong and why.
    pub fn mark_invalid_spec(&mut self, problem: &FieldError) {
        CONDITION_SET.manage(&mut self.status.conditions).mark_false(
            &GREETING_CONDITION_READY,
            "InvalidSpec",
            problem.to_string(),
        );
    }
}

impl Defaultable for Greeting {
    fn set_defaults(&mut self) {
        if self.spec.message.is_empty() {
            self.spec.message = "Hello, world!".to_owned();
        }
    }
}

impl Validatable for Greeting {
    fn validate(&self) -> Result<(), FieldError> {
        let chars = self.spec.message.chars().count();
        if chars > MAX_MESSAGE_CHARS {
            return Err(
                FieldError::invalid_value(format!("{chars} characters"), "spec.message")
                    .with_details(format!("must be at most {MAX_MESSAGE_CHARS} characters")),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_message_defaults_to_hello_world() {
        let mut greeting = Greeting::new("g", GreetingSpec::default());
        greeting.set_defaults();
        assert_eq!(greeting.spec.message, "Hello, world!");
    }

    #[test]
    fn a_long_message_names_the_field() {
        let greeting = Greeting::new(
            "g",
            GreetingSpec {
                message: "x".repeat(MAX_MESSAGE_CHARS + 1),
            },
        );
        let err = greeting.validate().unwrap_err().to_string();
        assert!(err.contains("spec.message"), "{err}");
    }
}
