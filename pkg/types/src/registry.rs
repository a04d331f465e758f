//! The custom resource kinds of an application as values, so tools and tests
//! read one list: `hack/update-codegen.sh` writes it (`generated::registry`)
//! from the API types, and `schema`, the CRD output and the tests that count
//! kinds or CRDs use it instead of naming kinds by hand.
//!
//! An entry also says whether the kind has a [`Defaultable`] or
//! [`Validatable`] hook (the generator sees the `impl`), and carries them as
//! functions over JSON, so an admission webhook defaults and validates every
//! registered kind without being generic over them:
//!
//! ```
//! use kinject_types::registry::CustomKind;
//! # use kinject_types::{Defaultable, FieldError, Validatable};
//! # #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! # #[serde(default)]
//! # struct Widget { #[schemars(skip)] metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, size: i32 }
//! # impl kube_core::Resource for Widget {
//! #     type DynamicType = (); type Scope = kube_core::NamespaceResourceScope;
//! #     fn kind(_: &()) -> std::borrow::Cow<'_, str> { "Widget".into() }
//! #     fn group(_: &()) -> std::borrow::Cow<'_, str> { "example.dev".into() }
//! #     fn version(_: &()) -> std::borrow::Cow<'_, str> { "v1".into() }
//! #     fn plural(_: &()) -> std::borrow::Cow<'_, str> { "widgets".into() }
//! #     fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta { &self.metadata }
//! #     fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta { &mut self.metadata }
//! # }
//! # impl kinject_types::KindInfo for Widget {
//! #     const MARKERS: &'static [kinject_types::CrdMarker] =
//! #         &[kinject_types::CrdMarker::Singular("widget"), kinject_types::CrdMarker::Namespaced];
//! # }
//! impl Defaultable for Widget {
//!     fn set_defaults(&mut self) { if self.size == 0 { self.size = 1 } }
//! }
//! impl Validatable for Widget {
//!     fn validate(&self) -> Result<(), FieldError> {
//!         if self.size < 0 { Err(FieldError::invalid_value(self.size, "size")) } else { Ok(()) }
//!     }
//! }
//!
//! let widget = CustomKind::of::<Widget>().defaulted::<Widget>().validated::<Widget>();
//! let defaulted = widget.set_defaults(&serde_json::json!({"metadata": {}})).unwrap().unwrap();
//! assert_eq!(defaulted["size"], 1);
//! let problems = widget.validate(&serde_json::json!({"metadata": {}, "size": -1})).unwrap().unwrap();
//! assert_eq!(problems.unwrap_err().to_string(), "invalid value: -1: size");
//! let unknown = widget.validate(&serde_json::json!({"metadata": {"nmae": "x"}})).unwrap();
//! assert_eq!(unknown.unwrap_err().to_string(), "json: unknown field \"metadata.nmae\"");
//! ```

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::conversion::{self, ConversionError, Convertible};
use crate::crd::{crd_schema, custom_resource_definition};
use crate::marker::CrdMarker;
use crate::schema::{RuleSite, openapi_v3_schema_and_rule_sites};
use crate::{Defaultable, FieldError, KindInfo, Validatable};

/// One custom resource kind: its identity, from its `#[kind]` markers, and
/// how to build its schema and CRD.
#[derive(Clone, Debug)]
pub struct CustomKind {
    /// `AddressableService`.
    pub kind: String,
    /// `samples.knative.dev`.
    pub group: String,
    /// `v1alpha1`.
    pub version: String,
    /// `addressableservices`.
    pub plural: String,
    /// Namespaced (else cluster-scoped).
    pub namespaced: bool,
    /// Of several versions of the kind, the one the API server stores (the
    /// `storage` marker).
    pub storage: bool,
    /// Of several versions of the kind, the one every other converts through
    /// (the `hub` marker; see [`conversion`]).
    pub hub: bool,
    /// Where the type is declared (`apis/src/v1alpha1/widget_types.rs`),
    /// for errors about its CRD; empty when not known.
    pub defined_at: String,
    schema: fn() -> Value,
    rule_sites: fn() -> Vec<RuleSite>,
    crd: fn() -> Result<CustomResourceDefinition, serde_json::Error>,
    decode: fn(&Value) -> Result<(), DecodeError>,
    canonical: fn(&Value) -> Result<Value, DecodeError>,
    defaults: Option<DefaultsHook>,
    validate: Option<ValidateHook>,
    conversions: Option<Conversions>,
}

