//! A kind's CRD markers as values: what `#[derive(Kind)]` makes of each
//! `#[kind(...)]` key (and of a `status` field), each applying itself to the
//! kind's CustomResourceDefinition.
//!
//! The derive emits a kind's markers as [`KindInfo::MARKERS`](crate::KindInfo::MARKERS),
//! and [`custom_resource_definition`](crate::crd::custom_resource_definition)
//! folds them over a base CRD made from the kind's `kube::Resource` identity
//! and schema: first [`apply_to_schema`](CrdMarker::apply_to_schema) on the
//! schema, then [`apply_to_crd`](CrdMarker::apply_to_crd) on the CRD. A new
//! marker is a variant here with its two arms, beside the `kinject-model`
//! type that parses it.
//!
//! ```
//! use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
//!     CustomResourceDefinition, CustomResourceDefinitionVersion,
//! };
//! use kinject_types::CrdMarker;
//!
//! let mut crd = CustomResourceDefinition::default();
//! crd.spec.versions.push(CustomResourceDefinitionVersion::default());
//! for marker in [CrdMarker::ClusterScoped, CrdMarker::ShortNames(&["wd"]), CrdMarker::StatusSubresource] {
//!     marker.apply_to_crd(&mut crd);
//! }
//! assert_eq!(crd.spec.scope, "Cluster");
//! assert_eq!(crd.spec.names.short_names, Some(vec!["wd".to_owned()]));
//! assert!(crd.spec.versions[0].subresources.as_ref().is_some_and(|s| s.status.is_some()));
//! ```

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionVersion,
    CustomResourceSubresourceScale, CustomResourceSubresourceStatus, CustomResourceSubresources,
};
use serde_json::Value;

use crate::schema::cap_descriptions;

/// One marker of a kind, as it shapes the kind's CRD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CrdMarker {
    /// `singular = ".."`, by default the kind in lower case: `spec.names.singular`.
    Singular(&'static str),
    /// `namespaced`: `spec.scope: Namespaced`, which is also a CRD's scope
    /// without a scope marker.
    Namespaced,
    /// `cluster_scoped`: `spec.scope: Cluster`.
    ClusterScoped,
    /// `shortnames = [..]`: `spec.names.shortNames`, names `kubectl get` accepts.
    ShortNames(&'static [&'static str]),
    /// `categories = [..]`: `spec.names.categories`, lists `kubectl get` shows
    /// the kind in.
    Categories(&'static [&'static str]),
    /// `printcolumn(..)`: a column `kubectl get` shows, after those of the
    /// markers before it and before the generated Ready, Reason and Age.
    PrintColumn(PrinterColumn),
    /// `scale(..)`: the scale subresource.
    Scale(ScalePaths),
    /// `max_description_len = N`: every description in the schema cut to `N`
    /// bytes (0 drops them; controller-gen's `maxDescLen`).
    MaxDescriptionLen(usize),
    /// `storage`: of several versions of the kind, this one is what the API
    /// server stores. A CRD of one version is stored in it regardless; the
    /// registry reads the marker to merge versions into one CRD.
    Storage,
    /// `hub`: of several versions of the kind, the one every other converts
    /// to and from (see [`conversion`](crate::conversion)); the stored
    /// version unless another says `storage`.
    Hub,
    /// A `status` field: the status subresource, through which the status is
    /// written apart from the rest of the object.
    StatusSubresource,
}

/// A column `kubectl get` shows: `printcolumn(name = .., type = .., json_path = ..)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The header (`Replicas`).
    pub name: &'static str,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: &'static str,
    /// Where the value is, from the object (`.spec.replicas`).
    pub json_path: &'static str,
    /// What the column means; empty for none.
    pub description: &'static str,
    /// An OpenAPI format refining the type (`int32`, `date-time`); empty for none.
    pub format: &'static str,
    /// 0 shows the column always; higher shows it only with `kubectl get -o wide`.
    pub priority: i32,
}

/// Where the scale subresource (`kubectl scale`, a HorizontalPodAutoscaler)
/// reads and writes replicas: `scale(spec_replicas = .., status_replicas = ..)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas (`.spec.replicas`).
    pub spec_replicas: &'static str,
    /// The observed replicas (`.status.replicas`).
    pub status_replicas: &'static str,
    /// A label selector in string form, for autoscalers (`.status.selector`); empty for none.
    pub label_selector: &'static str,
}

impl CrdMarker {
    /// Applies the marker to the kind's `openAPIV3Schema`, before it becomes
    /// part of the CRD.
    pub fn apply_to_schema(&self, schema: &mut Value) {
        if let CrdMarker::MaxDescriptionLen(max) = *self {
            cap_descriptions(schema, max);
        }
    }

