//! Tower layers on the kube client: client-side QPS/burst limiting (kube-rs has
//! none; client-go's is a token bucket every request waits on) and API request
//! metrics.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use http::{Request, Response};
use kinject_runtime::controller::TokenBucket;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tower::{Layer, Service};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Makes every request wait for a token of a shared [`TokenBucket`].
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    /// `qps` requests per second with bursts of `burst`.
    pub fn new(qps: f32, burst: u32) -> Self {
        RateLimitLayer {
            // client-go treats a burst below one as one.
            bucket: Arc::new(TokenBucket::new(f64::from(qps), burst.max(1))),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
        }
    }
}

/// See [`RateLimitLayer`].
#[derive(Clone, Debug)]
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
}

impl<S, B> Service<Request<B>> for RateLimited<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let wait = self.bucket.reserve();
        // Request futures are lazy: nothing is sent before the first poll, so
        // delaying the poll delays the request.
        let response = self.inner.call(req);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            response.await
        })
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    verb: String,
}

/// API request counts by method and status code, and latency by method, under
/// client-go's metric names.
#[derive(Clone, Debug)]
pub struct RequestMetricsLayer {
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
}

impl RequestMetricsLayer {
    /// Registers `rest_client_requests_total` and
    /// `rest_client_request_duration_seconds`.
    pub fn register(registry: &mut Registry) -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0])
        });
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by method and status code",
            requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds until the response headers arrived, by method",
            latency.clone(),
        );
        RequestMetricsLayer { requests, latency }
    }
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics {
            inner,
            metrics: self.clone(),
        }
    }
}

/// See [`RequestMetricsLayer`].
#[derive(Clone, Debug)]
pub struct RequestMetrics<S> {
    inner: S,
    metrics: RequestMetricsLayer,
}

impl<S, B, RB> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().as_str().to_owned();
        let metrics = self.metrics.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let started = Instant::now();
            let result = response.await;
            let code = match &result {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            metrics
                .latency
                .get_or_create(&LatencyLabels { verb: method.clone() })
                .observe(started.elapsed().as_secs_f64());
            metrics
                .requests
                .get_or_create(&RequestLabels { method, code })
                .inc();
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_a_token() {
        let mut service = RateLimitLayer::new(2.0, 1).layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Instant::now())
        }));
        let start = Instant::now();
        let first = service.call(Request::new(())).await;
        let second = service.call(Request::new(())).await;
        assert_eq!(first.map(|at| at - start), Ok(Duration::ZERO));
        assert_eq!(second.map(|at| at - start), Ok(Duration::from_millis(500)));
    }
}
