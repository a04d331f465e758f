//! What the webhook's benchmarks share (`conversion-bench` here and
//! `cmd/webhook`'s `admission-bench`, which includes this file): the webhook
//! served on a loopback port with its certificate in its Secret, a TLS client
//! that trusts only its CA, and keep-alive connections timing reviews.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kinject_runtime::apis::registry::CustomKind;
use kinject_runtime::injection::Context;
use kinject_testenv::TestEnv;
use kinject_webhook::admission::ConfigValidation;
use kinject_webhook::certificates::Certificates;
use kinject_webhook::{Options, Webhook};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The server's task.
pub(crate) type Served = tokio::task::JoinHandle<Result<(), kinject_sharedmain::MainError>>;

/// The webhook of `kinds` in `namespace`, on a loopback port, its
/// certificate in its Secret read through the informer: the port, the CA,
/// what stops it, its task.
pub(crate) async fn start_webhook(
    env: &TestEnv,
    namespace: &str,
    kinds: Vec<CustomKind>,
) -> (u16, String, CancellationToken, Served) {
    env.create_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
        .unwrap();
    let certs = Certificates::generate("webhook", namespace, "cluster.local", SystemTime::now()).unwrap();
    let data: serde_json::Map<String, serde_json::Value> = certs
        .to_data()
        .into_iter()
        .map(|(k, v)| (k, serde_json::to_value(v).unwrap()))
        .collect();
    env.create_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "webhook-certs", "namespace": namespace}, "data": data}))
        .unwrap();
    let ctx = Context::builder(env.client())
        .cluster_domain("cluster.local")
        .build();
    let webhook = Webhook::new(
        namespace,
        kinds,
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
    let server = tokio::spawn(async move { webhook.serve(&ctx, listener, server_stop).await });
    (port, certs.ca_cert, stop, server)
}

/// A TLS client configuration that trusts only `ca_cert`.
pub(crate) fn client_tls(ca_cert: &str) -> Arc<rustls::ClientConfig> {
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

/// What fails the benchmark on a wrong answer body.
pub(crate) type Check = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// Where reviews go and what a right answer looks like.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) port: u16,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// The name the server's certificate carries (`webhook.<ns>.svc`).
    pub(crate) server_name: String,
    pub(crate) path: &'static str,
    pub(crate) review: Bytes,
    /// Fails the benchmark on a wrong answer body.
    pub(crate) check: Check,
}

/// `connections` keep-alive connections sending `total` reviews between
/// them: every latency, sorted, and the time it all took.
pub(crate) async fn send_from(
    connections: usize,
    total: usize,
    target: &Target,
) -> (Vec<Duration>, Duration) {
    let connections = connections.max(1);
    let started = Instant::now();
    let clients: Vec<_> = (0..connections)
        .map(|_| tokio::spawn(send_reviews(target.clone(), total / connections)))
        .collect();
    let mut latencies = Vec::new();
    for client in clients {
        latencies.extend(client.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    (latencies, elapsed)
}

/// The latency at `p` (0.5, 0.99) of sorted `latencies`.
pub(crate) fn percentile(latencies: &[Duration], p: f64) -> Duration {
    latencies
        .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// One keep-alive connection sending a warm-up review and then `count`
/// more, one at a time; the latency of each but the warm-up.
async fn send_reviews(target: Target, count: usize) -> Vec<Duration> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", target.port))
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    let stream = tokio_rustls::TlsConnector::from(target.tls)
        .connect(ServerName::try_from(target.server_name).unwrap(), tcp)
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
        let request = http::Request::post(target.path)
            .header("content-type", "application/json")
            .body(Full::new(target.review.clone()))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert!(response.status().is_success());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (target.check)(&body);
        if i > 0 {
            latencies.push(sent.elapsed());
        }
    }
    latencies
}
