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

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kinject_runtime::apis::registry::CustomKind;
use kinject_runtime::injection::Context;
use kinject_testenv::TestEnv;
use kinject_types::FieldError;
use kinject_types::conversion::{Convertible, Restored};
use kinject_webhook::admission::ConfigValidation;
use kinject_webhook::certificates::Certificates;
use kinject_webhook::conversion::CONVERSION_PATH;
use kinject_webhook::{Options, Webhook};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio_util::sync::CancellationToken;

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
    let (port, ca_cert, stop) = start_webhook(&env).await;
    let tls = client_tls(&ca_cert);
    let review = review(args.objects);
    let per_connection = args.reviews / args.connections.max(1);
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..args.connections.max(1) {
        clients.push(tokio::spawn(send_reviews(
            port,
            tls.clone(),
            review.clone(),
            args.objects,
            per_connection,
        )));
    }
    let mut latencies = Vec::new();
    for client in clients {
        latencies.extend(client.await.unwrap());
    }
    let elapsed = started.elapsed();
    stop.cancel();
    latencies.sort_unstable();
    let percentile = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    let per_second = latencies.len() as f64 / elapsed.as_secs_f64();
    println!(
        "{} reviews of {} objects over {} keep-alive TLS connections in {:.2?}: {per_second:.0} reviews/s \
         ({:.0} objects/s), p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        latencies.len(),
        args.objects,
        args.connections,
        elapsed,
        per_second * args.objects as f64,
        percentile(0.50),
        percentile(0.99),
        latencies.last().copied().unwrap_or_default(),
    );
}

/// The webhook's server on a loopback port, its certificate in its Secret
/// read through the informer: the port, the CA, and what stops it.
async fn start_webhook(env: &TestEnv) -> (u16, String, CancellationToken) {
    env.create_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .unwrap();
    let certs = Certificates::generate("webhook", NS, "cluster.local", SystemTime::now()).unwrap();
    let data: serde_json::Map<String, serde_json::Value> = certs
        .to_data()
        .into_iter()
        .map(|(k, v)| (k, serde_json::to_value(v).unwrap()))
        .collect();
    env.create_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "webhook-certs", "namespace": NS}, "data": data}))
        .unwrap();
    let ctx = Context::builder(env.client())
        .cluster_domain("cluster.local")
        .build();
    let webhook = Webhook::new(
        NS,
        vec![
            CustomKind::of::<v1::Widget>(),
            CustomKind::of::<v1alpha1::Widget>().converted::<v1alpha1::Widget>(),
        ],
        ConfigValidation::sharedmain(str::to_owned),
        Options {
            drain: Duration::ZERO,
            ..Options::default()
        },
    );
    // The server's certificate resolver reads the Secret informer.
    let _ = webhook.resolver(&ctx);
    let stop = CancellationToken::new();
    ctx.start_informers(&stop);
    ctx.wait_for_cache_sync(Duration::from_secs(10)).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server_stop = stop.clone();
    tokio::spawn(async move { webhook.serve(&ctx, listener, server_stop).await });
    (port, certs.ca_cert, stop)
}

/// A TLS client configuration that trusts only `ca_cert`.
fn client_tls(ca_cert: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_cert.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
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

/// One keep-alive connection sending a warm-up review and then `count`
/// more, one at a time; the latency of each but the warm-up.
async fn send_reviews(
    port: u16,
    tls: Arc<rustls::ClientConfig>,
    review: Bytes,
    objects: usize,
    count: usize,
) -> Vec<Duration> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(ServerName::try_from(format!("webhook.{NS}.svc")).unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut latencies = Vec::with_capacity(count);
    for i in 0..=count {
        let sent = Instant::now();
        sender.ready().await.unwrap();
        let request = http::Request::post(CONVERSION_PATH)
            .header("content-type", "application/json")
            .body(Full::new(review.clone()))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert!(response.status().is_success());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["response"]["result"]["status"], "Success", "{answer}");
        assert_eq!(
            answer["response"]["convertedObjects"].as_array().map(Vec::len),
            Some(objects)
        );
        if i > 0 {
            latencies.push(sent.elapsed());
        }
    }
    latencies
}
