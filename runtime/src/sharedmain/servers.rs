//! The HTTP endpoints of a controller process: probes and Prometheus metrics.

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Listens on every address at `port` (0 picks a free port).
pub(crate) async fn bind(port: u16) -> Result<TcpListener, String> {
    let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
    match TcpListener::bind(v6).await {
        Ok(listener) => Ok(listener),
        // Hosts without IPv6 still get the port on IPv4.
        Err(_) => TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port)))
            .await
            .map_err(|e| format!("cannot listen on port {port}: {e}; free the port or choose another (METRICS_PROMETHEUS_PORT, PROBES_PORT)")),
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