/// A spoke version's conversions over JSON: to its hub, and from it.
#[derive(Clone, Copy, Debug)]
struct Conversions {
    to_hub: fn(&Value) -> Result<Value, ConversionError>,
    from_hub: fn(&Value) -> Result<Value, ConversionError>,
}

/// A kind's `Defaultable` hook over JSON: the object decoded, defaulted and
/// encoded again.
type DefaultsHook = fn(&Value) -> Result<Value, DecodeError>;
/// A kind's `Validatable` hook over JSON: the object decoded and validated.
type ValidateHook = fn(&Value) -> Result<Result<(), FieldError>, DecodeError>;

/// JSON that does not decode into a kind's Rust type: Go's `encoding/json`
/// messages, as Knative's webhook (which decodes with
/// `DisallowUnknownFields`) answers them, with the field's whole path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A field the type does not have (a typo, or a field of a newer version).
    #[error("json: unknown field {0:?}")]
    UnknownField(String),
    /// A value of the wrong type or shape.
    #[error("json: {}{message}", at(.path))]
    Invalid {
        /// Where (`spec.replicas`), `.` for the whole object.
        path: String,
        /// What is wrong.
        message: String,
    },
}

fn at(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// Decodes `object` into `K`, refusing fields `K` does not have.
pub fn decode_strict<K: DeserializeOwned>(object: &Value) -> Result<K, DecodeError> {
    let mut unknown = None;
    let decoded = {
        let mut record = |path: serde_ignored::Path<'_>| {
            unknown.get_or_insert_with(|| field_path(&path));
        };
        let ignored = serde_ignored::Deserializer::new(object, &mut record);
        serde_path_to_error::deserialize::<_, K>(ignored)
    };
    if let Some(field) = unknown {
        return Err(DecodeError::UnknownField(field));
    }
    decoded.map_err(|e| DecodeError::Invalid {
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

/// `spec.ports[0].name`: serde_ignored's path without its `?` for options.
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => match field_path(parent) {
            parent if parent.is_empty() => key.clone(),
            parent => format!("{parent}.{key}"),
        },
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
            field_path(parent)
        }
    }
}

fn rule_sites_of<K: JsonSchema>() -> Vec<RuleSite> {
    openapi_v3_schema_and_rule_sites::<K>().1
}

fn decode_json<K: DeserializeOwned>(object: &Value) -> Result<(), DecodeError> {
    decode_strict::<K>(object).map(drop)
}

fn canonical_json<K: Serialize + DeserializeOwned>(object: &Value) -> Result<Value, DecodeError> {
    let decoded: K = decode_strict(object)?;
    serde_json::to_value(&decoded).map_err(|e| DecodeError::Invalid {
        path: ".".into(),
        message: e.to_string(),
    })
}

fn defaults_json<K: Defaultable + Serialize + DeserializeOwned>(
    object: &Value,
) -> Result<Value, DecodeError> {
    let mut decoded: K = decode_strict(object)?;
    decoded.set_defaults();
    serde_json::to_value(&decoded).map_err(|e| DecodeError::Invalid {
        path: ".".into(),
        message: e.to_string(),
    })
}

fn validate_json<K: Validatable + DeserializeOwned>(
    object: &Value,
) -> Result<Result<(), FieldError>, DecodeError> {
    Ok(decode_strict::<K>(object)?.validate())
}

