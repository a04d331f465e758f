//! Versions that differ, converted through their hub: a field only the hub
//! has survives a trip through a spoke, any version converts to any other
//! over JSON, and a registry without a spoke's conversions is refused.
#![allow(clippy::unwrap_used, reason = "a test fails loudly")]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_types::conversion::{self, ConversionError, Convertible, RESTORE_ANNOTATION, Restored};
use kinject_types::registry::{self, CustomKind};
use kinject_types::{Defaultable, FieldError};
use serde_json::{Value, json};

pub mod v1 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::Kind;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The hub: the replica count and a zone, which v1alpha1 has no room for.
    #[derive(Kind, Clone, Debug, Default, PartialEq)]
    #[kind(group = "tutorial.example.com", version = "v1", namespaced, hub)]
    pub struct Widget {
        pub metadata: ObjectMeta,
        pub spec: WidgetSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct WidgetSpec {
        pub replicas: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub zone: Option<String>,
    }
}

pub mod v1alpha1 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::Kind;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A spoke: the replica count as text.
    #[derive(Kind, Clone, Debug, Default, PartialEq)]
    #[kind(group = "tutorial.example.com", version = "v1alpha1", namespaced)]
    pub struct Widget {
        pub metadata: ObjectMeta,
        pub spec: WidgetSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct WidgetSpec {
        pub replicas: String,
    }
}

impl Convertible for v1alpha1::Widget {
    type Hub = v1::Widget;

    fn convert_to(self, restored: &Restored<v1::Widget>) -> Result<v1::Widget, FieldError> {
        let replicas = self
            .spec
            .replicas
            .parse()
            .map_err(|_| FieldError::invalid_value(&self.spec.replicas, "spec.replicas"))?;
        Ok(v1::Widget {
            metadata: self.metadata,
            spec: v1::WidgetSpec {
                replicas,
                // v1alpha1 has no zone: the one the object had, if any.
                zone: restored.hub().and_then(|hub| hub.spec.zone.clone()),
            },
        })
    }

    fn convert_from(hub: v1::Widget) -> Result<Self, FieldError> {
        Ok(v1alpha1::Widget {
            metadata: hub.metadata,
            spec: v1alpha1::WidgetSpec {
                replicas: hub.spec.replicas.to_string(),
            },
        })
    }
}

impl Defaultable for v1alpha1::Widget {
    fn set_defaults(&mut self) {
        if self.spec.replicas.is_empty() {
            "1".clone_into(&mut self.spec.replicas);
        }
    }
}

