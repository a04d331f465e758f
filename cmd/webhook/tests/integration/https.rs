//! The webhook in-process against testenv loaded with `config/`: its
//! reconcilers fill the certificates Secret and the webhook configurations,
//! and a rustls client posts AdmissionReviews to its HTTPS server, trusting
//! only the CA the configurations carry; the certificate is renewed (by an
//! injected clock) without a restart and without a failed request.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use kinject_runtime::controller::{Impl, ObjectKey};
use kinject_runtime::injection::Context;
use kinject_testenv::TestEnv;
use kinject_webhook::admission::ConfigValidation;
use kinject_webhook::certificates::{CA_CERT, NEXT_CA_CERT, SERVER_CERT};
use kinject_webhook::{Options, Webhook};
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const NS: &str = "knative-samples";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn apply(env: &TestEnv, files: &[&str]) {
    for file in files {
        let text = std::fs::read_to_string(repo().join("config").join(file)).unwrap();
        env.create_from_yaml(file, &text)
            .unwrap_or_else(|e| panic!("applying {file}: {e}"));
    }
}

struct Running {
    env: TestEnv,
    controllers: Vec<Impl>,
    port: u16,
    clock: Arc<Mutex<SystemTime>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The webhook over testenv with `config/`'s namespace, CRDs, Service,
/// Secret and webhook configurations, leading every key alone.
async fn start() -> Running {
    let env = TestEnv::new();
    apply(
        &env,
        &[
            "100-namespace.yaml",
            "400-webhook-service.yaml",
            "500-webhook-configuration.yaml",
        ],
    );
    for crd in generated::testing::custom_resource_definitions().unwrap() {
        env.install_crd(crd).unwrap();
    }
    let ctx = Context::builder(env.client())
        .cluster_domain("cluster.local")
        .build();
    let clock = Arc::new(Mutex::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000),
    ));
    let now = clock.clone();
    let options = Options {
        drain: Duration::ZERO,
        clock: Arc::new(move || *now.lock()),
        ..Options::default()
    };
    let webhook = Webhook::new(
        NS,
        generated::registry::custom_kinds(),
        ConfigValidation::sharedmain(str::to_owned),
        options,
    );
    let built = kinject_sharedmain::construct(&ctx, &webhook.constructors(), &[]).unwrap();
    let controllers: Vec<Impl> = built.iter().map(|b| b.controller.clone()).collect();
    // Promoted before the informers deliver anything, so no event finds
    // a replica that does not lead yet.
    controllers
        .iter()
        .for_each(kinject_runtime::leaderelection::promote_unopposed);
    let stop = CancellationToken::new();
    ctx.start_informers(&stop);
    let mut tasks = Vec::new();
    for controller in &controllers {
        let (controller, stop) = (controller.clone(), stop.clone());
        tasks.push(tokio::spawn(async move { controller.run(stop).await }));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (serve_ctx, serve_stop) = (ctx.clone(), stop.clone());
    tasks.push(tokio::spawn(async move {
        webhook.serve(&serve_ctx, listener, serve_stop).await.unwrap();
    }));
    Running {
        env,
        controllers,
        port,
        clock,
        stop,
        tasks,
    }
}

impl Running {
    fn secret_data(&self, key: &str) -> Option<Vec<u8>> {
        let secret = self
            .env
            .get_object("", "v1", "secrets", Some(NS), "webhook-certs")?;
        let encoded = secret["data"][key].as_str()?;
        base64_decode(encoded)
    }

    fn configuration(&self, plural: &str, name: &str) -> Value {
        self.env
            .get_object("admissionregistration.k8s.io", "v1", plural, None, name)
            .unwrap()
    }

    /// The caBundle of a configuration, once its reconciler has written one.
    fn ca_bundle(&self, plural: &str, name: &str) -> Option<Vec<u8>> {
        let config = self.configuration(plural, name);
        base64_decode(config["webhooks"][0]["clientConfig"]["caBundle"].as_str()?)
    }

    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
    }
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// Waits for `check` to hold, polling; panics naming `what` if it never does.
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    for _ in 0..400 {
        if let Some(value) = check() {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} never happened");
}

/// The test's clock, for the client's certificate checks too.
#[derive(Debug)]
struct TestTime(Arc<Mutex<SystemTime>>);