impl CustomKind {
    /// The entry of kind `K`.
    pub fn of<K: KindInfo + JsonSchema + Serialize + DeserializeOwned>() -> Self {
        CustomKind {
            kind: K::kind(&()).into_owned(),
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            namespaced: K::NAMESPACED,
            storage: K::MARKERS.contains(&CrdMarker::Storage),
            hub: K::MARKERS.contains(&CrdMarker::Hub),
            defined_at: String::new(),
            schema: crd_schema::<K>,
            rule_sites: rule_sites_of::<K>,
            crd: custom_resource_definition::<K>,
            decode: decode_json::<K>,
            canonical: canonical_json::<K>,
            defaults: None,
            validate: None,
            conversions: None,
        }
    }

    /// The same entry, with the conversions of `S` (the kind of
    /// [`of`](Self::of), a spoke) to and from its hub. The generated
    /// registry adds them to every version of a kind with a hub but the hub,
    /// so a spoke without [`Convertible`] does not compile, with a note that
    /// says what to write:
    ///
    /// ```compile_fail,E0277
    /// # use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// # use kinject_macros::Kind;
    /// # use kinject_types::registry::CustomKind;
    /// #[derive(Kind, Clone, Debug, Default, PartialEq)]
    /// #[kind(group = "example.com", version = "v1alpha1", namespaced)]
    /// pub struct Mirror {
    ///     pub metadata: ObjectMeta,
    /// }
    ///
    /// let entry = CustomKind::of::<Mirror>().converted::<Mirror>();
    /// ```
    pub fn converted<S: Convertible>(mut self) -> Self {
        self.conversions = Some(Conversions {
            to_hub: conversion::spoke_to_hub_json::<S>,
            from_hub: conversion::hub_to_spoke_json::<S>,
        });
        self
    }

    /// True when the entry carries its version's conversions to and from
    /// the kind's hub.
    pub fn is_converted(&self) -> bool {
        self.conversions.is_some()
    }

    /// The same entry, with `K`'s [`Defaultable`] hook (`K` is the kind of
    /// [`of`](Self::of)).
    pub fn defaulted<K: KindInfo + Defaultable + Serialize + DeserializeOwned>(mut self) -> Self {
        self.defaults = Some(defaults_json::<K>);
        self
    }

    /// The same entry, saying where the type is declared (the file).
    pub fn defined_at(mut self, place: &str) -> Self {
        place.clone_into(&mut self.defined_at);
        self
    }

    /// The same entry, with `K`'s [`Validatable`] hook (`K` is the kind of
    /// [`of`](Self::of)).
    pub fn validated<K: KindInfo + Validatable + DeserializeOwned>(mut self) -> Self {
        self.validate = Some(validate_json::<K>);
        self
    }

    /// True when the kind has a [`Defaultable`] hook.
    pub fn is_defaulted(&self) -> bool {
        self.defaults.is_some()
    }

    /// True when the kind has a [`Validatable`] hook.
    pub fn is_validated(&self) -> bool {
        self.validate.is_some()
    }

    /// Checks that `object` decodes into the kind's type with no unknown field.
    pub fn decode(&self, object: &Value) -> Result<(), DecodeError> {
        (self.decode)(object)
    }

    /// `object` as the kind's type writes it: decoded and encoded again, so
    /// fields the type fills in when absent are there.
    pub fn canonical(&self, object: &Value) -> Result<Value, DecodeError> {
        (self.canonical)(object)
    }

    /// `object` decoded, defaulted and encoded again; `None` when the kind has
    /// no [`Defaultable`] hook.
    pub fn set_defaults(&self, object: &Value) -> Option<Result<Value, DecodeError>> {
        self.defaults.map(|defaults| defaults(object))
    }

    /// What the kind's [`Validatable`] hook says of `object`; `None` when it
    /// has none.
    pub fn validate(&self, object: &Value) -> Option<Result<Result<(), FieldError>, DecodeError>> {
        self.validate.map(|validate| validate(object))
    }

    /// The kind's `openAPIV3Schema` exactly as its CRD carries it (see
    /// [`crd_schema`]).
    pub fn schema(&self) -> Value {
        (self.schema)()
    }

