#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! The conversion webhook: reviews answered through the hub, failures that
//! name the object, the route over HTTPS, metrics, and the reconciler that
//! keeps each CRD's conversion pointed at the webhook through a CA rotation.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinject_runtime::apis::registry::CustomKind;
use kinject_runtime::controller::ObjectKey;
use kinject_runtime::injection::Context;
use kinject_runtime::reconciler::UniversalBucket;
use kinject_testenv::TestEnv;
use kinject_types::FieldError;
use kinject_types::conversion::{Convertible, Restored};
use kinject_webhook::configurations::Home;
use kinject_webhook::conversion::{CONVERSION_PATH, Conversion, ConversionMetrics, ConvertedKind};
use kinject_webhook::crds;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

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
    pub struct WidgetSpec {
        pub replicas: i32,
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

    /// The replica count as text.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct WidgetSpec {
        pub replicas: String,
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
            spec: v1::WidgetSpec { replicas },
        })
    }

    fn convert_from(hub: v1::Widget) -> Result<Self, FieldError> {
        Ok(v1alpha1::Widget {
            metadata: hub.metadata,
            spec: v1alpha1::WidgetSpec {
                replicas: hub.spec.replicas.to_string(),
            },
        })
    }
}

fn kinds() -> Vec<CustomKind> {
    vec![
        CustomKind::of::<v1::Widget>(),
        CustomKind::of::<v1alpha1::Widget>().converted::<v1alpha1::Widget>(),
    ]
}

fn widget(version: &str, name: &str, replicas: Value) -> Value {
    json!({"apiVersion": format!("tutorial.example.com/{version}"), "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": replicas}})
}

fn review(desired: &str, objects: &[Value]) -> Vec<u8> {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "0b3e2f5c-1d1f-4e3a-9c55-2a6f0e6f5d01", "desiredAPIVersion": desired, "objects": objects}})
    .to_string()
    .into_bytes()
}

fn answer(conversion: &Conversion, body: &[u8]) -> Value {
    serde_json::from_str(&conversion.review(body, None).unwrap()).unwrap()
}

#[test]
fn a_review_converts_every_object_in_order_through_the_hub() {
    let conversion = Conversion::new(kinds());
    let objects = [widget("v1alpha1", "a", json!("3")), widget("v1", "b", json!(5))];
    let answered = answer(&conversion, &review("tutorial.example.com/v1", &objects));
    assert_eq!(answered["kind"], "ConversionReview");
    let response = &answered["response"];
    assert_eq!(response["uid"], "0b3e2f5c-1d1f-4e3a-9c55-2a6f0e6f5d01");
    assert_eq!(response["result"]["status"], "Success");
    assert_eq!(
        response["convertedObjects"],
        json!([widget("v1", "a", json!(3)), widget("v1", "b", json!(5))])
    );
    assert_eq!(
        conversion.kinds(),
        [ConvertedKind {
            group: "tutorial.example.com".into(),
            kind: "Widget".into(),
            crd_name: "widgets.tutorial.example.com".into(),
        }]
    );
}

