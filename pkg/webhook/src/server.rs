//! The HTTPS server: rustls (TLS 1.2 and 1.3 only) with a certificate
//! resolver that reads the certificates Secret from its informer on every
//! handshake, so a renewed certificate is served without a restart; HTTP/1.1
//! with keep-alive; a drain period and a graceful stop.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Secret;
use kinject_runtime::lister::Lister;
use parking_lot::RwLock;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admission::{Admit, review_response_measured};
use crate::certificates::{SERVER_CERT, SERVER_KEY};

/// The largest AdmissionReview accepted: the API server's own request limit
/// is 3 MiB of object, and a review carries two.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// How long a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the certificate of a Secret, read from an informer's cache on each
/// handshake and parsed again only when the Secret's PEM changes.
pub struct SecretCertResolver {
    secrets: Lister<Secret>,
    namespace: String,
    name: String,
    provider: Arc<CryptoProvider>,
    cached: RwLock<Option<Parsed>>,
}

struct Parsed {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
}

impl fmt::Debug for SecretCertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretCertResolver")
            .field("secret", &format_args!("{}/{}", self.namespace, self.name))
            .finish_non_exhaustive()
    }
}

impl SecretCertResolver {
    /// Serves the `server-cert.pem` and `server-key.pem` of the Secret
    /// `namespace/name` in `secrets`.
    pub fn new(secrets: Lister<Secret>, namespace: &str, name: &str) -> Self {
        SecretCertResolver {
            secrets,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            cached: RwLock::new(None),
        }
    }

    /// The certificate to serve now, or why there is none.
    pub fn current(&self) -> Result<Arc<CertifiedKey>, String> {
        let secret = self
            .secrets
            .namespaced(&self.namespace)
            .get(&self.name)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!(
                    "no certificates configured: Secret {}/{} not found",
                    self.namespace, self.name
                )
            })?;
        let data = secret.data.as_ref();
        let (Some(cert), Some(key)) = (
            data.and_then(|d| d.get(SERVER_CERT)),
            data.and_then(|d| d.get(SERVER_KEY)),
        ) else {
            return Err(format!(
                "no certificates configured: Secret {}/{} has no {SERVER_CERT:?} and {SERVER_KEY:?} yet",
                self.namespace, self.name
            ));
        };
        if let Some(parsed) = self.cached.read().as_ref()
            && parsed.cert_pem == cert.0
            && parsed.key_pem == key.0
        {
            return Ok(parsed.key.clone());
        }
        let certified = self.parse(&cert.0, &key.0)?;
        *self.cached.write() = Some(Parsed {
            cert_pem: cert.0.clone(),
            key_pem: key.0.clone(),
            key: certified.clone(),
        });
        Ok(certified)
    }

    fn parse(&self, cert: &[u8], key: &[u8]) -> Result<Arc<CertifiedKey>, String> {
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{SERVER_CERT:?} is not PEM: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| format!("{SERVER_KEY:?} is not a PEM key: {e}"))?;
        let certified = CertifiedKey::from_der(chain, key, &self.provider)
            .map_err(|e| format!("{SERVER_CERT:?} and {SERVER_KEY:?} cannot be served: {e}"))?;
        Ok(Arc::new(certified))
    }
}

impl ResolvesServerCert for SecretCertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match self.current() {
            Ok(key) => Some(key),
            Err(why) => {
                tracing::warn!("TLS handshake refused: {why}");
                None
            }
        }
    }
}

/// The TLS configuration: TLS 1.2 and 1.3, no client certificates, HTTP/1.1,
/// the certificate from `resolver`.
pub fn tls_config(resolver: Arc<dyn ResolvesServerCert>) -> Result<ServerConfig, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The admission controllers by path (`/defaulting`, ...).
#[derive(Clone, Default)]
pub struct Routes {
    routes: BTreeMap<String, Arc<dyn Admit>>,
    metrics: Option<crate::metrics::AdmissionMetrics>,
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.routes.keys()).finish()
    }
}

impl Routes {
    /// No routes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `admit` at `path`.
    pub fn route(mut self, path: impl Into<String>, admit: Arc<dyn Admit>) -> Self {
        self.routes.insert(path.into(), admit);
        self
    }

    /// Counts and times every review in `metrics`.
    pub fn metrics(mut self, metrics: crate::metrics::AdmissionMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.into())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

async fn handle(
    routes: Arc<Routes>,
    draining: CancellationToken,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    if path == "/health" || path == "/readiness" {
        return Ok(if draining.is_cancelled() {
            text(StatusCode::INTERNAL_SERVER_ERROR, "shutting down")
        } else {
            text(StatusCode::OK, "ok")
        });
    }
    let Some(admit) = routes.routes.get(&path).cloned() else {
        return Ok(text(
            StatusCode::BAD_REQUEST,
            format!("no controller registered for: {path}"),
        ));
    };
    if request.method() != Method::POST {
        return Ok(text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{path} takes an AdmissionReview by POST"),
        ));
    }
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return Ok(text(StatusCode::BAD_REQUEST, format!("could not read body: {e}"))),
    };
    Ok(
        match review_response_measured(admit.as_ref(), &body, routes.metrics.as_ref()) {
            Ok(json) => {
                let mut response = Response::new(Full::new(Bytes::from(json)));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                response
            }
            Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
        },
    )
}

/// Serves `routes` over TLS on `listener` until `shutdown`; then answers the
/// probes 500 while it keeps serving for `drain` (so the API server stops
/// sending reviews to this replica first), stops accepting, lets reviews in
/// flight finish and closes idle keep-alive connections.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    routes: Routes,
    drain: Duration,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    let routes = Arc::new(routes);
    let connections = TaskTracker::new();
    let closing = CancellationToken::new();
    let stop_accepting = async {
        shutdown.cancelled().await;
        tokio::time::sleep(drain).await;
    };
    tokio::pin!(stop_accepting);
    loop {
        tokio::select! {
            () = &mut stop_accepting => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let _ = tcp.set_nodelay(true);
                    connections.spawn(connection(
                        tcp,
                        peer,
                        acceptor.clone(),
                        routes.clone(),
                        shutdown.clone(),
                        closing.clone(),
                    ));
                }
                Err(e) => {
                    // Out of file descriptors, typically: let some close.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    closing.cancel();
    connections.close();
    connections.wait().await;
    tracing::info!("Webhook server stopped");
}

async fn connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    routes: Arc<Routes>,
    draining: CancellationToken,
    closing: CancellationToken,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let service = service_fn(move |request| handle(routes.clone(), draining.clone(), request));
    let conn = http1::Builder::new().serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = closing.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
