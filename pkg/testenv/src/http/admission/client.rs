//! Calling a webhook as kube-apiserver does: an `AdmissionReview` POSTed over HTTPS,
//! trusting only the webhook's `caBundle`, within its `timeoutSeconds`.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::go_format::go_json_type;
use crate::test_env::ServiceRoute;

use super::webhooks::Webhook;

/// The review's `response`, checked as kube-apiserver checks it.
pub(super) fn check_response(review: &Value, uid: &str) -> Result<Value, String> {
    let Some(response) = review.get("response") else {
        return Err("webhook response was absent".to_owned());
    };
    let got = response.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid=\"{uid}\", got \"{got}\""));
    }
    Ok(response.clone())
}

/// `response.patch` as Go decodes a `[]byte`: a base64 string, or an array of
/// byte values (what kube-rs's `AdmissionResponse` sends).
pub(super) fn patch_bytes(patch: &Value) -> Result<Vec<u8>, String> {
    match patch {
        Value::String(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("illegal base64 data in response.patch: {e}")),
        Value::Array(items) => items
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| "response.patch holds a value that is not a byte".to_owned()),
        other => Err(format!(
            "cannot unmarshal {} into response.patch of type []byte",
            go_json_type(other)
        )),
    }
}

/// Where a webhook listens: the address to dial, the name its certificate must carry,
/// and the URL for messages.
struct Endpoint {
    dial: String,
    server_name: String,
    url: String,
    path_and_query: String,
}

fn endpoint(hook: &Webhook, routes: &[ServiceRoute]) -> Result<Endpoint, String> {
    let timeout = format!("timeout={}s", hook.timeout.as_secs());
    if let Some(url) = hook.client.get("url").and_then(Value::as_str) {
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
    let service = hook.client.get("service").cloned().unwrap_or(Value::Null);
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
            "failed to call webhook: Post \"{url}\": dial tcp: lookup {host}: no such host \
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

pub(super) async fn call_webhook(
    hook: &Webhook,
    routes: &[ServiceRoute],
    review: &Value,
) -> Result<Value, String> {
    let ep = endpoint(hook, routes)?;
    let failed = |why: String| format!("failed to call webhook: Post \"{}\": {why}", ep.url);
    let tls = tls_config(&hook.client).map_err(&failed)?;
    let body = serde_json::to_vec(review).map_err(|e| failed(e.to_string()))?;
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(&ep.dial)
            .await
            .map_err(|e| format!("dial tcp {}: connect: {e}", ep.dial))?;
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
    let (status, bytes) = tokio::time::timeout(hook.timeout, exchange)
        .await
        .map_err(|_| failed("context deadline exceeded".to_owned()))?
        .map_err(&failed)?;
    if !status.is_success() {
        return Err(format!(
            "received invalid webhook response: the server responded with the status code {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes).trim()
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("received invalid webhook response: {e}"))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_patch_is_read_as_go_reads_a_byte_slice() {
        assert_eq!(patch_bytes(&json!("W10=")), Ok(b"[]".to_vec()));
        assert_eq!(patch_bytes(&json!([91, 93])), Ok(b"[]".to_vec()));
        assert!(patch_bytes(&json!([256])).is_err());
        assert!(patch_bytes(&json!({})).is_err());
    }
}