    /// Where each of the schema's `#[rule]` markers is, for errors about
    /// the rules (see [`RuleSite`]).
    pub fn rule_sites(&self) -> Vec<RuleSite> {
        (self.rule_sites)()
    }

    /// The kind's CustomResourceDefinition (see [`custom_resource_definition`]).
    pub fn crd(&self) -> Result<CustomResourceDefinition, serde_json::Error> {
        (self.crd)()
    }
}

/// One CustomResourceDefinition of an application: a kind with a version for
/// each of its entries in the registry.
#[derive(Clone, Debug, PartialEq)]
pub struct KindDefinition {
    /// `AddressableService`.
    pub kind: String,
    /// The CRD, its versions in Kubernetes' priority order (`v1`, `v1beta1`,
    /// `v1alpha1`), served with the `None` conversion strategy: the API
    /// server only rewrites `apiVersion`, so versions must share their
    /// fields (a field one version lacks is dropped when written through it).
    pub crd: CustomResourceDefinition,
    /// `file:line` of each version's type, for errors.
    pub defined_at: Vec<String>,
    /// For each version (by name), where its schema's `#[rule]` markers
    /// are, for errors about the rules.
    pub rule_sites: Vec<(String, Vec<RuleSite>)>,
    /// The version the others convert through, when one says `hub`: the
    /// CRD's conversion is then the webhook's (see
    /// [`conversion::WEBHOOK_PATH`]), which the manifests name.
    pub hub: Option<String>,
}

/// Why the CRD of a kind cannot be built from its registry entries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DefinitionError(String);

/// The CRDs of `kinds`: one per group and kind, in the order of their first
/// entry. A kind with several versions needs exactly one marked `storage`,
/// and its versions must agree on names and scope, which a CRD holds once.
pub fn custom_resource_definitions(kinds: &[CustomKind]) -> Result<Vec<KindDefinition>, DefinitionError> {
    let mut groups: Vec<Vec<&CustomKind>> = Vec::new();
    for kind in kinds {
        match groups
            .iter_mut()
            .find(|g| g[0].group == kind.group && g[0].kind == kind.kind)
        {
            Some(group) => group.push(kind),
            None => groups.push(vec![kind]),
        }
    }
    groups.into_iter().map(|versions| definition(&versions)).collect()
}

fn definition(versions: &[&CustomKind]) -> Result<KindDefinition, DefinitionError> {
    let first = versions[0];
    let place = |k: &CustomKind| {
        if k.defined_at.is_empty() {
            k.version.clone()
        } else {
            format!("{} ({})", k.version, k.defined_at)
        }
    };
    let listed = || versions.iter().map(|k| place(k)).collect::<Vec<_>>().join(", ");
    let hub = hub_of(versions, &listed)?;
    let stored: Vec<&&CustomKind> = versions.iter().filter(|k| k.storage).collect();
    let storage = match (versions.len(), stored.as_slice(), hub) {
        (1, _, _) => first,
        (_, [one], _) => one,
        // The hub is stored unless another version says `storage`.
        (_, [], Some(hub)) => hub,
        (_, many, _) => {
            return Err(DefinitionError(format!(
                "{}.{} has versions {} and {} of them marked `storage`; add `storage` to the #[kind(...)] \
                 of the one version the API server stores, and only to it",
                first.kind,
                first.group,
                listed(),
                if many.is_empty() {
                    "none".to_owned()
                } else {
                    many.len().to_string()
                },
            )));
        }
    };
    let build = |k: &CustomKind| {
        k.crd()
            .map_err(|e| DefinitionError(format!("{}: cannot build the CRD of {}: {e}", place(k), k.kind)))
    };
    let mut built = versions
        .iter()
        .map(|kind| Ok((*kind, build(kind)?)))
        .collect::<Result<Vec<_>, DefinitionError>>()?;
    let base = built
        .iter()
        .position(|(kind, _)| std::ptr::eq(*kind, storage))
        .unwrap_or_default();
    let mut crd = built.swap_remove(base).1;
    let mut served = std::mem::take(&mut crd.spec.versions);
    for (_, own) in built {
        if (&own.spec.names, &own.spec.scope) != (&crd.spec.names, &crd.spec.scope) {
            return Err(DefinitionError(format!(
                "the versions of {}.{} disagree on their names or scope ({}); a CRD has them once: give \
                 every version the same plural, singular, shortnames, categories and scope",
                first.kind,
                first.group,
                listed(),
            )));
        }
        served.extend(own.spec.versions.into_iter().map(|mut version| {
            version.storage = false;
            version
        }));
    }
    served.sort_by_key(|version| std::cmp::Reverse(version_priority(&version.name)));
    crd.spec.versions = served;
    Ok(KindDefinition {
        kind: first.kind.clone(),
        crd,
        defined_at: versions.iter().map(|k| k.defined_at.clone()).collect(),
        rule_sites: versions
            .iter()
            .map(|k| (k.version.clone(), k.rule_sites()))
            .collect(),
        hub: hub.map(|hub| hub.version.clone()),
    })
}