impl rustls::time_provider::TimeProvider for TestTime {
    fn current_time(&self) -> Option<rustls::pki_types::UnixTime> {
        let since = self.0.lock().duration_since(SystemTime::UNIX_EPOCH).ok()?;
        Some(rustls::pki_types::UnixTime::since_unix_epoch(since))
    }
}

/// A keep-alive HTTPS connection to the webhook trusting only `ca`, by the
/// Service's DNS name as the API server calls it, at the time of `clock`.
async fn connect(
    port: u16,
    ca: &[u8],
    clock: &Arc<Mutex<SystemTime>>,
) -> Result<SendRequest<Full<Bytes>>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_details(
        Arc::new(rustls::crypto::ring::default_provider()),
        Arc::new(TestTime(clock.clone())),
    )
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("webhook.knative-samples.svc").map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn post(sender: &mut SendRequest<Full<Bytes>>, path: &str, body: &Value) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into())),
    )
}

async fn get(sender: &mut SendRequest<Full<Bytes>>, path: &str) -> (StatusCode, String) {
    let request = Request::get(path).body(Full::new(Bytes::new())).unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn review(uid: &str, kind: &str, plural: &str, group: &str, object: Value) -> Value {
    let version = if group.is_empty() { "v1" } else { "v1alpha1" };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "namespace": NS,
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": object,
        }
    })
}