    /// Applies the marker to the kind's CRD, each of whose versions is the
    /// kind's.
    pub fn apply_to_crd(&self, crd: &mut CustomResourceDefinition) {
        let spec = &mut crd.spec;
        match *self {
            CrdMarker::Singular(singular) => spec.names.singular = Some(singular.to_owned()),
            CrdMarker::Namespaced => "Namespaced".clone_into(&mut spec.scope),
            CrdMarker::ClusterScoped => "Cluster".clone_into(&mut spec.scope),
            CrdMarker::ShortNames(names) => spec.names.short_names = strings(names),
            CrdMarker::Categories(names) => spec.names.categories = strings(names),
            CrdMarker::PrintColumn(column) => {
                for version in &mut spec.versions {
                    let columns = version.additional_printer_columns.get_or_insert_default();
                    columns.push(column.definition());
                }
            }
            CrdMarker::Scale(paths) => {
                for version in &mut spec.versions {
                    subresources(version).scale = Some(paths.subresource());
                }
            }
            CrdMarker::StatusSubresource => {
                for version in &mut spec.versions {
                    let status = CustomResourceSubresourceStatus(Value::Object(serde_json::Map::new()));
                    subresources(version).status = Some(status);
                }
            }
            CrdMarker::Storage => {
                for version in &mut spec.versions {
                    version.storage = true;
                }
            }
            CrdMarker::MaxDescriptionLen(_) | CrdMarker::Hub => {}
        }
    }
}

/// What the markers say of a kind's names and scope, for the constants of
/// [`KindInfo`](crate::KindInfo) (`const`, so they stay constants). The last
/// marker of a type wins, as it does when applied to the CRD.
impl CrdMarker {
    /// The `Singular` name; empty without one.
    pub const fn singular_of(markers: &[CrdMarker]) -> &'static str {
        let (mut found, mut i) = ("", 0);
        while i < markers.len() {
            if let CrdMarker::Singular(singular) = markers[i] {
                found = singular;
            }
            i += 1;
        }
        found
    }

    /// The `ShortNames`; none without the marker.
    pub const fn short_names_of(markers: &[CrdMarker]) -> &'static [&'static str] {
        let (mut found, mut i): (&'static [&'static str], usize) = (&[], 0);
        while i < markers.len() {
            if let CrdMarker::ShortNames(names) = markers[i] {
                found = names;
            }
            i += 1;
        }
        found
    }

    /// The `Categories`; none without the marker.
    pub const fn categories_of(markers: &[CrdMarker]) -> &'static [&'static str] {
        let (mut found, mut i): (&'static [&'static str], usize) = (&[], 0);
        while i < markers.len() {
            if let CrdMarker::Categories(names) = markers[i] {
                found = names;
            }
            i += 1;
        }
        found
    }

    /// False when the scope markers end in `ClusterScoped`.
    pub const fn namespaced_of(markers: &[CrdMarker]) -> bool {
        let (mut namespaced, mut i) = (true, 0);
        while i < markers.len() {
            match markers[i] {
                CrdMarker::Namespaced => namespaced = true,
                CrdMarker::ClusterScoped => namespaced = false,
                _ => {}
            }
            i += 1;
        }
        namespaced
    }
}

impl PrinterColumn {
    fn definition(&self) -> CustomResourceColumnDefinition {
        let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        CustomResourceColumnDefinition {
            name: self.name.to_owned(),
            type_: self.type_.to_owned(),
            json_path: self.json_path.to_owned(),
            description: text(self.description),
            format: text(self.format),
            priority: (self.priority != 0).then_some(self.priority),
        }
    }
}

impl ScalePaths {
    fn subresource(&self) -> CustomResourceSubresourceScale {
        CustomResourceSubresourceScale {
            spec_replicas_path: self.spec_replicas.to_owned(),
            status_replicas_path: self.status_replicas.to_owned(),
            label_selector_path: (!self.label_selector.is_empty()).then(|| self.label_selector.to_owned()),
        }
    }
}

fn subresources(version: &mut CustomResourceDefinitionVersion) -> &mut CustomResourceSubresources {
    version.subresources.get_or_insert_default()
}

