//! An HTTPS server for webhook reviews, trusted through a `caBundle`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// A CA and an HTTPS server holding a certificate it signed for a host,
/// answering each review (admission or conversion) it is POSTed with
/// `respond`, and keeping the reviews it saw (each with the `path` it was
/// sent to).
pub struct ReviewServer {
    pub addr: SocketAddr,
    pub ca_pem: String,
    reviews: Arc<Mutex<Vec<Value>>>,
}

type Respond = dyn Fn(&Value) -> Value + Send + Sync;

impl ReviewServer {
    pub async fn start(host: &str, respond: impl Fn(&Value) -> Value + Send + Sync + 'static) -> Self {
        let (acceptor, ca_pem) = tls_acceptor(host);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reviews = Arc::new(Mutex::new(Vec::new()));
        let respond: Arc<Respond> = Arc::new(respond);
        let seen = Arc::clone(&reviews);
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let respond = Arc::clone(&respond);
                let seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let respond = Arc::clone(&respond);
                        let seen = Arc::clone(&seen);
                        async move {
                            let path = req.uri().to_string();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let mut review: Value = serde_json::from_slice(&body).unwrap();
                            review["path"] = json!(path);
                            seen.lock().unwrap().push(review.clone());
                            let out = respond(&review);
                            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from(
                                serde_json::to_vec(&out).unwrap(),
                            ))))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        Self {
            addr,
            ca_pem,
            reviews,
        }
    }

    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    pub fn reviews(&self) -> Vec<Value> {
        self.reviews.lock().unwrap().clone()
    }
}

/// A TLS acceptor presenting a certificate for `host`, signed by a new CA, and the
/// CA's PEM for the webhook's `caBundle`.
fn tls_acceptor(host: &str) -> (tokio_rustls::TlsAcceptor, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![host.to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (tokio_rustls::TlsAcceptor::from(Arc::new(config)), ca.pem())
}
