//! Reconcile counts and latencies by kind and result.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    kind: String,
    result: String,
}

/// `reconcile_count_total` and `reconcile_latency_seconds`, labelled with the
/// kind (`samples.knative.dev.AddressableService`, as Knative's logs name it)
/// and the result: `success`, `event` (done, with an event), `skip`,
/// `requeue`, `conflict` or `error`.
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    count: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
}

impl ReconcileMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let count = Family::<Labels, Counter>::default();
        let latency = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ])
        });
        registry.register("reconcile_count", "Reconciles, by kind and result", count.clone());
        registry.register(
            "reconcile_latency_seconds",
            "Time one reconcile took, by kind and result",
            latency.clone(),
        );
        ReconcileMetrics { count, latency }
    }

    pub(crate) fn observe(&self, kind: &str, result: &str, took: Duration) {
        let labels = Labels {
            kind: kind.to_owned(),
            result: result.to_owned(),
        };
        self.count.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(took.as_secs_f64());
    }
}