fn hub(zone: Option<&str>) -> v1::Widget {
    v1::Widget {
        metadata: ObjectMeta {
            name: Some("w".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: v1::WidgetSpec {
            replicas: 3,
            zone: zone.map(str::to_owned),
        },
    }
}

fn registry() -> Vec<CustomKind> {
    vec![
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<v1alpha1::Widget>()
            .converted::<v1alpha1::Widget>()
            .defaulted::<v1alpha1::Widget>(),
    ]
}

#[test]
fn a_field_only_the_hub_has_survives_a_trip_through_a_spoke() {
    let stored = hub(Some("eu-1"));
    let spoke: v1alpha1::Widget = conversion::from_hub(stored.clone()).unwrap();
    assert_eq!(spoke.spec.replicas, "3");
    let kept = &spoke.metadata.annotations.as_ref().unwrap()[RESTORE_ANNOTATION];
    assert_eq!(
        serde_json::from_str::<Value>(kept).unwrap(),
        json!({"spec": {"replicas": 3, "zone": "eu-1"}})
    );

    // A client of v1alpha1 changes the replicas and writes the object back.
    let mut edited = spoke;
    "5".clone_into(&mut edited.spec.replicas);
    let back = conversion::to_hub(edited).unwrap();
    assert_eq!(
        back.spec,
        v1::WidgetSpec {
            replicas: 5,
            zone: Some("eu-1".into())
        }
    );
    assert_eq!(
        back.metadata, stored.metadata,
        "the annotation is not carried into the hub"
    );
}

#[test]
fn a_spoke_that_holds_everything_carries_no_annotation() {
    let spoke: v1alpha1::Widget = conversion::from_hub(hub(None)).unwrap();
    assert_eq!(spoke.metadata.annotations, None);
    assert_eq!(conversion::to_hub(spoke).unwrap(), hub(None));
}

#[test]
fn a_field_that_cannot_convert_is_refused_with_its_path() {
    let mut spoke: v1alpha1::Widget = conversion::from_hub(hub(None)).unwrap();
    "three".clone_into(&mut spoke.spec.replicas);
    let err = conversion::to_hub(spoke).unwrap_err();
    assert_eq!(err.to_string(), "invalid value: three: spec.replicas");
}

#[test]
fn a_garbled_annotation_says_which_and_how_to_go_on() {
    let mut spoke: v1alpha1::Widget = conversion::from_hub(hub(None)).unwrap();
    spoke
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(RESTORE_ANNOTATION.into(), "{not json".into());
    let err = conversion::to_hub(spoke).unwrap_err();
    assert!(matches!(err, ConversionError::Malformed(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("metadata.annotations[kinject.dev/conversion-data] does not hold a Widget v1: "),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with("remove the annotation to convert the object from its own fields alone")
    );
}

#[test]
fn any_version_converts_to_any_other_through_the_hub_then_is_defaulted() {
    let kinds = registry();
    let stored = serde_json::to_value(hub(Some("eu-1"))).unwrap();
    let old = registry::convert(&kinds, &stored, "tutorial.example.com/v1alpha1").unwrap();
    assert_eq!(old["apiVersion"], "tutorial.example.com/v1alpha1");
    assert_eq!(old["spec"], json!({"replicas": "3"}));
    let again = registry::convert(&kinds, &old, "tutorial.example.com/v1").unwrap();
    assert_eq!(again, stored);

    // The target version's defaults apply to what the conversion made.
    let mut empty = json!({"apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"replicas": ""}});
    let defaulted = registry::convert(&kinds, &empty, "tutorial.example.com/v1alpha1").unwrap();
    assert_eq!(defaulted["spec"]["replicas"], "1");
    empty["spec"]["replicas"] = json!("x");
    assert_eq!(
        registry::convert(&kinds, &empty, "tutorial.example.com/v1")
            .unwrap_err()
            .to_string(),
        "invalid value: x: spec.replicas"
    );
}

#[test]
fn conversions_of_unknown_versions_and_kinds_say_what_exists() {
    let kinds = registry();
    let stored = serde_json::to_value(hub(None)).unwrap();
    assert_eq!(
        registry::convert(&kinds, &stored, "tutorial.example.com/v2")
            .unwrap_err()
            .to_string(),
        "Widget.tutorial.example.com has no version \"v2\"; its versions are v1, v1alpha1"
    );
    assert_eq!(
        registry::convert(&kinds, &stored, "other.example.com/v1")
            .unwrap_err()
            .to_string(),
        "cannot convert Widget tutorial.example.com/v1 to another group's version, other.example.com/v1"
    );
    let gadget = json!({"apiVersion": "tutorial.example.com/v1", "kind": "Gadget"});
    assert_eq!(
        registry::convert(&kinds, &gadget, "tutorial.example.com/v1alpha1")
            .unwrap_err()
            .to_string(),
        "no kind Gadget in group \"tutorial.example.com\" is registered here"
    );
    let garbage = json!({"apiVersion": "tutorial.example.com/v1", "kind": "Widget", "spec": 7});
    assert!(
        registry::convert(&kinds, &garbage, "tutorial.example.com/v1alpha1")
            .unwrap_err()
            .to_string()
            .starts_with("the object is not a Widget v1: ")
    );
}

#[test]
fn the_hub_is_stored_and_every_spoke_must_convert() {
    let definitions = registry::custom_resource_definitions(&registry()).unwrap();
    let versions = &definitions[0].crd.spec.versions;
    let stored: Vec<&str> = versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(stored, ["v1"], "the hub, since no version says `storage`");

    let unconverted = [
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<v1alpha1::Widget>(),
    ];
    let err = registry::custom_resource_definitions(&unconverted).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "Widget.tutorial.example.com converts through its hub v1, and its versions v1alpha1 have no \
             conversions in the registry"
        ),
        "{err}"
    );
}
