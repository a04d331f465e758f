//! The `webhook` binary against testenv's API server over loopback HTTP,
//! loaded with `config/`: it fills its Secret and configurations, answers
//! reviews over HTTPS, so that testenv, calling it as kube-apiserver does,
//! refuses an invalid AddressableService and a bad config-logging with the
//! webhook's message; it runs as its service account on a testenv that
//! refuses what `config/`'s webhook RBAC does not grant, stops on SIGTERM
//! with status 0, and exits 1 with the reason on bad setup.
#![allow(
    clippy::too_many_lines,
    reason = "a scenario test reads best top to bottom, in one function"
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use kinject_testenv::TestEnv;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

const NS: &str = "knative-samples";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Applies `files` of `config/` after the CRD of every kind the generated
/// registry lists, so a kind added to the app is served here too.
fn apply(env: &TestEnv, files: &[&str]) {
    for crd in generated::testing::custom_resource_definitions().unwrap() {
        env.install_crd(crd).unwrap();
    }
    for file in files {
        let text = std::fs::read_to_string(repo().join("config").join(file)).unwrap();
        env.create_from_yaml(file, &text)
            .unwrap_or_else(|e| panic!("applying {file}: {e}"));
    }
}

fn dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("webhook-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Webhook {
    child: Child,
    log: PathBuf,
    stderr: PathBuf,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(kubeconfig: &Path, dir: &Path, env: &[(&str, &str)]) -> Webhook {
    start_with(kubeconfig, dir, env, &[])
}

fn start_with(kubeconfig: &Path, dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Webhook {
    let log = dir.join("webhook.log");
    let stderr = dir.join("webhook.stderr");
    let child = Command::new(env!("CARGO_BIN_EXE_webhook"))
        .args(["--kubeconfig"])
        .arg(kubeconfig)
        .args([
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--drain-period",
            "0s",
        ])
        .args(args)
        .env("SYSTEM_NAMESPACE", NS)
        .env("POD_NAME", "webhook-0")
        .env("METRICS_PROMETHEUS_PORT", "0")
        .env("PROBES_PORT", "0")
        .envs(env.iter().copied())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    Webhook { child, log, stderr }
}

impl Webhook {
    /// The first log line with message `msg`.
    fn log_line(&self, msg: &str) -> Option<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["msg"] == msg)
    }

    /// The port of the HTTPS server, from its log.
    fn port(&self) -> Option<u16> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["msg"] == "Serving admission webhooks over TLS")
            .and_then(|l| l["address"].as_str()?.rsplit(':').next()?.parse().ok())
    }

    fn terminate(mut self) -> ExitStatus {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the webhook did not stop"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_configures_itself_answers_over_https_within_its_rbac_and_stops_cleanly() {
    let dir = dir("e2e");
    let env = TestEnv::new();
    apply(
        &env,
        &[
            "100-namespace.yaml",
            "config-logging.yaml",
            "config-leader-election.yaml",
            "config-observability.yaml",
            "400-webhook-service.yaml",
            "500-webhook-configuration.yaml",
            "200-webhook-serviceaccount.yaml",
            "200-webhook-clusterrole.yaml",
            "200-webhook-role.yaml",
            "201-webhook-clusterrolebinding.yaml",
            "201-webhook-rolebinding.yaml",
        ],
    );
    let server = env.serve().await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // As its service account: testenv refuses what config/'s webhook RBAC does not grant.
    let token = env.service_account_token(NS, "webhook");
    std::fs::write(&kubeconfig, server.kubeconfig_with_token(&token)).unwrap();
    let webhook = start(&kubeconfig, &dir, &[]);

    let ca = wait_for("the webhook fills its Secret", || {
        let secret = env.get_object("", "v1", "secrets", Some(NS), "webhook-certs")?;
        decode(secret["data"]["ca-cert.pem"].as_str()?)
    })
    .await;
    for (plural, name) in crate::CONFIGURATIONS {
        wait_for(&format!("{name} trusts the CA"), || {
            let config = env.get_object("admissionregistration.k8s.io", "v1", plural, None, name)?;
            (decode(config["webhooks"][0]["clientConfig"]["caBundle"].as_str()?)? == ca).then_some(())
        })
        .await;
    }
    let port = wait_for("the HTTPS server", || webhook.port()).await;

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("webhook.knative-samples.svc").unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e2e",
            "kind": {"group": "samples.knative.dev", "version": "v1alpha1", "kind": "AddressableService"},
            "resource": {"group": "samples.knative.dev", "version": "v1alpha1", "resource": "addressableservices"},
            "operation": "CREATE",
            "userInfo": {},
            "object": {"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
                       "metadata": {"name": "a", "namespace": NS}, "spec": {"serviceName": "Not_A_Name"}},
        }
    });
    let request = http::Request::post("/resource-validation")
        .body(Full::new(Bytes::from(review.to_string())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let message = body["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("validation failed: invalid value: Not_A_Name: spec.serviceName"),
        "{body}"
    );

    // The API server calls it: testenv reaches the webhook Service where it listens.
    env.route_service(NS, "webhook", 443, SocketAddr::from(([127, 0, 0, 1], port)));
    let client = server.client().unwrap();
    let asvcs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &asvc_resource());
    let invalid: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "invalid", "namespace": NS}, "spec": {"serviceName": "Not_A_Name"}}))
    .unwrap();
    let refused = match asvcs.create(&PostParams::default(), &invalid).await {
        Err(kube::Error::Api(status)) => status,
        other => panic!("an invalid serviceName must be refused, got {other:?}"),
    };
    assert_eq!(refused.code, 400, "{refused:?}");
    assert!(
        refused.message.starts_with(
            "addressableservices.samples.knative.dev \"invalid\" is forbidden: admission webhook \
             \"validation.webhook.knative-samples.knative.dev\" denied the request: validation failed: \
             invalid value: Not_A_Name: spec.serviceName"
        ),
        "{}",
        refused.message
    );
    assert!(
        env.get_object(
            "samples.knative.dev",
            "v1alpha1",
            "addressableservices",
            Some(NS),
            "invalid"
        )
        .is_none()
    );
    let valid: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "valid", "namespace": NS}, "spec": {"serviceName": "webhook"}}))
    .unwrap();
    asvcs.create(&PostParams::default(), &valid).await.unwrap();
    // A ConfigMap the controller would refuse at start is refused at apply time.
    let config_maps: Api<ConfigMap> = Api::namespaced(client, NS);
    let bad_logging: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "config-logging", "namespace": NS},
        "data": {"loglevel.controller": "loud"}}))
    .unwrap();
    let refused = match config_maps
        .replace("config-logging", &PostParams::default(), &bad_logging)
        .await
    {
        Err(kube::Error::Api(status)) => status,
        other => panic!("a bad config-logging must be refused, got {other:?}"),
    };
    assert!(
        refused
            .message
            .contains("admission webhook \"config.webhook.knative-samples.knative.dev\" denied the request"),
        "{}",
        refused.message
    );

    let status = webhook.terminate();
    assert!(status.success(), "{status}");
    assert_eq!(
        env.denied_requests(),
        Vec::<String>::new(),
        "requests config/ does not grant the webhook"
    );
}

