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
use http_body_util::{BodyExt, Full};
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
use tracing::Instrument as _;

use crate::admission::{Admit, ReviewError, review_response_measured};
use crate::certificates::{SERVER_CERT, SERVER_KEY};
use crate::conversion::{Conversion, ConversionMetrics};

/// How long a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one client, or many, may hold of the server: bounds on memory,
/// time and connections, so a hostile or broken client cannot take the
/// webhook (and, through its `failurePolicy: Fail`, every write it admits)
/// down with it. The defaults fit the 200Mi memory limit of
/// `config/webhook.yaml`.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The largest AdmissionReview accepted, and so the most of the body
    /// budget one connection can hold (413 past it, by Content-Length before
    /// the body is read): the API server's own request limit is 3 MiB of
    /// object, and a review carries two.
    pub max_body: usize,
    /// The bytes of request bodies all connections may hold at once,
    /// counted as they arrive (not as a Content-Length promises them) and
    /// held until the review is answered. A body that needs more waits up to
    /// `stalled_body` × 2 while bodies that stalled give theirs back, then
    /// gets 429.
    pub body_budget: usize,
    /// How long a body may go without a byte while other bodies wait for
    /// the budget it holds; past it, it is cut off with 408 and its bytes
    /// freed. Unopposed, a body only has to arrive within `body_deadline`.
    pub stalled_body: Duration,
    /// How long a connection may take to send a request's head, from the
    /// handshake or the previous response (kube-apiserver's
    /// `ReadHeaderTimeout` is 32 s).
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive (408 past it); the API
    /// server gives up on a review after at most 30 s anyway.
    pub body_deadline: Duration,
    /// The most connections served at once; more are closed on accept.
    pub max_connections: usize,
    /// Reviews of at least this many bytes are decoded and admitted on a
    /// blocking thread, at most `max_heavy_reviews` at a time, so the async
    /// workers stay free for the probes and small reviews.
    pub heavy_review: usize,
    /// How many heavy reviews are worked on at once: a 3 MB review with
    /// 200,000 labels decodes to tens of megabytes and takes a core for a
    /// quarter of a second, so this bounds memory as much as CPU. Half the
    /// cores by default, at most 2, whatever the node's size: the memory
    /// limit does not grow with the cores.
    pub max_heavy_reviews: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: 16 * 1024 * 1024,
            body_budget: 32 * 1024 * 1024,
            stalled_body: Duration::from_secs(1),
            header_read_timeout: Duration::from_secs(10),
            body_deadline: Duration::from_secs(30),
            max_connections: 1024,
            heavy_review: 64 * 1024,
            // Half the cores: the other half keeps answering the probes and
            // small reviews while heavy ones run.
            max_heavy_reviews: std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 2)),
        }
    }
}

/// The shared side of [`Limits`]: the budgets requests draw from.
struct Budgets {
    limits: Limits,
    bodies: crate::bodies::Bodies,
    heavy: Arc<tokio::sync::Semaphore>,
}

impl Budgets {
    fn new(limits: Limits) -> Self {
        Budgets {
            bodies: crate::bodies::Bodies::new(limits.body_budget, limits.stalled_body),
            heavy: Arc::new(tokio::sync::Semaphore::new(limits.max_heavy_reviews.max(1))),
            limits,
        }
    }
}

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

/// The admission controllers and the conversion webhook by path
/// (`/defaulting`, `/resource-conversion`, ...).
#[derive(Clone, Default)]
pub struct Routes {
    routes: BTreeMap<String, Handler>,
    metrics: Option<crate::metrics::AdmissionMetrics>,
    conversion_metrics: Option<ConversionMetrics>,
    limits: Limits,
}

/// What a path serves.
#[derive(Clone)]
enum Handler {
    Admission(Arc<dyn Admit>),
    Conversion(Conversion),
}

