//! Calling a webhook as kube-apiserver does: a review POSTed over HTTPS,
//! trusting only the webhook's `caBundle`, within a timeout. Admission and
//! conversion webhooks share it.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::test_env::ServiceRoute;

/// Where a webhook listens: the address to dial, the name its certificate must carry,
/// and the URL for messages.
struct Endpoint {
    dial: String,
    server_name: String,
    url: String,
    path_and_query: String,
}

fn endpoint(client: &Value, timeout: Duration, routes: &[ServiceRoute]) -> Result<Endpoint, String> {
    let timeout = format!("timeout={}s", timeout.as_secs());
    if let Some(url) = client.get("url").and_then(Value::as_str) {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("webhook URL {url:?} must use the https scheme"));
        }
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_owned();
        let port = uri.port_u16().unwrap_or(443);
        let path = uri.path();
        let path_and_query = match uri.query() {
            Some(q) => format!("{path}?{q}&{timeout}"),
            None => format!("{path}?{timeout}"),
        };
        return Ok(Endpoint {
            dial: format!("{}:{port}", uri.host().unwrap_or_default()),
            url: format!(
                "https://{}:{port}{path_and_query}",
                uri.host().unwrap_or_default()
            ),
            server_name: host,
            path_and_query,
        });
    }
    let service = client.get("service").cloned().unwrap_or(Value::Null);
    let str_of = |k: &str| {
        service
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (ns, name) = (str_of("namespace"), str_of("name"));
    if name.is_empty() {
        return Err("webhook has neither clientConfig.url nor clientConfig.service".to_owned());
    }
    let port = service
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let path = match str_of("path") {
        p if p.is_empty() => "/".to_owned(),
        p => p,
    };
    let host = format!("{name}.{ns}.svc");
    let path_and_query = format!("{path}?{timeout}");
    let url = format!("https://{host}:{port}{path_and_query}");
    let Some((_, addr)) = routes
        .iter()
        .find(|((n, s, p), _)| *n == ns && *s == name && *p == port)
    else {
        return Err(format!(
            "Post \"{url}\": dial tcp: lookup {host}: no such host \
             (testenv reaches a Service only where TestEnv::route_service says it listens)"
        ));
    };
    Ok(Endpoint {
        dial: addr.to_string(),
        server_name: host,
        url,
        path_and_query,
    })
}

/// POSTs `review` to the webhook `client` (a `clientConfig`) and reads its
/// JSON answer.
///
/// # Errors
///
/// The call failed, in Go's words.
pub(crate) async fn call(
    client: &Value,
    timeout: Duration,
    routes: &[ServiceRoute],
    review: &impl serde::Serialize,
) -> Result<Value, CallError> {
    let ep = endpoint(client, timeout, routes).map_err(CallError::Unreached)?;
    let failed = |why: String| format!("Post \"{}\": {why}", ep.url);
    let tls = tls_config(client).map_err(|e| CallError::Unreached(failed(e)))?;
    let body = serde_json::to_vec(review).map_err(|e| CallError::Unreached(failed(e.to_string())))?;
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(&ep.dial)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    format!("dial tcp {}: connect: connection refused", ep.dial)
                }
                _ => format!("dial tcp {}: connect: {e}", ep.dial),
            })?;
        let server_name = rustls_pki_types::ServerName::try_from(ep.server_name.clone())
            .map_err(|e| format!("invalid server name {:?}: {e}", ep.server_name))?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(server_name, tcp)
            .await
            .map_err(tls_error)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let request = http::Request::post(&ep.path_and_query)
            .header(http::header::HOST, ep.server_name.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, bytes))
    };
    let (status, bytes) = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| CallError::Unreached(failed("context deadline exceeded".to_owned())))?
        .map_err(|e| CallError::Unreached(failed(e)))?;
    if !status.is_success() {
        return Err(CallError::Answered(format!(
            "the server responded with the status code {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes).trim()
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| CallError::Answered(e.to_string()))
}

/// Why a webhook call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// No answer: `Post "<url>": <why>`.
    Unreached(String),
    /// An answer that is not a 2xx JSON body.
    Answered(String),
}

fn tls_error(e: std::io::Error) -> String {
    let cert = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|r| match r {
            rustls::Error::InvalidCertificate(c) => Some(c.clone()),
            _ => None,
        });
    match cert {
        // Go names both an unknown issuer and an issuer of the same name that did not
        // sign the certificate this way.
        Some(rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority".to_owned()
        }
        Some(rustls::CertificateError::Expired | rustls::CertificateError::ExpiredContext { .. }) => {
            "tls: failed to verify certificate: x509: certificate has expired or is not yet valid".to_owned()
        }
        Some(
            rustls::CertificateError::NotValidForName
            | rustls::CertificateError::NotValidForNameContext { .. },
        ) => "tls: failed to verify certificate: x509: certificate is not valid for the webhook's host name"
            .to_owned(),
        Some(other) => format!("tls: failed to verify certificate: {other:?}"),
        None => format!("tls: {e}"),
    }
}

/// A client trusting exactly the webhook's `caBundle`.
fn tls_config(client: &Value) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::pem::PemObject as _;
    let bundle = client.get("caBundle").and_then(Value::as_str).unwrap_or_default();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .map_err(|e| format!("caBundle is not base64: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("caBundle holds an unreadable certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("caBundle holds an unusable certificate: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
