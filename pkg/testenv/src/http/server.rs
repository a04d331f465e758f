//! The loopback HTTP face, for `kubectl` and out-of-process controllers.

use std::net::SocketAddr;
use std::path::Path;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::test_env::{Error, TestEnv};

/// kube-apiserver's `http.Server` has `ReadHeaderTimeout: 32s` ("just shy of
/// requestTimeoutUpperBound"), so a client that never finishes its request head does not
/// hold a connection open; Go then closes the connection without a response, as hyper does.
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(32);

/// A running loopback server. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    pub(crate) async fn start(env: TestEnv, bind: SocketAddr) -> Result<Self, Error> {
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| Error::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr: bind, source })?;
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.changed() => return,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let _ = stream.set_nodelay(true);
                        let env = env.clone();
                        let mut conn_stop = stopped.clone();
                        tokio::spawn(async move {
                            let svc = hyper::service::service_fn(move |req| {
                                let env = env.clone();
                                async move {
                                    Ok::<_, std::convert::Infallible>(
                                        super::service::serve(&env, req).await,
                                    )
                                }
                            });
                            let conn = http1::Builder::new()
                                .timer(TokioTimer::new())
                                .header_read_timeout(HEADER_READ_TIMEOUT)
                                .serve_connection(TokioIo::new(stream), svc);
                            tokio::pin!(conn);
                            tokio::select! {
                                _ = &mut conn => {}
                                _ = conn_stop.changed() => {
                                    // Let a request in flight finish briefly; a watch would
                                    // never finish, so the connection is then dropped.
                                    conn.as_mut().graceful_shutdown();
                                    let _ = tokio::time::timeout(
                                        std::time::Duration::from_millis(200),
                                        conn,
                                    )
                                    .await;
                                }
                            }
                        });
                    }
                }
            }
        });
        Ok(Self {
            addr,
            stop,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:<port>`: the address clients use, the loopback one
    /// when the server listens on every interface.
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr.ip() {
                std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        format!("http://{addr}")
    }

    /// The address the server listens on (a free port of loopback unless
    /// one was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (JSON, which is valid YAML) with one context `testenv` pointing here.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_for(serde_json::json!({}))
    }

    /// A kubeconfig whose user presents `token` (from
    /// [`TestEnv::service_account_token`]), so its requests are authorized by RBAC.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        self.kubeconfig_for(serde_json::json!({"token": token}))
    }

    fn kubeconfig_for(&self, user: serde_json::Value) -> String {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "testenv", "cluster": {"server": self.url()}}],
            "users": [{"name": "testenv", "user": user}],
            "contexts": [{"name": "testenv", "context": {"cluster": "testenv", "user": "testenv", "namespace": "default"}}],
            "current-context": "testenv",
            "preferences": {},
        })
        .to_string()
    }

    /// Writes a kubeconfig for this server to `path`, for kubectl and any
    /// other client.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig()).map_err(|source| Error::WriteKubeconfig {
            path: path.to_owned(),
            source,
        })
    }

    /// A `kube::Client` over loopback HTTP to this server.
    pub fn client(&self) -> Result<kube::Client, kube::Error> {
        let uri: http::Uri = self
            .url()
            .parse()
            .map_err(|e: http::uri::InvalidUri| kube::Error::Service(e.into()))?;
        let config = kube::Config::new(uri);
        kube::Client::try_from(config)
    }

    /// Stops accepting connections and ends open ones (watches included).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl TestEnv {
    /// Serves HTTP on the builder's address (127.0.0.1 unless
    /// [`Builder::address`](crate::Builder::address) says otherwise) until [`Server::shutdown`] or drop.
    pub async fn serve(&self) -> Result<Server, Error> {
        let config = &self.inner.config;
        Server::start(self.clone(), (config.address, config.port).into()).await
    }
}
