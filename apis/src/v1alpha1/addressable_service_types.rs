use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;
use kinject_types::duck::v1::{Addressable, DuckStatus, Status};
use kube_core::ObjectList;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// AddressableService exposes a Kubernetes Service as an Addressable: its status
/// carries the URL at which the Service can be reached.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(
    group = "samples.knative.dev",
    version = "v1alpha1",
    namespaced,
    shortnames = ["asvc"],
    categories = ["all", "knative"],
    printcolumn(name = "Address", type = "string", json_path = ".status.address.url")
)]
#[genclient]
#[genreconciler]
pub struct AddressableService {
    /// Standard object metadata.
    pub metadata: ObjectMeta,

    /// The desired state of the AddressableService, written by its user.
    pub spec: AddressableServiceSpec,

    /// The observed state of the AddressableService, written by the controller.
    pub status: Option<AddressableServiceStatus>,
}

/// The desired state of an AddressableService.
///
/// `serviceName` decodes when missing, as Go's zero value does, so validation
/// can name it in Knative's words; the CRD still requires it, as Knative's does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["serviceName"]))]
pub struct AddressableServiceSpec {
    /// The name of the Kubernetes Service, in the same namespace, to expose as an Addressable.
    #[serde(default)]
    pub service_name: String,
}

/// The observed state of an AddressableService.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddressableServiceStatus {
    #[serde(flatten)]
    pub status: Status,

    /// Where the exposed Service can be reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Addressable>,
}

impl DuckStatus for AddressableServiceStatus {
    fn duck(&self) -> &Status {
        &self.status
    }
    fn duck_mut(&mut self) -> &mut Status {
        &mut self.status
    }
}

/// A list of AddressableServices, as the API server returns it.
pub type AddressableServiceList = ObjectList<AddressableService>;
