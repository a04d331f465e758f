//! Conversion throughput and latency over loopback TLS with keep-alive: the
//! webhook's own server (its certificate from its Secret through an
//! informer, as in a cluster) answering `/resource-conversion` reviews that
//! carry a list of objects, as kube-apiserver sends one review per list,
//! from several keep-alive connections at once.
//!
//! ```sh
//! cargo run --release -p kinject-webhook --example conversion-bench [-- --connections 4 --objects 100 --reviews 5000]
//! ```
//!
//! Each review converts `--objects` Widgets from `v1alpha1` (a spoke whose
//! replica count is text) to `v1` (the hub, an integer), and every answer is
//! checked to hold them all. The kinds are the example's own: a project's
//! kinds convert through the same code, with their own fields.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/bench.rs"]
mod bench;

use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use kinject_runtime::apis::registry::CustomKind;
use kinject_testenv::TestEnv;
use kinject_types::FieldError;
use kinject_types::conversion::{Convertible, Restored};
use kinject_webhook::conversion::CONVERSION_PATH;
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "Measures conversion reviews per second and their latency over loopback TLS")]
struct Args {
    /// Keep-alive connections sending reviews at once.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Objects in each review, as in a list of that many.
    #[arg(long, default_value_t = 100)]
    objects: usize,
    /// Reviews in all, after a warm-up of one per connection.
    #[arg(long, default_value_t = 5_000)]
    reviews: usize,
}

pub mod v1 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::Kind;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

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
        pub zones: Vec<String>,
    }
}

pub mod v1alpha1 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::Kind;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(Kind, Clone, Debug, Default, PartialEq)]
    #[kind(group = "tutorial.example.com", version = "v1alpha1", namespaced)]
    pub struct Widget {
        pub metadata: ObjectMeta,
        pub spec: WidgetSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct WidgetSpec {
        /// The replica count as text.
        pub replicas: String,
        /// One zone; `v1` has a list.
        pub zone: String,
    }
}

impl Convertible for v1alpha1::Widget {
    type Hub = v1::Widget;

    fn convert_to(self, _: &Restored<v1::Widget>) -> Result<v1::Widget, FieldError> {
        let replicas = self
            .spec
            .replicas
            .parse()
            .map_err(|_| FieldError::invalid_value(&self.spec.replicas, "spec.replicas"))?;
        Ok(v1::Widget {
            metadata: self.metadata,
            spec: v1::WidgetSpec {
                replicas,
                zones: vec![self.spec.zone],
            },
        })
    }

    fn convert_from(hub: v1::Widget) -> Result<Self, FieldError> {
        Ok(v1alpha1::Widget {
            metadata: hub.metadata,
            spec: v1alpha1::WidgetSpec {
                replicas: hub.spec.replicas.to_string(),
                zone: hub.spec.zones.into_iter().next().unwrap_or_default(),
            },
        })
    }
}

const NS: &str = "tutorial-system";

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let env = TestEnv::new();
    let kinds = vec![
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<v1alpha1::Widget>().converted::<v1alpha1::Widget>(),
    ];
    let (port, ca_cert, stop, _server) = bench::start_webhook(&env, NS, kinds).await;
    let objects = args.objects;
    let target = bench::Target {
        port,
        tls: bench::client_tls(&ca_cert),
        server_name: format!("webhook.{NS}.svc"),
        path: CONVERSION_PATH,
        review: review(args.objects),
        check: Arc::new(move |body| {
            let answer: serde_json::Value = serde_json::from_slice(body).unwrap();
            assert_eq!(answer["response"]["result"]["status"], "Success", "{answer}");
            assert_eq!(
                answer["response"]["convertedObjects"].as_array().map(Vec::len),
                Some(objects)
            );
        }),
    };
    let (latencies, elapsed) = bench::send_from(args.connections, args.reviews, &target).await;
    stop.cancel();
    let per_second = latencies.len() as f64 / elapsed.as_secs_f64();
    println!(
        "{} reviews of {} objects over {} keep-alive TLS connections in {:.2?}: {per_second:.0} reviews/s \
         ({:.0} objects/s), p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        latencies.len(),
        args.objects,
        args.connections,
        elapsed,
        per_second * args.objects as f64,
        bench::percentile(&latencies, 0.50),
        bench::percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default(),
    );
}

/// A review of `objects` v1alpha1 Widgets, each with the metadata a stored
/// object has, to be converted to v1.
fn review(objects: usize) -> Bytes {
    let objects: Vec<serde_json::Value> = (0..objects)
        .map(|i| {
            json!({
                "apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
                "metadata": {
                    "name": format!("widget-{i}"), "namespace": "default",
                    "uid": format!("6f1c3a52-0b7e-4c1d-9d4e-{i:012}"),
                    "resourceVersion": format!("{}", 1000 + i), "generation": 1,
                    "creationTimestamp": "2026-12-07T10:00:00Z",
                    "labels": {"app": "shop", "tier": "web"},
                },
                "spec": {"replicas": format!("{}", i % 7), "zone": "eu-west-1a"},
            })
        })
        .collect();
    Bytes::from(
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {
                "uid": "0b3e2f5c-1d1f-4e3a-9c55-2a6f0e6f5d01",
                "desiredAPIVersion": "tutorial.example.com/v1",
                "objects": objects,
            }
        })
        .to_string(),
    )
}
