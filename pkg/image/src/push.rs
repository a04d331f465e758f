//! Pushing an image over the OCI distribution API: the two blobs, then the
//! manifest exactly as built, so the registry stores it under the digest
//! [`Image::digest`] already names.
//!
//! **Why our own client.** A push is five requests (`HEAD` a blob, `POST` an
//! upload, `PUT` the blob, `PUT` the manifest, and a token request when the
//! registry asks for one). The registry crates (`oci-client`,
//! `oci-distribution`) speak it through reqwest, which turns on features of
//! tokio, tower and hyper-util that nothing else in a controller's build
//! uses; every build that leaves the image crate out (a controller's own
//! `cargo build`, the scaffold checks) then resolves those crates differently
//! and compiles kube's whole stack a second time. This client goes over the
//! hyper, hyper-util and hyper-rustls that kube already brings, with the
//! same features, so it adds no second build of anything.
//!
//! A registry on a loopback address (`localhost`, `127.*`, `[::1]`) is spoken
//! to over plain HTTP, as `docker` and `ko` do for a local registry; every
//! other over HTTPS with rustls (ring) and the platform's CA certificates.
//! Registries that answer `401` with a `Bearer` challenge (Docker Hub, GHCR,
//! GAR, ECR, Harbor) get the token exchange of the distribution spec, with
//! the credentials as HTTP basic authentication; those that answer `Basic`
//! get the credentials directly.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::error::Error;
use crate::image::{Image, check_tag, media_type};

/// How to sign in to the registry.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Credentials {
    /// No credentials: a local or public registry.
    #[default]
    Anonymous,
    /// HTTP basic authentication (or the token exchange it starts).
    Basic {
        /// The user name.
        username: String,
        /// The password or access token.
        password: String,
    },
}

impl std::fmt::Debug for Credentials {
    /// Never prints the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => write!(f, "Basic({username}, ***)"),
        }
    }
}