/// The version of a kind that every other converts through, if one says
/// `hub`; every other version must then carry its conversions.
fn hub_of<'a>(
    versions: &[&'a CustomKind],
    listed: &dyn Fn() -> String,
) -> Result<Option<&'a CustomKind>, DefinitionError> {
    let first = versions[0];
    let hubs: Vec<&&CustomKind> = versions.iter().filter(|k| k.hub).collect();
    let hub = match hubs.as_slice() {
        [] => return Ok(None),
        [one] => **one,
        many => {
            return Err(DefinitionError(format!(
                "{}.{} has versions {} and {} of them marked `hub`; a kind converts through one hub: keep \
                 `hub` on the #[kind(...)] of one version",
                first.kind,
                first.group,
                listed(),
                many.len()
            )));
        }
    };
    let unconverted: Vec<&str> = versions
        .iter()
        .filter(|k| !k.hub && k.conversions.is_none())
        .map(|k| k.version.as_str())
        .collect();
    if !unconverted.is_empty() {
        return Err(DefinitionError(format!(
            "{}.{} converts through its hub {}, and its versions {} have no conversions in the registry; \
             implement kinject_types::conversion::Convertible for each and register it with \
             CustomKind::of::<T>().converted::<T>() (hack/update-codegen.sh does)",
            first.kind,
            first.group,
            hub.version,
            unconverted.join(", ")
        )));
    }
    Ok(Some(hub))
}

/// `object`, an object of any version of one of `kinds`, in version
/// `api_version` of its kind, as the conversion webhook answers the API
/// server: to the kind's hub with its version's conversion, from the hub
/// with the target version's, then defaulted by the target version's
/// [`Defaultable`] hook, as Knative's webhook does. A kind without a hub
/// converts as the CRD's `None` strategy does: only `apiVersion` changes.
pub fn convert(kinds: &[CustomKind], object: &Value, api_version: &str) -> Result<Value, ConversionError> {
    let malformed = |message: String| ConversionError::Malformed(message);
    let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default();
    let (kind, from_api_version) = (field("kind"), field("apiVersion"));
    let split = |api_version: &str| match api_version.rsplit_once('/') {
        Some((group, version)) => (group.to_owned(), version.to_owned()),
        None => (String::new(), api_version.to_owned()),
    };
    let ((group, from_version), (to_group, to_version)) = (split(from_api_version), split(api_version));
    if to_group != group {
        return Err(malformed(format!(
            "cannot convert {kind} {from_api_version} to another group's version, {api_version}"
        )));
    }
    let versions: Vec<&CustomKind> = kinds
        .iter()
        .filter(|k| k.kind == kind && k.group == group)
        .collect();
    let version_of = |version: &str| {
        versions
            .iter()
            .find(|k| k.version == version)
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = versions.iter().map(|k| k.version.as_str()).collect();
                if known.is_empty() {
                    malformed(format!("no kind {kind} in group {group:?} is registered here"))
                } else {
                    malformed(format!(
                        "{kind}.{group} has no version {version:?}; its versions are {}",
                        known.join(", ")
                    ))
                }
            })
    };
    let (from, to) = (version_of(&from_version)?, version_of(&to_version)?);
    let mut converted = match versions.iter().find(|k| k.hub) {
        _ if std::ptr::eq(from, to) => object.clone(),
        None => object.clone(),
        Some(_) => {
            let hub = match from.conversions {
                Some(spoke) => (spoke.to_hub)(object)?,
                None => object.clone(),
            };
            match to.conversions {
                Some(spoke) => (spoke.from_hub)(&hub)?,
                None => hub,
            }
        }
    };
    if let Some(fields) = converted.as_object_mut() {
        fields.insert("apiVersion".to_owned(), Value::String(api_version.to_owned()));
    }
    match to.set_defaults(&converted) {
        Some(defaulted) => defaulted.map_err(|e| malformed(e.to_string())),
        None => Ok(converted),
    }
}

