//! Admission metrics with Knative's names and labels, so a dashboard made
//! for a Knative webhook shows this one: every review counted and timed by
//! the kind and resource it was about, its operation and whether it was
//! allowed.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use kube::core::admission::AdmissionRequest;

/// Knative's webhook tags.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    request_operation: String,
    kind_group: String,
    kind_version: String,
    kind_kind: String,
    resource_group: String,
    resource_version: String,
    resource_resource: String,
    resource_namespace: String,
    admission_allowed: String,
}

/// Knative's latency buckets, in milliseconds (5 ms to 5 s).
const LATENCY_BUCKETS_MS: [f64; 10] = [5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0];

/// `webhook_request_count_total` and `webhook_request_latencies` (ms).
#[derive(Clone, Debug)]
pub struct AdmissionMetrics {
    count: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS_MS)
}

impl AdmissionMetrics {
    /// Registers the families in `registry`; once per registry.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = AdmissionMetrics {
            count: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
        };
        registry.register(
            "webhook_request_count",
            "The number of requests that are routed to webhook",
            metrics.count.clone(),
        );
        registry.register(
            "webhook_request_latencies",
            "The response time in milliseconds",
            metrics.latency.clone(),
        );
        metrics
    }

    /// Counts and times one review of `request`.
    pub(crate) fn observe<T: kube::core::Resource>(
        &self,
        request: &AdmissionRequest<T>,
        allowed: bool,
        took: Duration,
    ) {
        let labels = Labels {
            request_operation: format!("{:?}", request.operation).to_uppercase(),
            kind_group: request.kind.group.clone(),
            kind_version: request.kind.version.clone(),
            kind_kind: request.kind.kind.clone(),
            resource_group: request.resource.group.clone(),
            resource_version: request.resource.version.clone(),
            resource_resource: request.resource.resource.clone(),
            resource_namespace: request.namespace.clone().unwrap_or_default(),
            admission_allowed: allowed.to_string(),
        };
        self.count.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(took.as_secs_f64() * 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Admit, Request, allowed, bad_request, review_response_measured};
    use kube::core::admission::AdmissionResponse;

    struct RefuseDeletes;

    impl Admit for RefuseDeletes {
        fn admit(&self, request: &Request) -> AdmissionResponse {
            match request.operation {
                kube::core::admission::Operation::Delete => bad_request(request, "no"),
                _ => allowed(request),
            }
        }
    }

    fn review(operation: &str) -> Vec<u8> {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "samples.knative.dev", "version": "v1alpha1", "kind": "Widget"},
                "resource": {"group": "samples.knative.dev", "version": "v1alpha1", "resource": "widgets"},
                "namespace": "team", "operation": operation, "userInfo": {"username": "admin"},
                "object": {"apiVersion": "samples.knative.dev/v1alpha1", "kind": "Widget", "metadata": {"name": "w"}},
            }
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn every_review_is_counted_and_timed_with_knatives_labels() {
        let mut registry = Registry::default();
        let metrics = AdmissionMetrics::register(&mut registry);
        for operation in ["CREATE", "CREATE", "DELETE"] {
            let answered = review_response_measured(&RefuseDeletes, &review(operation), Some(&metrics));
            assert!(answered.is_ok(), "{answered:?}");
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap_or_default();
        let labels = |operation: &str, allowed: bool| {
            format!(
                "{{request_operation=\"{operation}\",kind_group=\"samples.knative.dev\",kind_version=\"v1alpha1\",\
                 kind_kind=\"Widget\",resource_group=\"samples.knative.dev\",resource_version=\"v1alpha1\",\
                 resource_resource=\"widgets\",resource_namespace=\"team\",admission_allowed=\"{allowed}\"}}"
            )
        };
        for (series, want) in [
            (
                format!("webhook_request_count_total{} 2", labels("CREATE", true)),
                true,
            ),
            (
                format!("webhook_request_count_total{} 1", labels("DELETE", false)),
                true,
            ),
            (
                format!("webhook_request_latencies_count{} 1", labels("DELETE", false)),
                true,
            ),
        ] {
            assert_eq!(text.contains(&series), want, "{series}\n{text}");
        }
    }
}