/// Pushes `image` to `repository` (`registry[:port]/path/name`, with an
/// optional `:tag`, `latest` when none, as ko tags) and answers the digest
/// reference a manifest should name: `registry/path/name@sha256:...`.
///
/// ```no_run
/// # async fn run(image: kinject_image::Image) -> Result<(), kinject_image::Error> {
/// let pushed = kinject_image::push(&image, "localhost:5000/controller", &Default::default()).await?;
/// assert!(pushed.ends_with(image.digest()));
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::Reference`] when `repository` does not parse or names a digest;
/// [`Error::Push`] when the registry refuses or cannot be reached;
/// [`Error::DigestMismatch`] when it stored the manifest under another digest.
pub async fn push(image: &Image, repository: &str, credentials: &Credentials) -> Result<String, Error> {
    let target = Target::parse(repository)?;
    let mut session = Session::new(&target, credentials.clone())?;
    for (what, data, digest) in [
        ("the layer", image.layer(), image.layer_digest()),
        ("the config", image.config(), image.config_digest()),
    ] {
        session.push_blob(what, data, digest).await?;
    }
    let answered = session.push_manifest(image.manifest()).await?;
    if let Some(got) = answered
        && got != image.digest()
    {
        return Err(Error::DigestMismatch {
            reference: target.whole(),
            expected: image.digest().to_owned(),
            got,
        });
    }
    Ok(format!("{}/{}@{}", target.registry, target.name, image.digest()))
}

/// Where a push goes: the registry's host, the repository's name in it, the
/// tag.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// `host[:port]` as written (`docker.io` for a name without a host).
    registry: String,
    /// The repository's path in the registry, e.g. `team/controller`.
    name: String,
    tag: String,
}

impl Target {
    /// Parses a reference as `docker` does: the first component is a
    /// registry when it has a `.` or a `:` or is `localhost`, otherwise the
    /// name is on Docker Hub (under `library/` when it has one component).
    fn parse(reference: &str) -> Result<Self, Error> {
        let refused = |reason: &str| Error::Reference {
            reference: reference.to_owned(),
            reason: reason.to_owned(),
        };
        if reference.contains('@') {
            return Err(refused(
                "it names a digest; a push names the repository, the digest comes from the image",
            ));
        }
        let (registry, rest) = match reference.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
                (first.to_owned(), rest)
            }
            _ => ("docker.io".to_owned(), reference),
        };
        // A `:` after the last `/` starts the tag.
        let (name, tag) = match rest.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => (name, tag),
            _ => (rest, "latest"),
        };
        let name = if registry == "docker.io" && !name.contains('/') {
            format!("library/{name}")
        } else {
            name.to_owned()
        };
        if name.is_empty() || !name.split('/').all(valid_path_component) {
            return Err(refused(
                "each part of a repository's path is lowercase letters and digits, joined by `.`, `_`, `__` or `-`",
            ));
        }
        if registry.is_empty() || registry.contains(|c: char| c.is_whitespace() || c == '@') {
            return Err(refused("the registry is not a host name"));
        }
        check_tag(tag)?;
        Ok(Target {
            registry,
            name,
            tag: tag.to_owned(),
        })
    }

    fn whole(&self) -> String {
        format!("{}/{}:{}", self.registry, self.name, self.tag)
    }

    /// The API's base: Docker Hub's API lives on another host than its name.
    fn base(&self) -> String {
        let host = if self.registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            &self.registry
        };
        let scheme = if is_loopback(host) { "http" } else { "https" };
        format!("{scheme}://{host}")
    }
}

/// The distribution spec's path component: `[a-z0-9]+` runs joined by one
/// separator (`.`, `_`, `__`, or any number of `-`).
fn valid_path_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut run = String::new();
    for &b in bytes {
        if alnum(b) {
            if !(run.is_empty() || run == "." || run == "_" || run == "__" || run.bytes().all(|c| c == b'-'))
            {
                return false;
            }
            run.clear();
        } else if matches!(b, b'.' | b'_' | b'-') {
            run.push(b as char);
        } else {
            return false;
        }
    }
    true
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// One push: the connection pool and the authorization the registry granted.
struct Session<'a> {
    target: &'a Target,
    base: String,
    client: Client<Https, Full<Bytes>>,
    credentials: Credentials,
    authorization: Option<HeaderValue>,
}

/// What the registry answered, its body read whole (registries answer in a
/// few hundred bytes; the uploads go the other way).
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl<'a> Session<'a> {
    fn new(target: &'a Target, credentials: Credentials) -> Result<Self, Error> {
        // hyper-rustls takes rustls' process-wide provider; installing ring
        // is a no-op when the process chose one already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_secs(30)));
        let base = target.base();
        let builder = match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
            Ok(builder) => builder,
            // A loopback registry speaks plain HTTP and needs no roots.
            Err(_) if base.starts_with("http://") => hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(
                    rustls::ClientConfig::builder()
                        .with_root_certificates(rustls::RootCertStore::empty())
                        .with_no_client_auth(),
                ),
            Err(e) => {
                return Err(Error::Push {
                    what: "a connection".into(),
                    reference: target.whole(),
                    reason: format!(
                        "this machine has no CA certificates to check the registry's with ({e}); install them (apt-get install ca-certificates) or set SSL_CERT_FILE"
                    ),
                });
            }
        };
        let connector = builder.https_or_http().enable_http1().wrap_connector(http);
        Ok(Session {
            target,
            base,
            client: Client::builder(TokioExecutor::new()).build(connector),
            credentials,
            authorization: None,
        })
    }

    fn failed(&self, what: &str, reason: impl std::fmt::Display) -> Error {
        Error::Push {
            what: what.to_owned(),
            reference: self.target.whole(),
            reason: reason.to_string(),
        }
    }

    async fn push_blob(&mut self, what: &str, data: &[u8], digest: &str) -> Result<(), Error> {
        let blob = format!("{}/v2/{}/blobs/{digest}", self.base, self.target.name);
        let head = self.send(what, Method::HEAD, &blob, &[], Bytes::new()).await?;
        if head.status == StatusCode::OK {
            return Ok(());
        }
        let uploads = format!("{}/v2/{}/blobs/uploads/", self.base, self.target.name);
        let started = self.send(what, Method::POST, &uploads, &[], Bytes::new()).await?;
        if started.status != StatusCode::ACCEPTED {
            return Err(self.failed(what, refusal("starting an upload", &started)));
        }
        let location = started
            .headers
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .ok_or_else(|| self.failed(what, "the registry started an upload but named no Location"))?;
        // The Location may be relative, and may carry a query already.
        let mut upload = if location.starts_with('/') {
            format!("{}{location}", self.base)
        } else {
            location.to_owned()
        };
        upload.push(if upload.contains('?') { '&' } else { '?' });
        upload.push_str("digest=");
        upload.push_str(&digest.replace(':', "%3A"));
        let octets = [(header::CONTENT_TYPE, "application/octet-stream")];
        let done = self
            .send(what, Method::PUT, &upload, &octets, Bytes::copy_from_slice(data))
            .await?;
        if done.status != StatusCode::CREATED {
            return Err(self.failed(what, refusal("uploading", &done)));
        }
        Ok(())
    }

    /// Puts the manifest under the tag; answers the digest the registry
    /// stored it under, when it says.
    async fn push_manifest(&mut self, manifest: &[u8]) -> Result<Option<String>, Error> {
        let what = "the manifest";
        let url = format!(
            "{}/v2/{}/manifests/{}",
            self.base, self.target.name, self.target.tag
        );
        let typed = [(header::CONTENT_TYPE, media_type::MANIFEST)];
        let put = self
            .send(what, Method::PUT, &url, &typed, Bytes::copy_from_slice(manifest))
            .await?;
        if put.status != StatusCode::CREATED {
            return Err(self.failed(what, refusal("putting the manifest", &put)));
        }
        let digest = put
            .headers
            .get("docker-content-digest")
            .and_then(|d| d.to_str().ok())
            .map(str::to_owned);
        Ok(digest)
    }

    /// Sends a request; on a `401` answers the registry's challenge once and
    /// sends it again.
    async fn send(
        &mut self,
        what: &str,
        method: Method,
        url: &str,
        headers: &[(header::HeaderName, &'static str)],
        body: Bytes,
    ) -> Result<Answer, Error> {
        let answer = self.send_once(what, &method, url, headers, body.clone()).await?;
        if answer.status != StatusCode::UNAUTHORIZED {
            return Ok(answer);
        }
        let challenge = answer
            .headers
            .get(header::WWW_AUTHENTICATE)
            .and_then(|c| c.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        self.authorization = Some(self.answer_challenge(what, &challenge).await?);
        let again = self.send_once(what, &method, url, headers, body).await?;
        if again.status == StatusCode::UNAUTHORIZED || again.status == StatusCode::FORBIDDEN {
            return Err(self.failed(what, refusal("signing in", &again)));
        }
        Ok(again)
    }

    async fn send_once(
        &self,
        what: &str,
        method: &Method,
        url: &str,
        headers: &[(header::HeaderName, &'static str)],
        body: Bytes,
    ) -> Result<Answer, Error> {
        let mut request = Request::builder().method(method.clone()).uri(url);
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization.clone());
        }
        self.exchange(what, url, request, body).await
    }

    /// Sends one request and reads its answer whole.
    async fn exchange(
        &self,
        what: &str,
        url: &str,
        request: http::request::Builder,
        body: Bytes,
    ) -> Result<Answer, Error> {
        let request = request
            .body(Full::new(body))
            .map_err(|e| self.failed(what, format!("{url} is not a URL: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| self.failed(what, connection_error(url, &e)))?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| self.failed(what, format!("reading the answer from {url}: {e}")))?
            .to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// The `Authorization` a challenge asks for: the credentials for
    /// `Basic`, a token fetched from the realm for `Bearer`.
    async fn answer_challenge(&self, what: &str, challenge: &str) -> Result<HeaderValue, Error> {
        let basic = match &self.credentials {
            Credentials::Basic { username, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            )),
            Credentials::Anonymous => None,
        };
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return match basic {
                Some(basic) => self.header_value(what, basic),
                None => Err(self.failed(
                    what,
                    "the registry asks for a user name and password; set KINJECT_REGISTRY_USERNAME and KINJECT_REGISTRY_PASSWORD",
                )),
            };
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(self.failed(
                what,
                format!("the registry answered 401 with the challenge {challenge:?}, which is neither Basic nor Bearer"),
            ));
        }
        let params = challenge_params(params);
        let param = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.as_str())
        };
        let realm = param("realm")
            .ok_or_else(|| self.failed(what, format!("the Bearer challenge {challenge:?} names no realm")))?;
        let token = self.fetch_token(what, realm, param("service"), basic).await?;
        self.header_value(what, format!("Bearer {token}"))
    }

    /// The distribution spec's token exchange: the realm, asked for push
    /// and pull on the repository, with the credentials when there are any.
    async fn fetch_token(
        &self,
        what: &str,
        realm: &str,
        service: Option<&str>,
        basic: Option<String>,
    ) -> Result<String, Error> {
        let scope = format!("repository:{}:pull,push", self.target.name);
        let mut url = format!("{realm}?scope={}", query_escape(&scope));
        if let Some(service) = service {
            url.push_str("&service=");
            url.push_str(&query_escape(service));
        }
        let mut request = Request::builder().method(Method::GET).uri(&url);
        if let Some(basic) = basic {
            request = request.header(header::AUTHORIZATION, self.header_value(what, basic)?);
        }
        let answer = self.exchange(what, realm, request, Bytes::new()).await?;
        if !answer.status.is_success() {
            return Err(self.failed(
                what,
                format!(
                    "the token service {realm} answered {}: {}; check the credentials (KINJECT_REGISTRY_USERNAME, KINJECT_REGISTRY_PASSWORD)",
                    answer.status,
                    String::from_utf8_lossy(&answer.body).trim()
                ),
            ));
        }
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&answer.body)
            .map_err(|e| self.failed(what, format!("the token service {realm} answered no token: {e}")))?;
        token
            .token
            .or(token.access_token)
            .ok_or_else(|| self.failed(what, format!("the token service {realm} answered no token")))
    }

    fn header_value(&self, what: &str, value: String) -> Result<HeaderValue, Error> {
        HeaderValue::from_str(&value)
            .map_err(|_| self.failed(what, "the credentials hold a character HTTP headers cannot carry"))
    }
}

/// `key="value", key=value` pairs of an authentication challenge.
fn challenge_params(params: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = params.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_owned();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (quoted[..end].to_owned(), &quoted[end + 1..]),
                None => (quoted.to_owned(), ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (after[..end].trim().to_owned(), &after[end..]),
                None => (after.trim().to_owned(), ""),
            }
        };
        pairs.push((key, value));
        rest = next.trim_start().trim_start_matches(',');
    }
    pairs
}

/// Percent-encodes a query value (everything but unreserved characters).
fn query_escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

/// The registry's refusal in words: the status and the spec's error codes.
fn refusal(doing: &str, answer: &Answer) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: Option<String>,
        message: Option<String>,
    }
    let said = match serde_json::from_slice::<Errors>(&answer.body) {
        Ok(errors) => errors
            .errors
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.code.as_deref().unwrap_or("ERROR"),
                    e.message.as_deref().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        Err(_) => String::from_utf8_lossy(&answer.body).chars().take(300).collect(),
    };
    let said = said.trim();
    if said.is_empty() {
        format!("{doing}, the registry answered {}", answer.status)
    } else {
        format!("{doing}, the registry answered {}: {said}", answer.status)
    }
}

/// A connection failure with its causes, which hyper's error alone hides
/// ("client error (Connect)").
fn connection_error(url: &str, error: &dyn std::error::Error) -> String {
    let mut reason = format!("cannot reach {url}: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        reason.push_str(": ");
        reason.push_str(&cause.to_string());
        source = cause.source();
    }
    reason
}

/// `host[:port]` on this machine only.
pub(crate) fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        registry.rsplit_once(':').map_or(registry, |(host, _)| host)
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_this_machine_gets_plain_http() {
        for local in [
            "localhost:5000",
            "127.0.0.1:5000",
            "127.0.0.1",
            "[::1]:5000",
            "localhost",
        ] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in [
            "ghcr.io",
            "registry.example.com:5000",
            "10.0.0.1:5000",
            "localhost.evil.com",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn a_push_names_a_repository_and_an_optional_tag() {
        let target = Target::parse("localhost:5000/team/controller").unwrap();
        assert_eq!(target.whole(), "localhost:5000/team/controller:latest");
        assert_eq!(target.base(), "http://localhost:5000");
        let target = Target::parse("localhost:5000/controller:v1").unwrap();
        assert_eq!(target.tag, "v1");
        assert_eq!(target.name, "controller");
        let target = Target::parse("ghcr.io/team/controller").unwrap();
        assert_eq!(target.base(), "https://ghcr.io");
        let hub = Target::parse("controller:v2").unwrap();
        assert_eq!(hub.whole(), "docker.io/library/controller:v2");
        assert_eq!(hub.base(), "https://registry-1.docker.io");
        assert_eq!(Target::parse("team/controller").unwrap().name, "team/controller");
        let digest = format!("localhost:5000/controller@sha256:{}", "0".repeat(64));
        assert!(matches!(Target::parse(&digest), Err(Error::Reference { .. })));
        for bad in [
            "Not A Reference",
            "localhost:5000/Upper",
            "localhost:5000/",
            "ghcr.io/a//b",
            "ghcr.io/-a",
        ] {
            assert!(
                matches!(Target::parse(bad), Err(Error::Reference { .. })),
                "{bad}"
            );
        }
        assert!(Target::parse("localhost:5000/a__b.c-d---e").is_ok());
        assert!(Target::parse("localhost:5000/controller:bad tag").is_err());
    }

    #[test]
    fn challenges_are_read_as_registries_write_them() {
        let params = challenge_params(
            r#"realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(
            params,
            [
                ("realm".to_owned(), "https://auth.docker.io/token".to_owned()),
                ("service".to_owned(), "registry.docker.io".to_owned()),
                ("scope".to_owned(), "repository:a/b:pull,push".to_owned()),
            ]
        );
        let unquoted = challenge_params("realm=https://ghcr.io/token, service=ghcr.io");
        assert_eq!(unquoted[1], ("service".to_owned(), "ghcr.io".to_owned()));
        assert_eq!(
            query_escape("repository:a/b:pull,push"),
            "repository%3Aa%2Fb%3Apull%2Cpush"
        );
    }
}