fn asvc_review(uid: &str, service_name: &str) -> Value {
    review(
        uid,
        "AddressableService",
        "addressableservices",
        "samples.knative.dev",
        json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
               "metadata": {"name": "asvc", "namespace": NS}, "spec": {"serviceName": service_name}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_configures_itself_and_answers_reviews_over_https() {
    let running = start().await;
    let ca = eventually("the certificates Secret is filled", || {
        running.secret_data(CA_CERT)
    })
    .await;
    for (plural, name) in crate::CONFIGURATIONS {
        let bundle = eventually(&format!("{name} gets its caBundle"), || {
            running.ca_bundle(plural, name)
        })
        .await;
        assert_eq!(bundle, ca, "{name}");
    }
    let validation = running.configuration(
        "validatingwebhookconfigurations",
        "validation.webhook.knative-samples.knative.dev",
    );
    let entry = &validation["webhooks"][0];
    assert_eq!(entry["clientConfig"]["service"]["path"], "/resource-validation");
    // A rule per kind and version the generated registry lists, whatever
    // kinds the app has.
    let mut rules: Vec<String> = entry["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    let mut want: Vec<String> = generated::registry::custom_kinds()
        .iter()
        .map(|kind| {
            json!({"apiGroups": [kind.group], "apiVersions": [kind.version],
                   "operations": ["CREATE", "UPDATE", "DELETE"],
                   "resources": [kind.plural, format!("{}/status", kind.plural)]})
            .to_string()
        })
        .collect();
    rules.sort();
    want.sort();
    assert_eq!(rules, want);
    assert_eq!(
        entry["namespaceSelector"],
        json!({"matchExpressions": [{"key": "webhooks.knative.dev/exclude", "operator": "DoesNotExist"}]})
    );
    let config = running.configuration(
        "validatingwebhookconfigurations",
        "config.webhook.knative-samples.knative.dev",
    );
    assert_eq!(
        config["webhooks"][0]["namespaceSelector"],
        json!({"matchExpressions": [{"key": "samples.knative.dev/release", "operator": "Exists"}]}),
        "the ConfigMap webhook keeps the manifest's selector"
    );
    assert_eq!(
        config["webhooks"][0]["rules"][0]["resources"],
        json!(["configmaps/*"])
    );

    let mut https = eventually_connect(running.port, &ca, &running.clock).await;
    let (status, body) = post(&mut https, "/resource-validation", &asvc_review("u-1", "")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    assert_eq!(body["response"]["uid"], "u-1");
    assert_eq!(body["response"]["allowed"], false);
    assert_eq!(
        body["response"]["status"]["message"],
        "validation failed: missing field(s): spec.serviceName"
    );
    assert_eq!(body["response"]["status"]["code"], 400);

    let (_, body) = post(&mut https, "/resource-validation", &asvc_review("u-2", "webhook")).await;
    assert_eq!(body["response"]["allowed"], true);

    let sd = review(
        "u-3",
        "SimpleDeployment",
        "simpledeployments",
        "samples.knative.dev",
        json!({"metadata": {"name": "sd", "namespace": NS}, "spec": {"image": "img", "replicas": 1}}),
    );
    let (_, body) = post(&mut https, "/defaulting", &sd).await;
    assert_eq!(body["response"]["allowed"], true);

    let bad_logging = review(
        "u-4",
        "ConfigMap",
        "configmaps",
        "",
        json!({"metadata": {"name": "config-logging", "namespace": NS}, "data": {"loglevel.controller": "chatty"}}),
    );
    let (_, body) = post(&mut https, "/config-validation", &bad_logging).await;
    assert_eq!(
        body["response"]["status"]["message"],
        "validation failed: invalid log level \"chatty\" in loglevel.controller; use one of debug, info, warn, error, dpanic, panic, fatal"
    );

    assert_eq!(
        get(&mut https, "/").await,
        (
            StatusCode::BAD_REQUEST,
            "no controller registered for: /".to_owned()
        )
    );
    assert_eq!(
        get(&mut https, "/health").await,
        (StatusCode::OK, "ok".to_owned())
    );
    assert_eq!(
        get(&mut https, "/readiness").await,
        (StatusCode::OK, "ok".to_owned())
    );
    let (status, body) = post(&mut https, "/resource-validation", &json!({"not": "a review"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.as_str()
            .unwrap_or_default()
            .starts_with("could not decode body:"),
        "{body}"
    );
    running.stop().await;
}

/// The server may get its certificate from the informer a moment after the
/// Secret was written.
async fn eventually_connect(
    port: u16,
    ca: &[u8],
    clock: &Arc<Mutex<SystemTime>>,
) -> SendRequest<Full<Bytes>> {
    let mut last = String::new();
    for _ in 0..400 {
        match connect(port, ca, clock).await {
            Ok(sender) => return sender,
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no TLS connection trusting the CA: {last}");
}

/// 200 reviews on a connection opened before a renewal, each answered;
/// answers how many were.
fn keep_posting(mut before: SendRequest<Full<Bytes>>) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut answered = 0;
        for i in 0..200 {
            let (status, body) = post(
                &mut before,
                "/resource-validation",
                &asvc_review(&format!("r-{i}"), "webhook"),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "request {i}");
            assert_eq!(body["response"]["allowed"], true, "request {i}: {body}");
            answered += 1;
            tokio::task::yield_now().await;
        }
        answered
    })
}

impl Running {
    /// Waits until the defaulting configuration's caBundle is `want`.
    async fn wait_for_bundle(&self, what: &str, want: &[u8]) {
        eventually(&format!("the caBundle to carry {what}"), || {
            (self
                .ca_bundle(
                    "mutatingwebhookconfigurations",
                    "defaulting.webhook.knative-samples.knative.dev",
                )
                .as_deref()
                == Some(want))
            .then_some(())
        })
        .await;
    }
}

/// A client that, like the API server, opens new connections trusting
/// whatever caBundle the configuration carries at that moment, until the
/// flag drops; answers how many handshakes succeeded and the failures.
type Throughout = tokio::task::JoinHandle<(usize, Vec<String>)>;

fn connect_throughout(running: &Running) -> (Arc<std::sync::atomic::AtomicBool>, Throughout) {
    let (env, clock, port) = (running.env.clone(), running.clock.clone(), running.port);
    let rotating = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let still = rotating.clone();
    let watcher = tokio::spawn(async move {
        let (mut handshakes, mut failures) = (0, Vec::new());
        while still.load(std::sync::atomic::Ordering::SeqCst) {
            let config = env
                .get_object(
                    "admissionregistration.k8s.io",
                    "v1",
                    "mutatingwebhookconfigurations",
                    None,
                    "defaulting.webhook.knative-samples.knative.dev",
                )
                .unwrap();
            let bundle = base64_decode(
                config["webhooks"][0]["clientConfig"]["caBundle"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
            match connect(port, &bundle, &clock).await {
                Ok(_) => handshakes += 1,
                Err(e) => failures.push(e),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (handshakes, failures)
    });
    (rotating, watcher)
}

/// Reconciles the certificates Secret until `done` holds (the reconciler
/// reads its informer, which follows its own writes a moment later).
async fn reconcile_until(running: &Running, what: &str, mut done: impl FnMut(&Running) -> bool) {
    for _ in 0..400 {
        running.controllers[0]
            .reconcile_once(&ObjectKey::new("knative-samples", "webhook-certs"))
            .await
            .ok();
        if done(running) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} never happened");
}

/// New connections trust the new CA and get an answer; the old CA no
/// longer verifies.
async fn only_the_new_ca_verifies(running: &Running, new_ca: &[u8], old_ca: &[u8]) {
    let port = running.port;
    let mut after = eventually_connect(port, new_ca, &running.clock).await;
    let (_, body) = post(&mut after, "/resource-validation", &asvc_review("n-1", "")).await;
    assert_eq!(
        body["response"]["status"]["message"],
        "validation failed: missing field(s): spec.serviceName"
    );
    let refused = connect(port, old_ca, &running.clock)
        .await
        .err()
        .unwrap_or_default();
    assert!(
        refused.contains("invalid peer certificate"),
        "the old CA no longer verifies: {refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_certificate_rotates_in_three_steps_without_a_failed_handshake() {
    let running = start().await;
    let old_ca = eventually("the certificates Secret is filled", || {
        running.secret_data(CA_CERT)
    })
    .await;
    let old_cert = running.secret_data(SERVER_CERT).unwrap();
    let before = eventually_connect(running.port, &old_ca, &running.clock).await;

    // A day before expiry nothing changes.
    *running.clock.lock() += Duration::from_secs(5 * 24 * 3600);
    let certificates = &running.controllers[0];
    certificates
        .reconcile_once(&ObjectKey::new("knative-samples", "webhook-certs"))
        .await
        .ok();
    assert_eq!(running.secret_data(SERVER_CERT).unwrap(), old_cert);

    // Reviews keep flowing on a connection opened before the renewal, while
    // the clock passes the renewal point and the reconciler replaces the
    // certificates.
    let flowing = keep_posting(before);
    let (rotating, watcher) = connect_throughout(&running);

    // Step 1: the new CA joins the bundle; the serving certificate stays.
    *running.clock.lock() += Duration::from_secs(24 * 3600 + 60);
    certificates
        .reconcile_once(&ObjectKey::new("knative-samples", "webhook-certs"))
        .await
        .ok();
    let bundle = running.secret_data(CA_CERT).unwrap();
    let bundle_text = String::from_utf8_lossy(&bundle).into_owned();
    assert!(
        bundle_text.contains(String::from_utf8_lossy(&old_ca).trim()),
        "the old CA stays"
    );
    assert_eq!(
        bundle_text.matches("BEGIN CERTIFICATE").count(),
        2,
        "{bundle_text}"
    );
    assert_eq!(
        running.secret_data(SERVER_CERT).unwrap(),
        old_cert,
        "not switched yet"
    );
    let new_ca = running.secret_data(NEXT_CA_CERT).unwrap();
    assert_eq!(
        flowing.await.unwrap(),
        200,
        "no request failed during the renewal"
    );

    // Step 2: once the configurations carry both, the certificate switches.
    running.wait_for_bundle("both CAs", &bundle).await;
    reconcile_until(&running, "the next step", |r| {
        r.secret_data(SERVER_CERT).unwrap() != old_cert
    })
    .await;
    assert_ne!(running.secret_data(SERVER_CERT).unwrap(), old_cert, "switched");
    assert_eq!(
        running.secret_data(CA_CERT).unwrap(),
        bundle,
        "both CAs stay a while"
    );

    // Step 3: a minute later the old CA leaves the bundle.
    *running.clock.lock() += kinject_webhook::certificates::RETIRE_AFTER + Duration::from_secs(1);
    reconcile_until(&running, "the next step", |r| {
        r.secret_data(CA_CERT).unwrap() == new_ca
    })
    .await;
    assert_eq!(
        running.secret_data(CA_CERT).unwrap(),
        new_ca,
        "only the new CA is left"
    );

    // The configurations follow, and new connections get the new certificate
    // from the same server.
    running.wait_for_bundle("the new CA alone", &new_ca).await;
    rotating.store(false, std::sync::atomic::Ordering::SeqCst);
    let (handshakes, failures) = watcher.await.unwrap();
    assert!(
        failures.is_empty(),
        "{} of {handshakes} handshakes failed: {failures:?}",
        failures.len()
    );
    assert!(handshakes > 10, "the client connected throughout: {handshakes}");
    only_the_new_ca_verifies(&running, &new_ca, &old_ca).await;
    running.stop().await;
}