impl Routes {
    /// The answer to `body` at the handler's path.
    fn answer(&self, handler: &Handler, body: &[u8]) -> Result<String, ReviewError> {
        match handler {
            Handler::Admission(admit) => {
                review_response_measured(admit.as_ref(), body, self.metrics.as_ref())
            }
            Handler::Conversion(conversion) => conversion.review(body, self.conversion_metrics.as_ref()),
        }
    }
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
        self.routes.insert(path.into(), Handler::Admission(admit));
        self
    }

    /// Serves `ConversionReview`s at `path` with `conversion`.
    pub fn conversion(mut self, path: impl Into<String>, conversion: Conversion) -> Self {
        self.routes.insert(path.into(), Handler::Conversion(conversion));
        self
    }

    /// Counts and times every admission review in `metrics`.
    pub fn metrics(mut self, metrics: crate::metrics::AdmissionMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Counts and times every object converted in `metrics`.
    pub fn conversion_metrics(mut self, metrics: ConversionMetrics) -> Self {
        self.conversion_metrics = Some(metrics);
        self
    }

    /// Serves within `limits` instead of [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
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
    budgets: Arc<Budgets>,
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
    let Some(handler) = routes.routes.get(&path).cloned() else {
        return Ok(text(
            StatusCode::BAD_REQUEST,
            format!("no controller registered for: {path}"),
        ));
    };
    if request.method() != Method::POST {
        return Ok(text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{path} takes a review by POST"),
        ));
    }
    // The body's share of the budget is held until the review is answered:
    // until then its bytes are still in memory.
    let (body, _held) = match read_body(request, &budgets).await {
        Ok(read) => read,
        Err(refused) => return Ok(refused),
    };
    let reviewed = if body.len() < budgets.limits.heavy_review {
        routes.answer(&handler, &body)
    } else {
        // Decoding and admitting megabytes takes milliseconds to seconds of
        // CPU: off the async workers, a few at a time.
        let Ok(_turn) = budgets.heavy.clone().acquire_owned().await else {
            return Ok(text(StatusCode::SERVICE_UNAVAILABLE, "shutting down"));
        };
        let routes = routes.clone();
        match tokio::task::spawn_blocking(move || routes.answer(&handler, &body)).await {
            Ok(reviewed) => reviewed,
            Err(e) => {
                tracing::error!(error = %e, "an admission review failed");
                return Ok(text(StatusCode::INTERNAL_SERVER_ERROR, "the review failed"));
            }
        }
    };
    Ok(match reviewed {
        Ok(json) => {
            let mut response = Response::new(Full::new(Bytes::from(json)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
    })
}

/// Reads a request's body within the limits: 413 past `max_body` (by its
/// Content-Length before reading, or as it arrives), 429 when the budget
/// stays short, 408 past `body_deadline` or when it stalled while others
/// waited. The bytes are returned with their share of the budget, to be
/// held until the review is answered.
async fn read_body(
    request: Request<Incoming>,
    budgets: &Budgets,
) -> Result<(Bytes, crate::bodies::Held), Response<Full<Bytes>>> {
    let limits = &budgets.limits;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let too_large = || {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the review is larger than {} bytes", limits.max_body),
        )
    };
    if declared.is_some_and(|n| n > limits.max_body) {
        return Err(too_large());
    }
    let deadline = tokio::time::Instant::now() + limits.body_deadline;
    let mut reading = budgets.bodies.start(declared.unwrap_or(limits.max_body));
    let mut body = request.into_body();
    // The frames as they came, joined once the body is whole: a body that
    // never finishes costs what arrived, not a buffer grown by doubling (or
    // set aside for what its Content-Length promises).
    let mut frames: Vec<Bytes> = Vec::new();
    let mut received = 0;
    loop {
        let frame = tokio::select! {
            biased;
            why = reading.cut_off() => return Err(cut_off(why, limits)),
            () = tokio::time::sleep_until(deadline) => {
                return Err(text(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("the body did not arrive within {:?}", limits.body_deadline),
                ));
            }
            frame = body.frame() => frame,
        };
        let data = match frame {
            None => break,
            Some(Err(e)) => return Err(text(StatusCode::BAD_REQUEST, format!("could not read body: {e}"))),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_trailers) => continue,
            },
        };
        if received + data.len() > limits.max_body {
            return Err(too_large());
        }
        match reading.take(data.len(), deadline).await {
            crate::bodies::Taken::Yes => {
                received += data.len();
                frames.push(data);
            }
            crate::bodies::Taken::Short => {
                return Err(text(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many review bytes in flight; retry shortly",
                ));
            }
            crate::bodies::Taken::CutOff => continue,
        }
    }
    Ok((joined(frames, received), reading.finish()))
}

/// The answer to a body cut off before it arrived whole.
fn cut_off(why: crate::bodies::CutOff, limits: &Limits) -> Response<Full<Bytes>> {
    match why {
        crate::bodies::CutOff::Stalled => text(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body stalled for {:?} while other reviews waited for the memory it held",
                limits.stalled_body
            ),
        ),
        crate::bodies::CutOff::MadeRoom => text(
            StatusCode::TOO_MANY_REQUESTS,
            "too many review bytes in flight, and smaller reviews go first; retry shortly",
        ),
    }
}

/// A body's frames as one buffer: the frame itself when there is one.
fn joined(mut frames: Vec<Bytes>, length: usize) -> Bytes {
    if frames.len() == 1 {
        return frames.swap_remove(0);
    }
    let mut whole = bytes::BytesMut::with_capacity(length);
    for frame in frames {
        whole.extend_from_slice(&frame);
    }
    whole.freeze()
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
    let budgets = Arc::new(Budgets::new(routes.limits.clone()));
    let slots = Arc::new(tokio::sync::Semaphore::new(routes.limits.max_connections.max(1)));
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
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        tracing::debug!(%peer, "too many connections; closing a new one");
                        continue;
                    };
                    let _ = tcp.set_nodelay(true);
                    let served = Served {
                        routes: routes.clone(),
                        budgets: budgets.clone(),
                        draining: shutdown.clone(),
                        closing: closing.clone(),
                    };
                    let acceptor = acceptor.clone();
                    connections.spawn(
                        async move {
                            connection(tcp, peer, acceptor, served).await;
                            drop(slot);
                        }
                        .in_current_span(),
                    );
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

/// What each connection shares with the server.
struct Served {
    routes: Arc<Routes>,
    budgets: Arc<Budgets>,
    draining: CancellationToken,
    closing: CancellationToken,
}

async fn connection(tcp: tokio::net::TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, served: Served) {
    let Served {
        routes,
        budgets,
        draining,
        closing,
    } = served;
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
    let header_read_timeout = budgets.limits.header_read_timeout;
    let service =
        service_fn(move |request| handle(routes.clone(), budgets.clone(), draining.clone(), request));
    let conn = http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(tls), service);
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