/// An empty list is left out of the CRD, as if the marker were not there.
fn strings(items: &[&str]) -> Option<Vec<String>> {
    (!items.is_empty()).then(|| items.iter().map(|s| (*s).to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinition, CustomResourceDefinitionVersion,
    };
    use serde_json::{Value, json};

    use super::{CrdMarker, PrinterColumn, ScalePaths};

    /// The spec of a CRD of one version, with `markers` applied.
    fn spec_with(markers: &[CrdMarker]) -> Value {
        let mut crd = CustomResourceDefinition::default();
        crd.spec.versions.push(CustomResourceDefinitionVersion {
            name: "v1".to_owned(),
            ..CustomResourceDefinitionVersion::default()
        });
        for marker in markers {
            marker.apply_to_crd(&mut crd);
        }
        let mut spec = serde_json::to_value(crd).unwrap()["spec"].take();
        let version = spec["versions"][0].as_object_mut().unwrap();
        version.retain(|key, _| !matches!(key.as_str(), "name" | "served"));
        spec
    }

    /// `value` without the field at `pointer`.
    fn without(mut value: Value, pointer: &str) -> Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        if let Some(Value::Object(fields)) = value.pointer_mut(parent) {
            fields.remove(key);
        }
        value
    }

    #[test]
    fn each_marker_sets_its_part_of_the_crd_and_nothing_else() {
        let column = PrinterColumn {
            name: "Size",
            type_: "integer",
            json_path: ".spec.size",
            description: "",
            format: "int32",
            priority: 1,
        };
        let scale = ScalePaths {
            spec_replicas: ".spec.replicas",
            status_replicas: ".status.replicas",
            label_selector: "",
        };
        let unchanged = spec_with(&[]);
        for (marker, part, want) in [
            (CrdMarker::Singular("widget"), "/names/singular", json!("widget")),
            (CrdMarker::ClusterScoped, "/scope", json!("Cluster")),
            (CrdMarker::Namespaced, "/scope", json!("Namespaced")),
            (CrdMarker::ShortNames(&["wd"]), "/names/shortNames", json!(["wd"])),
            (
                CrdMarker::Categories(&["all"]),
                "/names/categories",
                json!(["all"]),
            ),
            (
                CrdMarker::PrintColumn(column),
                "/versions/0/additionalPrinterColumns",
                json!([{"name": "Size", "type": "integer", "jsonPath": ".spec.size", "format": "int32", "priority": 1}]),
            ),
            (
                CrdMarker::Scale(scale),
                "/versions/0/subresources",
                json!({"scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}),
            ),
            (
                CrdMarker::StatusSubresource,
                "/versions/0/subresources",
                json!({"status": {}}),
            ),
            (CrdMarker::Storage, "/versions/0/storage", json!(true)),
        ] {
            let spec = spec_with(&[marker]);
            assert_eq!(spec.pointer(part), Some(&want), "{marker:?}");
            assert_eq!(
                without(spec, part),
                without(unchanged.clone(), part),
                "{marker:?} changed more"
            );
        }
        assert_eq!(spec_with(&[CrdMarker::MaxDescriptionLen(0)]), unchanged);
    }

    #[test]
    fn columns_and_subresources_add_up_in_marker_order() {
        let column = |name| {
            CrdMarker::PrintColumn(PrinterColumn {
                name,
                type_: "string",
                json_path: ".spec.a",
                description: "",
                format: "",
                priority: 0,
            })
        };
        let scale = CrdMarker::Scale(ScalePaths {
            spec_replicas: ".spec.replicas",
            status_replicas: ".status.replicas",
            label_selector: ".status.selector",
        });
        let spec = spec_with(&[column("B"), scale, column("A"), CrdMarker::StatusSubresource]);
        let version = &spec["versions"][0];
        assert_eq!(version["additionalPrinterColumns"][0]["name"], "B");
        assert_eq!(version["additionalPrinterColumns"][1]["name"], "A");
        assert_eq!(version["subresources"]["status"], json!({}));
        assert_eq!(
            version["subresources"]["scale"]["labelSelectorPath"],
            ".status.selector"
        );
    }

    #[test]
    fn max_description_len_cuts_the_schema() {
        let mut schema = json!({"description": "A widget that does things", "type": "object"});
        CrdMarker::MaxDescriptionLen(8).apply_to_schema(&mut schema);
        assert_eq!(schema["description"], "A...");
        CrdMarker::Storage.apply_to_schema(&mut schema);
        assert_eq!(schema["description"], "A...");
    }

    #[test]
    fn the_constants_read_the_last_marker_of_each_type() {
        const MARKERS: &[CrdMarker] = &[
            CrdMarker::Singular("first"),
            CrdMarker::ShortNames(&["f"]),
            CrdMarker::ClusterScoped,
            CrdMarker::Singular("widget"),
            CrdMarker::Categories(&["all"]),
        ];
        const SINGULAR: &str = CrdMarker::singular_of(MARKERS);
        assert_eq!(SINGULAR, "widget");
        assert_eq!(CrdMarker::short_names_of(MARKERS), ["f"]);
        assert_eq!(CrdMarker::categories_of(MARKERS), ["all"]);
        assert!(!CrdMarker::namespaced_of(MARKERS));
        assert!(CrdMarker::namespaced_of(&[]));
        assert_eq!(CrdMarker::singular_of(&[]), "");
        assert!(CrdMarker::short_names_of(&[]).is_empty());
    }
}
