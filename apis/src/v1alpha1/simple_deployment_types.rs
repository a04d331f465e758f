use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;
use kinject_types::duck::v1::{DuckStatus, Status};
use kube_core::ObjectList;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// SimpleDeployment runs a number of identical pods of one image and reports how
/// many of them are ready.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(
    group = "samples.knative.dev",
    version = "v1alpha1",
    namespaced,
    shortnames = ["sdeploy"],
    categories = ["all", "knative"]
)]
#[genclient]
#[genreconciler]
pub struct SimpleDeployment {
    /// Standard object metadata.
    pub metadata: ObjectMeta,

    /// The desired state of the SimpleDeployment, written by its user.
    pub spec: SimpleDeploymentSpec,

    /// The observed state of the SimpleDeployment, written by the controller.
    pub status: Option<SimpleDeploymentStatus>,
}

/// The desired state of a SimpleDeployment.
///
/// Its fields decode when missing, as Go's zero values do, so validation can
/// name them in Knative's words; the CRD still requires them, as Knative's does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["image", "replicas"]))]
pub struct SimpleDeploymentSpec {
    /// The container image every pod runs.
    #[serde(default)]
    pub image: String,

    /// How many pods to run; at least 0.
    #[serde(default)]
    pub replicas: i32,
}

/// The observed state of a SimpleDeployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["readyReplicas"]))]
pub struct SimpleDeploymentStatus {
    #[serde(flatten)]
    pub status: Status,

    /// How many of the pods are ready. Always written, even when 0.
    #[serde(default)]
    pub ready_replicas: i32,
}

impl DuckStatus for SimpleDeploymentStatus {
    fn duck(&self) -> &Status {
        &self.status
    }
    fn duck_mut(&mut self) -> &mut Status {
        &mut self.status
    }
}

/// A list of SimpleDeployments, as the API server returns it.
pub type SimpleDeploymentList = ObjectList<SimpleDeployment>;
