//! The HTTP endpoints of a controller process: probes and Prometheus metrics.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Listens on `address` at `port` (0 picks a free port); `::` means every
/// interface, on IPv4 too.
pub(crate) async fn bind(address: IpAddr, port: u16) -> Result<TcpListener, String> {
    let cannot = |e: std::io::Error| {
        format!(
            "cannot listen on {}: {e}; free the port or choose another (METRICS_PROMETHEUS_PORT, PROBES_PORT), \
             or another address (--bind-address)",
            SocketAddr::from((address, port))
        )
    };
    match TcpListener::bind(SocketAddr::from((address, port))).await {
        Ok(listener) => Ok(listener),
        // Hosts without IPv6 still get every interface on IPv4.
        Err(_) if address == IpAddr::V6(Ipv6Addr::UNSPECIFIED) => {
            TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port)))
                .await
                .map_err(cannot)
        }
        Err(e) => Err(cannot(e)),
    }
}

/// `/health` and `/readiness`: 200 until `shutting_down` fires, then 500, so
/// the kubelet stops sending traffic while reconciles drain. Stops on `stop`.
pub(crate) async fn serve_probes(
    listener: TcpListener,
    shutting_down: CancellationToken,
    stop: CancellationToken,
) {
    let app = Router::new()
        .route("/health", get(probe))
        .route("/readiness", get(probe))
        .with_state(shutting_down);
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
    {
        tracing::error!(error = %e, "probe server failed");
    }
}

async fn probe(State(shutting_down): State<CancellationToken>) -> impl IntoResponse {
    if shutting_down.is_cancelled() {
        (StatusCode::INTERNAL_SERVER_ERROR, "shutting down")
    } else {
        (StatusCode::OK, "ok")
    }
}

/// `/metrics` in the Prometheus text format. Stops on `stop`.
pub(crate) async fn serve_metrics(listener: TcpListener, registry: Arc<Registry>, stop: CancellationToken) {
    let app = Router::new().route("/metrics", get(metrics)).with_state(registry);
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
    {
        tracing::error!(error = %e, "metrics server failed");
    }
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("could not encode metrics: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response.lines().next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn probes_turn_500_when_shutdown_starts() {
        let listener = bind(IpAddr::from([127, 0, 0, 1]), 0).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let (shutting_down, stop) = (CancellationToken::new(), CancellationToken::new());
        let server = tokio::spawn(serve_probes(listener, shutting_down.clone(), stop.clone()));
        assert_eq!(get(addr, "/readiness").await, "HTTP/1.1 200 OK");
        assert_eq!(get(addr, "/health").await, "HTTP/1.1 200 OK");
        shutting_down.cancel();
        assert_eq!(
            get(addr, "/readiness").await,
            "HTTP/1.1 500 Internal Server Error"
        );
        assert_eq!(get(addr, "/health").await, "HTTP/1.1 500 Internal Server Error");
        stop.cancel();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn metrics_are_served_in_the_prometheus_text_format() {
        let mut registry = Registry::default();
        kinject_runtime::controller::WorkqueueMetrics::register(&mut registry);
        let listener = bind(IpAddr::from([127, 0, 0, 1]), 0).await.unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], listener.local_addr().unwrap().port()));
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve_metrics(listener, Arc::new(registry), stop.clone()));
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
        assert!(response.contains("# TYPE workqueue_depth gauge"), "{response}");
        stop.cancel();
        server.await.unwrap();
    }
}
