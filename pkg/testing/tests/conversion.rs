//! `check_round_trips` passes conversions that lose nothing and fails, with
//! the smallest object that shows it, those that do.
#![allow(clippy::unwrap_used, reason = "a test fails loudly")]

use kinject_testing::conversion::check_round_trips;
use kinject_types::FieldError;
use kinject_types::conversion::{Convertible, Restored};
use kinject_types::registry::CustomKind;

pub mod v1 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::Kind;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The hub: replicas, and a zone older versions have no room for.
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

/// A version of `Widget` with replicas alone, and a conversion named `$name`
/// whose `convert_to` is `$to`.
macro_rules! spoke {
    ($module:ident, $version:literal, $to:expr) => {
        pub mod $module {
            use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
            use kinject_macros::Kind;
            use schemars::JsonSchema;
            use serde::{Deserialize, Serialize};

            #[derive(Kind, Clone, Debug, Default, PartialEq)]
            #[kind(group = "tutorial.example.com", version = $version, namespaced)]
            pub struct Widget {
                pub metadata: ObjectMeta,
                pub spec: WidgetSpec,
            }

            #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
            pub struct WidgetSpec {
                pub replicas: i32,
            }
        }

        impl Convertible for $module::Widget {
            type Hub = v1::Widget;

            fn convert_to(self, restored: &Restored<v1::Widget>) -> Result<v1::Widget, FieldError> {
                #[allow(clippy::redundant_closure_call, reason = "each spoke's own way")]
                ($to)(self, restored)
            }

            fn convert_from(hub: v1::Widget) -> Result<Self, FieldError> {
                Ok($module::Widget {
                    metadata: hub.metadata,
                    spec: $module::WidgetSpec {
                        replicas: hub.spec.replicas,
                    },
                })
            }
        }
    };
}

// Copies the zone back from the hub object the spoke came from.
spoke!(
    careful,
    "v1beta1",
    |spoke: careful::Widget, restored: &Restored<v1::Widget>| {
        Ok(v1::Widget {
            metadata: spoke.metadata,
            spec: v1::WidgetSpec {
                replicas: spoke.spec.replicas,
                zone: restored.hub().and_then(|hub| hub.spec.zone.clone()),
            },
        })
    }
);

// Forgets the zone: a hub object with one loses it through this version.
spoke!(
    forgetful,
    "v1alpha2",
    |spoke: forgetful::Widget, _: &Restored<v1::Widget>| {
        Ok(v1::Widget {
            metadata: spoke.metadata,
            spec: v1::WidgetSpec {
                replicas: spoke.spec.replicas,
                zone: None,
            },
        })
    }
);

// Refuses every object.
spoke!(
    refusing,
    "v1alpha1",
    |_: refusing::Widget, _: &Restored<v1::Widget>| {
        Err(FieldError::invalid_value("anything", "spec.replicas"))
    }
);

#[test]
fn a_conversion_that_keeps_every_field_passes() {
    let kinds = [
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<careful::Widget>().converted::<careful::Widget>(),
    ];
    assert_eq!(check_round_trips(&kinds).unwrap(), ["Widget v1beta1"]);
}

