//! Admission throughput and latency over loopback TLS with keep-alive: the
//! webhook's own server (certificate from its Secret through an informer, as
//! in a cluster) answering `/resource-validation` reviews of a valid
//! AddressableService from several keep-alive connections at once.
//!
//! ```sh
//! cargo run --release -p webhook --example admission-bench [-- --connections 4 --requests 50000]
//! ```
//!
//! Under hostile load, the same reviews while other clients hold uploads of
//! 15 MiB open, trickle request heads, and send 3 MB reviews with 200,000
//! labels; the server's memory is printed beside the latencies, with how
//! many heavy reviews were answered and, after `--settle-seconds`, what the
//! server kept once the load stopped:
//!
//! ```sh
//! cargo run --release -p webhook --example admission-bench -- --requests 20000 \
//!     --held-uploads 40 --slow-headers 200 --heavy-reviews 4 --settle-seconds 60
//! ```
//!
//! The server runs in a child process, with the allocator and the
//! `_RJEM_MALLOC_CONF` of the webhook's Deployment, so the figures are the
//! server's alone, not the clients'.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The benchmark harness the webhook crate's own benchmark uses.
#[path = "../../../pkg/webhook/examples/common/bench.rs"]
mod bench;

use std::io::BufRead as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kinject_testenv::TestEnv;
use rustls::pki_types::ServerName;
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "Measures admission reviews per second and their latency over loopback TLS")]
struct Args {
    /// Keep-alive connections sending reviews at once.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Reviews in all, after a warm-up of one per connection.
    #[arg(long, default_value_t = 50_000)]
    requests: usize,
    /// Clients that announce a 15 MiB review, send all of it but the last
    /// byte, and then one byte every 5 s.
    #[arg(long, default_value_t = 0)]
    held_uploads: usize,
    /// Clients that finish the TLS handshake and then send a request head one
    /// byte a second, reconnecting when cut off.
    #[arg(long, default_value_t = 0)]
    slow_headers: usize,
    /// Clients sending 3 MB reviews of a ConfigMap with 200,000 labels, one
    /// after another.
    #[arg(long, default_value_t = 0)]
    heavy_reviews: usize,
    /// After the load, stop every client and wait this long before reading
    /// the server's memory again.
    #[arg(long, default_value_t = 0)]
    settle_seconds: u64,
    /// Run as the server: print the port and CA as one JSON line, serve
    /// until standard input closes.
    #[arg(long, hide = true)]
    serve: bool,
}

/// The same allocator as the webhook binary, so the server's figures are
/// the binary's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How the heavy reviews fared.
#[derive(Debug, Default)]
struct HeavyOutcomes {
    answered: AtomicUsize,
    refused: AtomicUsize,
}

/// A process's resident and peak resident memory, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or_default()
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Starts the hostile clients of `args` on `clients`.
async fn start_hostile_clients(
    args: &Args,
    port: u16,
    tls: &Arc<rustls::ClientConfig>,
    heavy_outcomes: &Arc<HeavyOutcomes>,
    clients: &mut tokio::task::JoinSet<()>,
) {
    for _ in 0..args.held_uploads {
        clients.spawn(held_upload(port, tls.clone()));
    }
    for _ in 0..args.slow_headers {
        clients.spawn(slow_header(port, tls.clone()));
    }
    let heavy = heavy_review();
    for _ in 0..args.heavy_reviews {
        clients.spawn(heavy_reviews(
            port,
            tls.clone(),
            heavy.clone(),
            heavy_outcomes.clone(),
        ));
    }
    // Let them take hold before the measured reviews start.
    tokio::time::sleep(Duration::from_secs(3)).await;
}

async fn connect(
    port: u16,
    tls: &Arc<rustls::ClientConfig>,
) -> Option<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    tokio_rustls::TlsConnector::from(tls.clone())
        .connect(ServerName::try_from("webhook.knative-samples.svc").unwrap(), tcp)
        .await
        .ok()
}