/// Kubernetes' order of versions: GA before beta before alpha, then the
/// higher major, then the higher minor.
fn version_priority(version: &str) -> (u8, u64, u64) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let major = rest[..digits].parse().unwrap_or(0);
    let (stability, minor) = match &rest[digits..] {
        "" => (3, 0),
        tail => match tail.strip_prefix("beta").or_else(|| tail.strip_prefix("alpha")) {
            Some(minor) => (
                if tail.starts_with("beta") { 2 } else { 1 },
                minor.parse().unwrap_or(0),
            ),
            None => (0, 0),
        },
    };
    (stability, major, minor)
}

#[cfg(test)]
mod tests {
    use super::{CustomKind, version_priority};
    use crate::CrdMarker;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::borrow::Cow;

    /// A widget whose description is longer than its CRD keeps.
    #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code, reason = "only its schema is read")]
    struct Widget {
        #[schemars(skip)]
        #[serde(default)]
        metadata: ObjectMeta,
        /// How many things the widget holds, at most.
        size: i32,
    }

    impl kube_core::Resource for Widget {
        type DynamicType = ();
        type Scope = kube_core::NamespaceResourceScope;
        fn kind(_: &()) -> Cow<'_, str> {
            "Widget".into()
        }
        fn group(_: &()) -> Cow<'_, str> {
            "example.dev".into()
        }
        fn version(_: &()) -> Cow<'_, str> {
            "v1".into()
        }
        fn plural(_: &()) -> Cow<'_, str> {
            "widgets".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    impl crate::KindInfo for Widget {
        const MARKERS: &'static [CrdMarker] = &[CrdMarker::Namespaced, CrdMarker::MaxDescriptionLen(8)];
    }

    #[test]
    fn the_schema_of_an_entry_is_the_one_its_crd_carries() {
        let widget = CustomKind::of::<Widget>();
        let schema = widget.schema();
        assert_eq!(schema.pointer("/properties/size/description").unwrap(), "How...");
        // Through the CRD's typed schema, as the CRD holds it.
        let as_crd_holds_it = serde_json::to_value(
            serde_json::from_value::<
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
            >(schema)
            .unwrap(),
        )
        .unwrap();
        let crd = serde_json::to_value(widget.crd().unwrap()).unwrap();
        assert_eq!(
            crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            as_crd_holds_it
        );
    }

    #[test]
    fn versions_sort_as_kubernetes_sorts_them() {
        let mut versions = [
            "v1alpha1",
            "v2beta1",
            "v1",
            "v1beta2",
            "v2",
            "v1beta1",
            "v10alpha1",
            "foo",
        ];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            versions,
            [
                "v2",
                "v1",
                "v2beta1",
                "v1beta2",
                "v1beta1",
                "v10alpha1",
                "v1alpha1",
                "foo"
            ]
        );
    }
}
