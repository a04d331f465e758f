//! The TLS server on its own: a graceful stop lets a review in flight finish
//! and refuses new connections.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kinject_webhook::admission::{Admit, Request, allowed};
use kinject_webhook::certificates::Certificates;
use kinject_webhook::server::{Routes, serve, tls_config};
use kube_core::admission::AdmissionResponse;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// Admits once the test says so, after telling it the review arrived.
struct Gate {
    arrived: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Admit for Gate {
    fn admit(&self, request: &Request) -> AdmissionResponse {
        let _ = self.arrived.lock().send(());
        let _ = self.release.lock().recv();
        allowed(request)
    }
}

fn certificates() -> (Certificates, Arc<CertifiedKey>) {
    let certs = Certificates::generate("webhook", "ns", "cluster.local", SystemTime::now()).unwrap();
    let chain = CertificateDer::pem_slice_iter(certs.server_cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(certs.server_key.as_bytes()).unwrap();
    let provider = rustls::crypto::ring::default_provider();
    let key = CertifiedKey::from_der(chain, key, &provider).unwrap();
    (certs, Arc::new(key))
}

fn client(ca: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
    "uid":"u","kind":{"group":"","version":"v1","kind":"ConfigMap"},
    "resource":{"group":"","version":"v1","resource":"configmaps"},
    "operation":"CREATE","userInfo":{},"object":{"metadata":{"name":"x"}}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_finishes_the_review_in_flight_and_accepts_no_more() {
    let (certs, key) = certificates();
    let (arrived_tx, arrived) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let gate = Gate {
        arrived: Mutex::new(arrived_tx),
        release: Mutex::new(release_rx),
    };
    let routes = Routes::new().route("/gate", Arc::new(gate));
    let tls = Arc::new(tls_config(Arc::new(Fixed(key))).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(serve(listener, tls, routes, Duration::ZERO, shutdown.clone()));

    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("webhook.ns.svc").unwrap();
    let tls = client(&certs.ca_cert).connect(name, tcp).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let in_flight = tokio::spawn(async move {
        let request = http::Request::post("/gate")
            .body(Full::new(Bytes::from(REVIEW)))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    });
    tokio::task::spawn_blocking(move || arrived.recv().unwrap())
        .await
        .unwrap();

    shutdown.cancel();
    // The listener closes while the review is still being answered.
    let mut refused = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "the server still accepts connections after the stop");
    assert!(!server.is_finished(), "the server waits for the review in flight");

    release.send(()).unwrap();
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, http::StatusCode::OK);
    assert!(body.contains(r#""allowed":true"#), "{body}");
    server.await.unwrap();
}

/// The CA's and the serving certificate's subjects and key identifiers.
fn subject_and_key_ids(pem: &str) -> (String, Option<Vec<u8>>, Option<Vec<u8>>) {
    use x509_cert::der::{Decode, DecodePem};
    use x509_cert::ext::pkix::{AuthorityKeyIdentifier, SubjectKeyIdentifier};
    let cert = x509_cert::Certificate::from_pem(pem).unwrap();
    let tbs = &cert.tbs_certificate;
    let extension = |oid: &str| {
        tbs.extensions
            .iter()
            .flatten()
            .find(|e| e.extn_id.to_string() == oid)
            .map(|e| e.extn_value.as_bytes().to_vec())
    };
    let ski =
        extension("2.5.29.14").map(|v| SubjectKeyIdentifier::from_der(&v).unwrap().0.as_bytes().to_vec());
    let aki = extension("2.5.29.35").and_then(|v| {
        AuthorityKeyIdentifier::from_der(&v)
            .unwrap()
            .key_identifier
            .map(|k| k.as_bytes().to_vec())
    });
    (tbs.subject.to_string(), ski, aki)
}

#[test]
fn the_chain_verifies_with_webpki_and_openssl() {
    let (certs, _) = certificates();
    let (ca_subject, ca_ski, _) = subject_and_key_ids(&certs.ca_cert);
    let (server_subject, server_ski, server_aki) = subject_and_key_ids(&certs.server_cert);
    assert_ne!(
        ca_subject, server_subject,
        "a CA with the leaf's subject looks self-signed"
    );
    assert!(
        ca_ski.is_some() && server_ski.is_some(),
        "both carry a Subject Key Identifier"
    );
    assert_eq!(server_aki, ca_ski, "the leaf names its issuer's key");

    // The pure-Rust verifier, as an API server written in Rust would run it.
    use rustls::client::danger::ServerCertVerifier as _;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(certs.ca_cert.as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .unwrap();
    let leaf = CertificateDer::from_pem_slice(certs.server_cert.as_bytes()).unwrap();
    let now = rustls::pki_types::UnixTime::now();
    for name in ["webhook.ns.svc", "webhook.ns.svc.cluster.local", "webhook"] {
        verifier
            .verify_server_cert(&leaf, &[], &ServerName::try_from(name).unwrap(), &[], now)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    // OpenSSL, as kube-apiserver's Go and a Python client are strict alike.
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        eprintln!("openssl is not installed; checked with webpki only");
        return;
    }
    let dir = std::env::temp_dir().join(format!("kinject-webhook-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.pem"), &certs.ca_cert).unwrap();
    std::fs::write(dir.join("server.pem"), &certs.server_cert).unwrap();
    let verified = std::process::Command::new("openssl")
        .args(["verify", "-CAfile"])
        .arg(dir.join("ca.pem"))
        .arg(dir.join("server.pem"))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        verified.status.success(),
        "openssl verify: {}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// Admits everything at once.
struct AllowAll;

impl Admit for AllowAll {
    fn admit(&self, request: &Request) -> AdmissionResponse {
        allowed(request)
    }
}

/// A server with small limits on a loopback port; its CA and port.
async fn limited_server(limits: kinject_webhook::server::Limits) -> (String, u16, CancellationToken) {
    let (certs, key) = certificates();
    let routes = Routes::new().route("/allow", Arc::new(AllowAll)).limits(limits);
    let tls = Arc::new(tls_config(Arc::new(Fixed(key))).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, tls, routes, Duration::ZERO, shutdown.clone()));
    (certs.ca_cert, port, shutdown)
}

async fn tls_stream(ca: &str, port: u16) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("webhook.ns.svc").unwrap();
    client(ca).connect(name, tcp).await.unwrap()
}

/// Sends a request head announcing `length` bytes and `sent` of them.
async fn upload(
    stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    length: usize,
    sent: &[u8],
) {
    use tokio::io::AsyncWriteExt;
    let head = format!("POST /allow HTTP/1.1\r\nHost: webhook\r\nContent-Length: {length}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(sent).await.unwrap();
    stream.flush().await.unwrap();
}

/// What the server answered on `stream`, up to the end of its head, or
/// `None` when it closed the connection without a word.
async fn status_line(stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(_) => panic!("the server neither answered nor closed within 20 s"),
        }
    }
    let answer = String::from_utf8_lossy(&answer).into_owned();
    answer.lines().next().map(str::to_owned).filter(|l| !l.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_get_refused_or_cut_off_within_the_limits() {
    let limits = kinject_webhook::server::Limits {
        max_body: 600 * 1024,
        body_budget: 1024 * 1024,
        header_read_timeout: Duration::from_millis(300),
        body_deadline: Duration::from_secs(2),
        max_connections: 6,
        ..Default::default()
    };
    let (ca, port, shutdown) = limited_server(limits).await;

    // Past the size of one review: 413 without reading the body.
    let mut huge = tls_stream(&ca, port).await;
    upload(&mut huge, 10 * 1024 * 1024, b"").await;
    assert_eq!(
        status_line(&mut huge).await.as_deref(),
        Some("HTTP/1.1 413 Payload Too Large")
    );

    // A body that never finishes, with nobody waiting for what it holds:
    // 408 once the deadline passes.
    let mut first = tls_stream(&ca, port).await;
    upload(&mut first, 500 * 1024, b"{").await;
    assert_eq!(
        status_line(&mut first).await.as_deref(),
        Some("HTTP/1.1 408 Request Timeout")
    );

    // A head trickled byte by byte is cut off after the header timeout.
    let mut slow = tls_stream(&ca, port).await;
    {
        use tokio::io::AsyncWriteExt;
        slow.write_all(b"POST /al").await.unwrap();
        slow.flush().await.unwrap();
    }
    assert_eq!(status_line(&mut slow).await, None, "a slow head is closed");

    // Past the connection cap, new connections are closed on accept (the
    // ones above are closed by now: idle past the header timeout).
    drop((huge, first));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("webhook.ns.svc").unwrap();
    assert!(
        client(&ca).connect(name, tcp).await.is_err(),
        "the seventh connection is served"
    );
    drop(held);

    // And a normal review still goes through.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut normal = tls_stream(&ca, port).await;
    upload(&mut normal, REVIEW.len(), REVIEW.as_bytes()).await;
    assert_eq!(status_line(&mut normal).await.as_deref(), Some("HTTP/1.1 200 OK"));
    shutdown.cancel();
}

/// A review of `length` bytes that the server admits: [`REVIEW`] padded with
/// the whitespace JSON allows after it.
fn review_of(length: usize) -> Vec<u8> {
    let mut review = REVIEW.as_bytes().to_vec();
    review.resize(length.max(REVIEW.len()), b' ');
    review
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_cannot_starve_a_review_that_arrives_whole() {
    let limits = kinject_webhook::server::Limits {
        max_body: 600 * 1024,
        body_budget: 1024 * 1024,
        stalled_body: Duration::from_millis(500),
        // Past it, an upload not cut off to make room gets 408 anyway.
        body_deadline: Duration::from_secs(5),
        ..Default::default()
    };
    let (ca, port, shutdown) = limited_server(limits).await;

    // Bodies are counted as they arrive: ten uploads that promise 500 KiB
    // each and send a byte hold ten bytes of the 1 MiB, and are not refused.
    let mut trickles = Vec::new();
    for _ in 0..10 {
        let mut trickle = tls_stream(&ca, port).await;
        upload(&mut trickle, 500 * 1024, b"{").await;
        trickles.push(trickle);
    }
    // Two uploads send 450 KiB of their 500 and stall, holding 900 KiB.
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut upload_stream = tls_stream(&ca, port).await;
        upload(&mut upload_stream, 500 * 1024, &vec![b' '; 450 * 1024]).await;
        stalled.push(upload_stream);
    }
    // A review of 400 KiB that arrives whole still gets its answer: stalled
    // bodies, and those that promised more, are cut off to make room for it.
    let mut review = tls_stream(&ca, port).await;
    let body = review_of(400 * 1024);
    upload(&mut review, body.len(), &body).await;
    assert_eq!(status_line(&mut review).await.as_deref(), Some("HTTP/1.1 200 OK"));
    // Cut off for stalling or to make room, refused if the review took the
    // room before their bytes were read, or past the deadline.
    for mut upload_stream in stalled {
        let answer = status_line(&mut upload_stream).await;
        assert!(
            matches!(
                answer.as_deref(),
                Some("HTTP/1.1 408 Request Timeout" | "HTTP/1.1 429 Too Many Requests")
            ),
            "a stalled upload got {answer:?}"
        );
    }
    drop(trickles);
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_that_are_not_json_get_a_400_that_says_why() {
    let (ca, port, shutdown) = limited_server(kinject_webhook::server::Limits::default()).await;
    let deep = REVIEW.replace(
        r#""object":{"metadata":{"name":"x"}}"#,
        &format!(
            r#""object":{{"metadata":{{"name":"x"}},"spec":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    );
    assert!(deep.len() > 200_000);
    let mut not_utf8 = REVIEW.as_bytes().to_vec();
    let name = not_utf8.windows(3).position(|w| w == b"\"x\"").unwrap() + 1;
    not_utf8[name] = 0xff;
    for (what, body, why) in [
        ("100,000-deep JSON", deep.into_bytes(), "recursion limit exceeded"),
        ("invalid UTF-8", not_utf8, "invalid unicode code point"),
    ] {
        let mut stream = tls_stream(&ca, port).await;
        upload(&mut stream, body.len(), &body).await;
        let answer = answer_until(&mut stream, why).await;
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request"), "{what}: {answer}");
        assert!(
            answer.contains("could not decode body: ") && answer.contains(why),
            "{what}: {answer}"
        );
    }
    shutdown.cancel();
}

/// What the server answers on `stream`, read until it contains `text` or
/// the connection ends.
async fn answer_until(
    stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    text: &str,
) -> String {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains(text) {
        match tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server neither answered nor closed within 20 s"),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}
