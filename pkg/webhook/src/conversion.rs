//! The conversion webhook (Knative's `resourcesemantics/conversion`): the
//! API server sends a `ConversionReview` of objects and the version it
//! wants them in, and gets each object converted through its kind's hub and
//! defaulted in the target version, with the application's registry doing
//! the converting ([`registry::convert`]).
//!
//! A review fails as a whole when one of its objects does not convert, as
//! kube-apiserver expects (it fails the request that needed the conversion):
//! the `Failed` status names the object and why. A body that is not a
//! `ConversionReview` is answered 400, never a dropped connection.

use std::sync::Arc;
use std::time::Duration;

use kinject_runtime::apis::registry::{self, CustomKind};
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde_json::Value;

use crate::admission::ReviewError;

/// The path of the conversion webhook (Knative's), which the CRDs name.
pub const CONVERSION_PATH: &str = kinject_runtime::apis::conversion::WEBHOOK_PATH;

/// Converts the objects of the kinds of an application's registry that have
/// a hub.
#[derive(Clone, Debug)]
pub struct Conversion {
    kinds: Arc<Vec<CustomKind>>,
}

/// A kind the conversion webhook converts: the CRD whose conversion it
/// serves.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConvertedKind {
    /// `tutorial.example.com`.
    pub group: String,
    /// `Widget`.
    pub kind: String,
    /// `widgets.tutorial.example.com`.
    pub crd_name: String,
}

impl Conversion {
    /// Converts through the hubs of `kinds` (the application's
    /// `generated::registry::custom_kinds()`).
    pub fn new(kinds: Vec<CustomKind>) -> Self {
        Conversion {
            kinds: Arc::new(kinds),
        }
    }

    /// The kinds with a hub, once each, sorted by CRD name: those whose CRDs
    /// name this webhook.
    pub fn kinds(&self) -> Vec<ConvertedKind> {
        let mut kinds: Vec<ConvertedKind> = self
            .kinds
            .iter()
            .filter(|k| k.hub)
            .map(|k| ConvertedKind {
                group: k.group.clone(),
                kind: k.kind.clone(),
                crd_name: format!("{}.{}", k.plural, k.group),
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// The answer to `request`: every object in the desired version, or a
    /// `Failed` status naming the first that does not convert.
    pub fn convert(
        &self,
        request: ConversionRequest,
        metrics: Option<&ConversionMetrics>,
    ) -> ConversionResponse {
        let desired = request.desired_api_version.clone();
        let objects = request.objects.clone();
        let response = ConversionResponse::for_request(request);
        let mut converted = Vec::with_capacity(objects.len());
        for (index, object) in objects.iter().enumerate() {
            let started = std::time::Instant::now();
            let outcome = self.convert_one(index, object, &desired);
            if let Some(metrics) = metrics {
                metrics.observe(object, &desired, outcome.is_ok(), started.elapsed());
            }
            match outcome {
                Ok(object) => converted.push(object),
                Err(message) => {
                    tracing::warn!(error = %message, "a conversion failed");
                    return response.failure(Status::failure(&message, "Invalid").with_code(422));
                }
            }
        }
        response.success(converted)
    }

    fn convert_one(&self, index: usize, object: &Value, desired: &str) -> Result<Value, String> {
        let text = |field: &str| object.get(field).and_then(Value::as_str);
        let (Some(api_version), Some(kind)) = (text("apiVersion"), text("kind")) else {
            return Err(format!(
                "objects[{index}] is not a Kubernetes object: it needs apiVersion and kind"
            ));
        };
        let metadata = object.get("metadata");
        let field = |name: &str| {
            metadata
                .and_then(|m| m.get(name))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let name = match field("namespace") {
            "" => field("name").to_owned(),
            namespace => format!("{namespace}/{}", field("name")),
        };
        registry::convert(&self.kinds, object, desired)
            .map_err(|e| format!("converting {kind} {name} from {api_version} to {desired}: {e}"))
    }

    /// Decodes a `ConversionReview`, converts its objects and encodes the
    /// response review.
    pub fn review(&self, body: &[u8], metrics: Option<&ConversionMetrics>) -> Result<String, ReviewError> {
        let review: ConversionReview = serde_json::from_slice(body)?;
        let request = ConversionRequest::from_review(review).map_err(|_| ReviewError::NoRequest)?;
        Ok(serde_json::to_string(
            &self.convert(request, metrics).into_review(),
        )?)
    }
}

/// Labels of a conversion: the kind, the versions and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConversionLabels {
    kind_group: String,
    kind_kind: String,
    from_version: String,
    to_version: String,
    result: String,
}

/// `webhook_conversion_count_total` and `webhook_conversion_latencies` (ms),
/// per object converted, by kind, versions and result.
#[derive(Clone, Debug)]
pub struct ConversionMetrics {
    count: Family<ConversionLabels, Counter>,
    latency: Family<ConversionLabels, Histogram, fn() -> Histogram>,
}

fn latency_histogram() -> Histogram {
    Histogram::new([0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0])
}

impl ConversionMetrics {
    /// Registers the families in `registry`; once per registry.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ConversionMetrics {
            count: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
        };
        registry.register(
            "webhook_conversion_count",
            "The number of objects the conversion webhook converted, by kind, versions and result",
            metrics.count.clone(),
        );
        registry.register(
            "webhook_conversion_latencies",
            "The time one object's conversion took, in milliseconds",
            metrics.latency.clone(),
        );
        metrics
    }

    fn observe(&self, object: &Value, desired: &str, converted: bool, took: Duration) {
        let split = |api_version: &str| match api_version.rsplit_once('/') {
            Some((group, version)) => (group.to_owned(), version.to_owned()),
            None => (String::new(), api_version.to_owned()),
        };
        let (group, from_version) = split(
            object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        let labels = ConversionLabels {
            kind_group: group,
            kind_kind: object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            from_version,
            to_version: split(desired).1,
            result: if converted { "success" } else { "failure" }.to_owned(),
        };
        self.count.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(took.as_secs_f64() * 1000.0);
    }
}
