//! The in-process face: a `tower::Service` over HTTP requests, for `kube::Client::new`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf as _, BufMut as _, Bytes};
use http::{HeaderValue, Request, Response, header};
use http_body::Frame;
use http_body_util::BodyExt as _;

use crate::errors::ErrorStatus;
use crate::test_env::TestEnv;

use super::authentication::authenticate;
use super::handler::handle;
use super::impersonation::impersonate;
use super::reply::Reply;
use super::request::Request as ApiRequest;

/// A response body: whole, or a watch stream.
#[derive(Debug)]
pub struct ResponseBody {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Full(Option<Bytes>),
    Stream(super::watch_buffer::Receiver),
}

impl ResponseBody {
    fn full(b: impl Into<Bytes>) -> Self {
        Self {
            kind: Kind::Full(Some(b.into())),
        }
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.kind {
            Kind::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.kind, Kind::Full(None))
    }
}

/// The in-process API server as a `tower::Service`; see [`TestEnv::client`].
#[derive(Clone, Debug)]
pub struct TestEnvService {
    env: TestEnv,
}

impl TestEnvService {
    pub(crate) fn new(env: TestEnv) -> Self {
        Self { env }
    }
}

impl<B> tower_service::Service<Request<B>> for TestEnvService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Display,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResponseBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let env = self.env.clone();
        Box::pin(async move { Ok(serve(&env, req).await) })
    }
}

/// Handles one HTTP request, whichever face it came through.
pub(crate) async fn serve<B>(env: &TestEnv, req: Request<B>) -> Response<ResponseBody>
where
    B: http_body::Body,
    B::Error: std::fmt::Display,
{
    let (parts, body) = req.into_parts();
    let body = match read_body(body, MAX_REQUEST_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => return respond(Reply::error(&e)),
    };
    let header = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let query = parts
        .uri
        .query()
        .map(|q| {
            form_urlencoded::parse(q.as_bytes())
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let user = match authenticate(&header(header::AUTHORIZATION)) {
        Ok(user) => user,
        Err(e) => return respond(Reply::error(&e)),
    };
    let uri = parts
        .uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    let user = match impersonate(env, user, &parts.headers, uri) {
        Ok(user) => user,
        Err(reply) => return respond(reply),
    };
    let request = ApiRequest {
        method: parts.method.clone(),
        path: parts.uri.path().to_owned(),
        query,
        accept: header(header::ACCEPT),
        content_type: header(header::CONTENT_TYPE),
        body,
        host: header(header::HOST),
        user_agent: header(header::USER_AGENT),
        user,
    };
    respond(handle(env, request).await)
}

/// kube-apiserver's `--max-request-body-bytes` default (3 MiB).
pub(crate) const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Reads a request body, giving up with `413` as soon as it grows past `limit`: a
/// client streaming a huge body is refused after `limit + 1` bytes, not buffered whole.
async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, ErrorStatus>
where
    B: http_body::Body,
    B::Error: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut buf = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ErrorStatus::bad_request(format!("failed to read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buf.len().saturating_add(data.remaining()) > limit {
                return Err(ErrorStatus::new(
                    413,
                    "RequestEntityTooLarge",
                    format!("Request entity too large: limit is {limit}"),
                ));
            }
            buf.put(data);
        }
    }
    Ok(buf.freeze())
}

fn respond(reply: Reply) -> Response<ResponseBody> {
    let mut builder = Response::builder();
    let body = match reply {
        Reply::Json { code, body, warnings } => {
            builder = builder
                .status(code)
                .header(header::CONTENT_TYPE, "application/json");
            // kube-apiserver repeats a Status's retryAfterSeconds as the
            // Retry-After header, which clients' retry policies read.
            if body["kind"] == "Status"
                && let Some(seconds) = body
                    .pointer("/details/retryAfterSeconds")
                    .and_then(serde_json::Value::as_u64)
            {
                builder = builder.header(header::RETRY_AFTER, seconds);
            }
            for w in warnings {
                if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{w}\"")) {
                    builder = builder.header(header::WARNING, v);
                }
            }
            ResponseBody::full(body.to_string())
        }
        Reply::JsonAs { content_type, body } => {
            builder = builder.status(200).header(header::CONTENT_TYPE, content_type);
            ResponseBody::full(body.to_string())
        }
        Reply::Document {
            content_type,
            body,
            etag,
        } => {
            builder = builder
                .status(200)
                .header(header::CONTENT_TYPE, content_type)
                .header(header::ETAG, format!("\"{etag}\""));
            ResponseBody::full(body)
        }
        Reply::Text { code, text } => {
            builder = builder
                .status(code)
                .header(header::CONTENT_TYPE, "text/plain; charset=utf-8");
            ResponseBody::full(text)
        }
        Reply::Stream(rx) => {
            builder = builder
                .status(200)
                .header(header::CONTENT_TYPE, "application/json");
            ResponseBody {
                kind: Kind::Stream(rx),
            }
        }
    };
    builder.body(body).unwrap_or_else(|e| {
        let mut r = Response::new(ResponseBody::full(ErrorStatus::internal(e).to_json().to_string()));
        *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

impl TestEnv {
    /// The in-process `tower::Service`.
    pub fn service(&self) -> TestEnvService {
        TestEnvService::new(self.clone())
    }

    /// A real `kube::Client` over the in-process service (default namespace `default`).
    /// Call it inside a Tokio runtime: kube's client spawns its request buffer there.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }
}