fn asvc_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("samples.knative.dev", "v1alpha1", "AddressableService"),
        "addressableservices",
    )
}

/// `GET path` over plain HTTP on loopback; the body.
async fn get(port: u16, path: &str) -> String {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = http::Request::get(path).body(Full::new(Bytes::new())).unwrap();
    let response = sender.send_request(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

/// The webhook runs through the same process wiring as the controller: its
/// reconcilers are constructors, so one named in `--disable-controllers` is
/// never built and asks for no informer, the client's default limits count
/// the reconcilers that run, and every informer resyncs at
/// `--resync-period`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_honours_the_process_flags_as_the_controller_does() {
    let dir = dir("flags");
    let env = TestEnv::new();
    apply(
        &env,
        &[
            "100-namespace.yaml",
            "400-webhook-service.yaml",
            "500-webhook-configuration.yaml",
        ],
    );
    let server = env.serve().await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let webhook = start_with(
        &kubeconfig,
        &dir,
        &[],
        &[
            "--resync-period",
            "1s",
            "--disable-controllers",
            "defaultingwebhook",
        ],
    );

    let starting = wait_for("the start line", || webhook.log_line("Starting webhook")).await;
    // Four reconcilers but the one disabled, and the conversion webhook's
    // when a kind converts through a hub.
    let converted = generated::registry::custom_kinds().iter().any(|k| k.hub);
    let controllers = 3 + usize::from(converted);
    assert_eq!(starting["controllers"], controllers, "{starting}");
    assert_eq!(starting["burst"], 10 * controllers, "{starting}");
    let informers = wait_for("the informers line", || webhook.log_line("Starting informers...")).await;
    let informers = informers["informers"].as_str().unwrap_or_default().to_owned();
    assert!(
        !informers.contains("MutatingWebhookConfiguration"),
        "the disabled reconciler's informer was registered: {informers}"
    );
    assert!(
        informers.contains("Secret v1 webhook-certs in knative-samples"),
        "{informers}"
    );

    let metrics = wait_for("the metrics address", || {
        let line = webhook.log_line("Serving /metrics")?;
        line["address"].as_str()?.rsplit(':').next()?.parse::<u16>().ok()
    })
    .await;
    let adds = |text: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(r#"workqueue_adds_total{name="webhookcertificates"}"#))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    // Once the Secret and the configurations settled, nothing but a resync
    // of the Secret informer adds the Secret's key again.
    let ca = wait_for("the webhook fills its Secret", || {
        let secret = env.get_object("", "v1", "secrets", Some(NS), "webhook-certs")?;
        decode(secret["data"]["ca-cert.pem"].as_str()?)
    })
    .await;
    for name in [
        "validation.webhook.knative-samples.knative.dev",
        "config.webhook.knative-samples.knative.dev",
    ] {
        wait_for(&format!("{name} trusts the CA"), || {
            let config = env.get_object(
                "admissionregistration.k8s.io",
                "v1",
                "validatingwebhookconfigurations",
                None,
                name,
            )?;
            (decode(config["webhooks"][0]["clientConfig"]["caBundle"].as_str()?)? == ca).then_some(())
        })
        .await;
    }
    let settled = adds(&get(metrics, "/metrics").await);
    let started = Instant::now();
    loop {
        let count = adds(&get(metrics, "/metrics").await);
        if count >= settled + 3.0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the certificates reconciler was not resynced every second: {count} adds, {settled} when settled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !get(metrics, "/metrics")
            .await
            .contains(r#"name="defaultingwebhook""#),
        "a disabled reconciler has no queue"
    );
    assert!(webhook.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_setup_exits_1_saying_what_and_how_to_fix_it() {
    let dir = dir("bad-setup");
    let output = Command::new(env!("CARGO_BIN_EXE_webhook"))
        .env_remove("SYSTEM_NAMESPACE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("webhook: SYSTEM_NAMESPACE is not set."),
        "{stderr}"
    );

    let env = TestEnv::new();
    apply(&env, &["100-namespace.yaml"]);
    env.create_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "config-leader-election", "namespace": NS}, "data": {"buckets": "11"}}))
        .unwrap();
    let server = env.serve().await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let mut webhook = start(&kubeconfig, &dir, &[]);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = webhook.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the webhook did not exit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(1));
    let stderr = std::fs::read_to_string(&webhook.stderr).unwrap();
    assert!(
        stderr.starts_with(
            "webhook: ConfigMap knative-samples/config-leader-election is invalid: buckets: value must be between 1 and 10, got 11 ("
        ),
        "{stderr}"
    );
}