#[test]
fn a_review_fails_whole_naming_the_object_that_does_not_convert() {
    let conversion = Conversion::new(kinds());
    for (objects, desired, message) in [
        (
            vec![
                widget("v1alpha1", "a", json!("3")),
                widget("v1alpha1", "bad", json!("three")),
            ],
            "tutorial.example.com/v1",
            "converting Widget default/bad from tutorial.example.com/v1alpha1 to tutorial.example.com/v1: \
             invalid value: three: spec.replicas",
        ),
        (
            vec![widget("v1", "a", json!(3))],
            "tutorial.example.com/v2",
            "converting Widget default/a from tutorial.example.com/v1 to tutorial.example.com/v2: \
             Widget.tutorial.example.com has no version \"v2\"; its versions are v1, v1alpha1",
        ),
        (
            vec![
                json!({"apiVersion": "tutorial.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}),
            ],
            "tutorial.example.com/v1alpha1",
            "converting Gadget g from tutorial.example.com/v1 to tutorial.example.com/v1alpha1: \
             no kind Gadget in group \"tutorial.example.com\" is registered here",
        ),
        (
            vec![json!(42)],
            "tutorial.example.com/v1",
            "objects[0] is not a Kubernetes object: it needs apiVersion and kind",
        ),
        (
            vec![widget("v1", "a", json!({"nested": true}))],
            "tutorial.example.com/v1alpha1",
            "converting Widget default/a from tutorial.example.com/v1 to tutorial.example.com/v1alpha1: \
             the object is not a Widget v1: invalid type: map, expected i32",
        ),
    ] {
        let response = &answer(&conversion, &review(desired, &objects))["response"];
        assert_eq!(response["result"]["status"], "Failure", "{message}");
        assert!(
            response["result"]["message"]
                .as_str()
                .unwrap()
                .starts_with(message),
            "{}\nwanted: {message}",
            response["result"]["message"]
        );
        assert_eq!(response["convertedObjects"], json!([]));
    }
}

#[test]
fn a_body_that_is_no_review_is_an_error_not_a_panic() {
    let conversion = Conversion::new(kinds());
    for body in [
        &b"{not json"[..],
        br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}"#,
    ] {
        let err = conversion.review(body, None).unwrap_err();
        assert!(err.to_string().starts_with("could not decode body"), "{err}");
    }
}

#[test]
fn every_object_converted_is_counted_by_kind_versions_and_result() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ConversionMetrics::register(&mut registry);
    let conversion = Conversion::new(kinds());
    let objects = [
        widget("v1alpha1", "a", json!("3")),
        widget("v1alpha1", "b", json!("4")),
    ];
    conversion
        .review(&review("tutorial.example.com/v1", &objects), Some(&metrics))
        .unwrap();
    let bad = [widget("v1alpha1", "c", json!("x"))];
    conversion
        .review(&review("tutorial.example.com/v1", &bad), Some(&metrics))
        .unwrap();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for series in [
        "webhook_conversion_count_total{kind_group=\"tutorial.example.com\",kind_kind=\"Widget\",from_version=\"v1alpha1\",to_version=\"v1\",result=\"success\"} 2",
        "webhook_conversion_count_total{kind_group=\"tutorial.example.com\",kind_kind=\"Widget\",from_version=\"v1alpha1\",to_version=\"v1\",result=\"failure\"} 1",
    ] {
        assert!(text.contains(series), "{series}\n{text}");
    }
}

/// The webhook's routes serve reviews at the conversion path.
#[test]
fn the_webhook_routes_conversion_reviews() {
    let webhook = kinject_webhook::Webhook::new(
        "knative-samples",
        kinds(),
        kinject_webhook::admission::ConfigValidation::sharedmain(str::to_owned),
        kinject_webhook::Options::default(),
    );
    assert!(format!("{:?}", webhook.routes()).contains(CONVERSION_PATH));
    let names: Vec<&str> = webhook.constructors().iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        [
            "webhookcertificates",
            "defaultingwebhook",
            "validationwebhook",
            "configmapwebhook",
            crds::QUEUE
        ]
    );
}

fn crd() -> CustomResourceDefinition {
    let definitions = kinject_runtime::apis::registry::custom_resource_definitions(&kinds()).unwrap();
    definitions.into_iter().next().unwrap().crd
}

fn certs(ca: &str) -> Secret {
    Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("webhook-certs".into()),
            namespace: Some("knative-samples".into()),
            ..Default::default()
        },
        data: Some([("ca-cert.pem".to_owned(), ByteString(ca.as_bytes().to_vec()))].into()),
        ..Default::default()
    }
}

fn ca_bundle(crd: &CustomResourceDefinition) -> Option<Vec<u8>> {
    let webhook = crd.spec.conversion.as_ref()?.webhook.as_ref()?;
    Some(webhook.client_config.as_ref()?.ca_bundle.as_ref()?.0.clone())
}