async fn held_upload(port: u16, tls: Arc<rustls::ClientConfig>) {
    use tokio::io::AsyncWriteExt;
    const SIZE: usize = 15 * 1024 * 1024;
    let chunk = vec![b' '; 64 * 1024];
    loop {
        let Some(mut stream) = connect(port, &tls).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let head =
            format!("POST /resource-validation HTTP/1.1\r\nHost: webhook\r\nContent-Length: {SIZE}\r\n\r\n");
        let mut sent = 0;
        let mut alive = stream.write_all(head.as_bytes()).await.is_ok();
        while alive && sent + chunk.len() < SIZE {
            alive = stream.write_all(&chunk).await.is_ok();
            sent += chunk.len();
        }
        while alive && sent < SIZE - 1 {
            alive = stream.write_all(b" ").await.is_ok() && stream.flush().await.is_ok();
            sent += 1;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
}

async fn slow_header(port: u16, tls: Arc<rustls::ClientConfig>) {
    use tokio::io::AsyncWriteExt;
    loop {
        let Some(mut stream) = connect(port, &tls).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        for byte in b"POST /resource-validation HTTP/1.1\r\nHost: webhook\r\n"
            .iter()
            .cycle()
        {
            if stream.write_all(&[*byte]).await.is_err() || stream.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// A 3 MB review of a ConfigMap with 200,000 labels.
fn heavy_review() -> Bytes {
    let labels: serde_json::Map<String, serde_json::Value> =
        (0..200_000).map(|i| (format!("l{i}"), json!("v"))).collect();
    Bytes::from(
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "namespace": NS, "operation": "CREATE", "userInfo": {},
                "object": {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "heavy", "namespace": NS, "labels": labels}},
            }
        })
        .to_string(),
    )
}

async fn heavy_reviews(
    port: u16,
    tls: Arc<rustls::ClientConfig>,
    review: Bytes,
    outcomes: Arc<HeavyOutcomes>,
) {
    loop {
        let Some(stream) = connect(port, &tls).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok((mut sender, connection)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
        else {
            continue;
        };
        tokio::spawn(connection);
        loop {
            let request = http::Request::post("/config-validation")
                .header("content-type", "application/json")
                .body(Full::new(review.clone()))
                .unwrap();
            let Ok(response) = sender.send_request(request).await else {
                outcomes.refused.fetch_add(1, Ordering::Relaxed);
                break;
            };
            let answered = response.status().is_success();
            if response.into_body().collect().await.is_err() {
                outcomes.refused.fetch_add(1, Ordering::Relaxed);
                break;
            }
            let outcome = if answered {
                &outcomes.answered
            } else {
                &outcomes.refused
            };
            outcome.fetch_add(1, Ordering::Relaxed);
        }
    }
}

const NS: &str = "knative-samples";

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if args.serve {
        serve().await;
        return;
    }
    let (mut server, port, ca_cert) = spawn_server();
    let pid = server.id();
    let tls = bench::client_tls(&ca_cert);
    let review = review();
    let (idle, _) = memory(pid);
    let hostile = args.held_uploads + args.slow_headers + args.heavy_reviews > 0;
    let heavy_outcomes = Arc::new(HeavyOutcomes::default());
    let mut hostile_clients = tokio::task::JoinSet::new();
    if hostile {
        start_hostile_clients(&args, port, &tls, &heavy_outcomes, &mut hostile_clients).await;
    }

    let target = bench::Target {
        port,
        tls: tls.clone(),
        server_name: "webhook.knative-samples.svc".to_owned(),
        path: "/resource-validation",
        review,
        check: Arc::new(|body| assert!(body.windows(14).any(|w| w == br#""allowed":true"#))),
    };
    let (latencies, elapsed) = bench::send_from(args.connections, args.requests, &target).await;
    let (loaded, peak) = memory(pid);
    hostile_clients.abort_all();
    println!(
        "{} validations over {} keep-alive TLS connections in {:.2?}: {:.0}/s, p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        latencies.len(),
        args.connections,
        elapsed,
        latencies.len() as f64 / elapsed.as_secs_f64(),
        bench::percentile(&latencies, 0.50),
        bench::percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default(),
    );
    if hostile {
        let answered = heavy_outcomes.answered.load(Ordering::Relaxed);
        let refused = heavy_outcomes.refused.load(Ordering::Relaxed);
        println!(
            "under {} held 15 MiB uploads, {} slow-header connections and {} 3 MB reviews at a time: \
             {answered} of {} heavy reviews answered ({:.1} %)",
            args.held_uploads,
            args.slow_headers,
            args.heavy_reviews,
            answered + refused,
            100.0 * answered as f64 / (answered + refused).max(1) as f64,
        );
    }
    println!(
        "server RSS: {} MiB idle, {} MiB at the end of the load, peak {} MiB",
        idle >> 20,
        loaded >> 20,
        peak >> 20
    );
    if args.settle_seconds > 0 {
        tokio::time::sleep(Duration::from_secs(args.settle_seconds)).await;
        let (settled, _) = memory(pid);
        println!(
            "server RSS {} s after the load: {} MiB ({:.2}x idle)",
            args.settle_seconds,
            settled >> 20,
            settled as f64 / idle.max(1) as f64
        );
    }
    // The server ends when its standard input closes; the hostile clients'
    // connections are gone with this process.
    drop(server.stdin.take());
    let _ = server.wait();
}

/// Starts this example as the server in a child process: the child, the
/// port it serves and its CA.
fn spawn_server() -> (std::process::Child, u16, String) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--serve")
        .env("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
    (
        child,
        u16::try_from(ready["port"].as_u64().unwrap()).unwrap(),
        ready["ca"].as_str().unwrap().to_owned(),
    )
}

/// The server side: the webhook over testenv until standard input closes.
async fn serve() {
    let env = TestEnv::new();
    let (port, ca_cert, stop, server) =
        bench::start_webhook(&env, NS, generated::registry::custom_kinds()).await;
    println!("{}", json!({"port": port, "ca": ca_cert}));
    let _ = tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink())).await;
    stop.cancel();
    // Hostile clients may still hold connections open; their body deadline
    // is no reason to wait.
    drop(server);
}

/// The review of a valid AddressableService that every request sends.
fn review() -> Bytes {
    Bytes::from(
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "samples.knative.dev", "version": "v1alpha1", "kind": "AddressableService"},
                "resource": {"group": "samples.knative.dev", "version": "v1alpha1", "resource": "addressableservices"},
                "namespace": NS,
                "operation": "CREATE",
                "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
                "object": {"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
                           "metadata": {"name": "make-it-addressable", "namespace": NS,
                                        "labels": {"app": "demo"}, "annotations": {"note": "benchmark"}},
                           "spec": {"serviceName": "webhook"}},
                "dryRun": false,
            }
        })
        .to_string(),
    )
}
