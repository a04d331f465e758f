//! The HTTP endpoints of a controller process: probes and Prometheus metrics.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kinject_runtime::injection::describe_unsynced;
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

/// What keeps the process from being ready: the informers not in sync, each
/// with its last watch error.
pub(crate) type Unsynced = Arc<dyn Fn() -> Vec<(String, Option<String>)> + Send + Sync>;

#[derive(Clone)]
struct ProbeState {
    shutting_down: CancellationToken,
    unsynced: Unsynced,
}

/// `/health`: 200 until `shutting_down` fires, then 500. `/readiness`: the
/// same, and also 500 while an informer is not in sync (before the first list,
/// or while relisting after the API server went back in time), naming them,
/// so the kubelet sends no traffic to a replica acting on an unsynced cache.
/// Stops on `stop`.
pub(crate) async fn serve_probes(
    listener: TcpListener,
    shutting_down: CancellationToken,
    unsynced: Unsynced,
    stop: CancellationToken,
) {
    let app = Router::new()
        .route("/health", get(health))
        .route("/readiness", get(readiness))
        .with_state(ProbeState {
            shutting_down,
            unsynced,
        });
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
    {
        tracing::error!(error = %e, "probe server failed");
    }
}

async fn health(State(state): State<ProbeState>) -> (StatusCode, String) {
    if state.shutting_down.is_cancelled() {
        (StatusCode::INTERNAL_SERVER_ERROR, "shutting down".to_owned())
    } else {
        (StatusCode::OK, "ok".to_owned())
    }
}

async fn readiness(State(state): State<ProbeState>) -> (StatusCode, String) {
    if state.shutting_down.is_cancelled() {
        return (StatusCode::INTERNAL_SERVER_ERROR, "shutting down".to_owned());
    }
    let unsynced = (state.unsynced)();
    if unsynced.is_empty() {
        return (StatusCode::OK, "ok".to_owned());
    }
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("informers not synced: {}", describe_unsynced(&unsynced)),
    )
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
    async fn probes_turn_500_when_shutdown_starts_and_readiness_while_unsynced() {
        let listener = bind(IpAddr::from([127, 0, 0, 1]), 0).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let (shutting_down, stop) = (CancellationToken::new(), CancellationToken::new());
        let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = synced.clone();
        let unsynced: Unsynced = Arc::new(move || {
            if seen.load(std::sync::atomic::Ordering::SeqCst) {
                Vec::new()
            } else {
                vec![("Pod v1".to_owned(), Some("forbidden".to_owned()))]
            }
        });
        let server = tokio::spawn(serve_probes(
            listener,
            shutting_down.clone(),
            unsynced,
            stop.clone(),
        ));
        assert_eq!(
            get(addr, "/readiness").await,
            "HTTP/1.1 500 Internal Server Error"
        );
        assert_eq!(
            get(addr, "/health").await,
            "HTTP/1.1 200 OK",
            "alive while syncing"
        );
        synced.store(true, std::sync::atomic::Ordering::SeqCst);
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