/// The reconciler points the CRD at the webhook with the Secret's CA, and
/// follows the CA when it rotates.
#[tokio::test]
async fn the_crds_conversion_follows_the_certificates() {
    let env = TestEnv::builder().namespace("knative-samples").build();
    let client = env.client();
    let crds_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds_api.create(&PostParams::default(), &crd()).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "knative-samples");
    secrets
        .create(&PostParams::default(), &certs("CA one"))
        .await
        .unwrap();

    let ctx = Context::new(client);
    let home = Home {
        namespace: "knative-samples".into(),
        secret: "webhook-certs".into(),
        namespace_owns_configurations: false,
    };
    let controller = crds::new_controller(&ctx, &Conversion::new(kinds()).kinds(), "webhook", &home);
    let stop = tokio_util::sync::CancellationToken::new();
    ctx.start_informers(&stop);
    ctx.wait_for_cache_sync(Duration::from_secs(10)).await.unwrap();
    controller.promote_initial(Arc::new(UniversalBucket));
    let key = ObjectKey::new("", "widgets.tutorial.example.com");

    let action = controller.reconcile_once(&key).await.unwrap();
    assert_eq!(action.requeue_delay(), None);
    let stored = crds_api.get("widgets.tutorial.example.com").await.unwrap();
    let conversion = stored.spec.conversion.as_ref().unwrap();
    assert_eq!(conversion.strategy, "Webhook");
    let service = conversion
        .webhook
        .as_ref()
        .unwrap()
        .client_config
        .as_ref()
        .unwrap()
        .service
        .as_ref()
        .unwrap();
    assert_eq!(
        (
            service.name.as_str(),
            service.namespace.as_str(),
            service.path.as_deref()
        ),
        ("webhook", "knative-samples", Some(CONVERSION_PATH))
    );
    assert_eq!(ca_bundle(&stored).as_deref(), Some(&b"CA one"[..]));

    let mut rotated = secrets.get("webhook-certs").await.unwrap();
    rotated.data = certs("CA two").data;
    secrets
        .replace("webhook-certs", &PostParams::default(), &rotated)
        .await
        .unwrap();
    let mut seen = None;
    for _ in 0..200 {
        let _awaits_change = controller.reconcile_once(&key).await.unwrap();
        seen = ca_bundle(&crds_api.get("widgets.tutorial.example.com").await.unwrap());
        if seen.as_deref() == Some(&b"CA two"[..]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        seen.as_deref(),
        Some(&b"CA two"[..]),
        "the CA follows the rotation"
    );
    stop.cancel();
}

#[derive(Debug)]
struct FixedCertificate(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for FixedCertificate {
    fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// POSTs `body` to `path` over TLS on a fresh connection: the status and
/// the answer.
async fn post_over_tls(ca: &str, port: u16, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    use http_body_util::{BodyExt, Full};
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("webhook.knative-samples.svc").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes().to_vec(),
    )
}

/// The webhook's routes over TLS, as the API server calls them: a review
/// converted, a review failed naming its object, and a body that is no
/// review refused with a status that says so, the connection kept.
#[tokio::test]
async fn conversion_reviews_are_answered_over_https() {
    use rustls::pki_types::pem::PemObject;
    let certs = kinject_webhook::certificates::Certificates::generate(
        "webhook",
        "knative-samples",
        "cluster.local",
        std::time::SystemTime::now(),
    )
    .unwrap();
    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(certs.server_cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(certs.server_key.as_bytes()).unwrap();
    let key =
        rustls::sign::CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider()).unwrap();
    let tls =
        Arc::new(kinject_webhook::server::tls_config(Arc::new(FixedCertificate(Arc::new(key)))).unwrap());
    let routes = kinject_webhook::server::Routes::new().conversion(CONVERSION_PATH, Conversion::new(kinds()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(kinject_webhook::server::serve(
        listener,
        tls,
        routes,
        Duration::ZERO,
        stop.clone(),
    ));

    // A review to v1, answered 200 whether it converts or not.
    let convert = async |objects: &[Value]| -> Value {
        let (status, body) = post_over_tls(
            &certs.ca_cert,
            port,
            CONVERSION_PATH,
            review("tutorial.example.com/v1", objects),
        )
        .await;
        assert_eq!(status, 200);
        serde_json::from_slice(&body).unwrap()
    };
    let answered = convert(&[
        widget("v1alpha1", "a", json!("3")),
        widget("v1alpha1", "b", json!("4")),
    ])
    .await;
    assert_eq!(answered["response"]["result"]["status"], "Success", "{answered}");
    assert_eq!(
        answered["response"]["convertedObjects"],
        json!([widget("v1", "a", json!(3)), widget("v1", "b", json!(4))])
    );

    let answered = convert(&[
        widget("v1alpha1", "a", json!("3")),
        widget("v1alpha1", "b", json!("many")),
    ])
    .await;
    assert_eq!(answered["response"]["result"]["status"], "Failure", "{answered}");
    let message = answered["response"]["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("Widget default/b") && message.contains("spec.replicas"),
        "{message}"
    );

    let (status, body) = post_over_tls(&certs.ca_cert, port, CONVERSION_PATH, b"{not json".to_vec()).await;
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    stop.cancel();
}
