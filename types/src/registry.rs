//! The custom resource kinds of an application as values, so tools and tests
//! read one list: `hack/update-codegen.sh` writes it (`generated::registry`)
//! from the API types, and `schema`, the CRD output and the tests that count
//! kinds or CRDs use it instead of naming kinds by hand.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::JsonSchema;
use serde_json::Value;

use crate::KindInfo;
use crate::crd::custom_resource_definition;
use crate::schema::openapi_v3_schema;

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
    schema: fn() -> Value,
    crd: fn() -> Result<CustomResourceDefinition, serde_json::Error>,
}

impl CustomKind {
    /// The entry of kind `K`.
    pub fn of<K: KindInfo + JsonSchema>() -> Self {
        CustomKind {
            kind: K::kind(&()).into_owned(),
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            namespaced: K::NAMESPACED,
            schema: openapi_v3_schema::<K>,
            crd: custom_resource_definition::<K>,
        }
    }

    /// The kind's `openAPIV3Schema` (see [`openapi_v3_schema`]).
    pub fn schema(&self) -> Value {
        (self.schema)()
    }

    /// The kind's CustomResourceDefinition (see [`custom_resource_definition`]).
    pub fn crd(&self) -> Result<CustomResourceDefinition, serde_json::Error> {
        (self.crd)()
    }
}

/// The kind named `kind` (its `Kind`, as in a manifest) among `kinds`.
pub fn find<'a>(kinds: &'a [CustomKind], kind: &str) -> Option<&'a CustomKind> {
    kinds.iter().find(|k| k.kind == kind)
}