#[test]
fn a_conversion_that_loses_a_hub_field_fails_on_the_smallest_object_that_shows_it() {
    let kinds = [
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<forgetful::Widget>().converted::<forgetful::Widget>(),
    ];
    let failure = check_round_trips(&kinds).unwrap_err();
    assert!(
        failure.starts_with("Widget v1 → v1alpha2 → v1: the object\n"),
        "{failure}"
    );
    assert!(failure.contains("it came back changed"), "{failure}");
    // Shrunk: replicas 0 and the shortest zone.
    assert!(
        failure.contains(r#""spec":{"replicas":0,"zone":""}"#),
        "{failure}"
    );
}

#[test]
fn a_conversion_that_refuses_everything_is_no_pass() {
    let kinds = [
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<refusing::Widget>().converted::<refusing::Widget>(),
    ];
    let failure = check_round_trips(&kinds).unwrap_err();
    assert!(
        failure.starts_with("Widget v1alpha1 → v1 → v1alpha1: too few objects to test"),
        "{failure}"
    );
}

#[test]
fn a_registry_without_spokes_checks_nothing() {
    assert_eq!(
        check_round_trips(&[CustomKind::of::<v1::Widget>()]).unwrap(),
        Vec::<String>::new()
    );
}

/// A version that counts replicas as text.
pub mod textual {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::Kind;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(Kind, Clone, Debug, Default, PartialEq)]
    #[kind(group = "tutorial.example.com", version = "v1alpha3", namespaced)]
    pub struct Widget {
        pub metadata: ObjectMeta,
        pub spec: WidgetSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct WidgetSpec {
        pub replicas: String,
    }
}

impl Convertible for textual::Widget {
    type Hub = v1::Widget;

    fn convert_to(self, _: &Restored<v1::Widget>) -> Result<v1::Widget, FieldError> {
        let replicas = self
            .spec
            .replicas
            .parse()
            .map_err(|_| FieldError::invalid_value(&self.spec.replicas, "spec.replicas"))?;
        Ok(v1::Widget {
            metadata: self.metadata,
            spec: v1::WidgetSpec { replicas, zone: None },
        })
    }

    fn convert_from(hub: v1::Widget) -> Result<Self, FieldError> {
        Ok(textual::Widget {
            metadata: hub.metadata,
            spec: textual::WidgetSpec {
                replicas: hub.spec.replicas.to_string(),
            },
        })
    }
}

/// A reconciler of the hub that copies a Widget's replicas into a ConfigMap.
struct Copier(kube::Client);

impl kinject_runtime::controller::Reconciler for Copier {
    async fn reconcile(
        &self,
        key: &kinject_runtime::controller::ObjectKey,
    ) -> Result<kinject_runtime::controller::Action, kinject_runtime::controller::Error> {
        let widgets: kube::Api<v1::Widget> = kube::Api::namespaced(self.0.clone(), &key.namespace);
        let widget = widgets.get(&key.name).await?;
        let copy: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": key.name, "namespace": key.namespace},
            "data": {"replicas": widget.spec.replicas.to_string()},
        }))
        .unwrap();
        kube::Api::namespaced(self.0.clone(), &key.namespace)
            .create(&kube::api::PostParams::default(), &copy)
            .await?;
        Ok(kinject_runtime::controller::Action::await_change())
    }
}

/// A row may store a spoke's object; a reconciler of the hub reads it
/// converted, as the webhook would convert it.
#[tokio::test]
async fn a_table_converts_a_rows_spoke_object_for_a_reconciler_of_the_hub() {
    use kinject_testing::{Table, TableRow};
    let kinds = vec![
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<textual::Widget>().converted::<textual::Widget>(),
    ];
    let crds = kinject_types::registry::custom_resource_definitions(&kinds)
        .unwrap()
        .into_iter()
        .map(|definition| definition.crd)
        .collect();
    let spoke = serde_json::json!({"apiVersion": "tutorial.example.com/v1alpha3", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns"}, "spec": {"replicas": "3"}});
    let row = TableRow {
        name: "a v1alpha3 Widget",
        objects: vec![spoke],
        key: "ns/w",
        want_creates: vec![serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "w", "namespace": "ns"}, "data": {"replicas": "3"}})],
        ..TableRow::default()
    };
    let constructor = |ctx: &kinject_runtime::injection::Context| {
        kinject_runtime::controller::Impl::new("copier", Copier(ctx.client()), Default::default())
    };
    let table = Table {
        crds,
        kinds,
        rows: vec![],
    };
    table.run_one(&row, &constructor).await.unwrap();
    // Without the kinds, the object is only relabelled, and the hub cannot
    // read text as its count.
    let table = Table {
        kinds: Vec::new(),
        ..table
    };
    assert!(table.run_one(&row, &constructor).await.is_err());
}
