//! An `[[external]]` given by its k8s-openapi path alone gets the group,
//! version, kind and plural k8s-openapi's `Resource` says, for a kind of every
//! API group and the plurals English gets wrong.

use k8s_openapi::Resource;
use kinject_codegen::ExternalKind;

fn derived_matches_resource<K: Resource>(path: &str) {
    let derived = ExternalKind::from_k8s_openapi_path(path)
        .unwrap_or_else(|| panic!("{path} is a k8s-openapi kind path"));
    assert_eq!(
        (
            derived.group.as_str(),
            derived.version.as_str(),
            derived.kind.as_str(),
            derived.plural.as_str()
        ),
        (K::GROUP, K::VERSION, K::KIND, K::URL_PATH_SEGMENT),
        "{path}"
    );
}

macro_rules! check {
    ($($kind:path),* $(,)?) => {
        $(derived_matches_resource::<$kind>(stringify!($kind));)*
    };
}

#[test]
fn every_group_and_plural_agrees_with_k8s_openapi() {
    check!(
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion,
        k8s_openapi::api::apps::v1::Deployment,
        k8s_openapi::api::apps::v1::StatefulSet,
        k8s_openapi::api::authentication::v1::TokenReview,
        k8s_openapi::api::authorization::v1::SubjectAccessReview,
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
        k8s_openapi::api::batch::v1::Job,
        k8s_openapi::api::batch::v1::CronJob,
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
        k8s_openapi::api::coordination::v1::Lease,
        k8s_openapi::api::core::v1::Pod,
        k8s_openapi::api::core::v1::Endpoints,
        k8s_openapi::api::core::v1::ComponentStatus,
        k8s_openapi::api::core::v1::Namespace,
        k8s_openapi::api::discovery::v1::EndpointSlice,
        k8s_openapi::api::events::v1::Event,
        k8s_openapi::api::flowcontrol::v1::FlowSchema,
        k8s_openapi::api::networking::v1::NetworkPolicy,
        k8s_openapi::api::networking::v1::Ingress,
        k8s_openapi::api::networking::v1::IngressClass,
        k8s_openapi::api::node::v1::RuntimeClass,
        k8s_openapi::api::policy::v1::PodDisruptionBudget,
        k8s_openapi::api::rbac::v1::ClusterRole,
        k8s_openapi::api::resource::v1beta1::DeviceClass,
        k8s_openapi::api::scheduling::v1::PriorityClass,
        k8s_openapi::api::storage::v1::StorageClass,
        k8s_openapi::api::storage::v1::CSIStorageCapacity,
        k8s_openapi::api::storagemigration::v1alpha1::StorageVersionMigration,
    );
}

#[test]
fn other_paths_are_not_guessed() {
    for path in [
        "apis::v1alpha1::AddressableService",
        "k8s_openapi::api::core::Pod",
        "k8s_openapi::api::widgets::v1::Widget",
        "k8s_openapi::api::core::one::Pod",
    ] {
        assert_eq!(ExternalKind::from_k8s_openapi_path(path), None, "{path}");
    }
}
