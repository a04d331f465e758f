//! Pushing an image over the OCI distribution API, with `oci-client`: the
//! two blobs, then the manifest exactly as built, so the registry stores it
//! under the digest [`Image::digest`] already names.
//!
//! A registry on a loopback address (`localhost`, `127.*`, `[::1]`) is spoken
//! to over plain HTTP, as `docker` and `ko` do for a local registry; every
//! other over HTTPS with rustls and the webpki roots of the platform.

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};

use crate::error::Error;
use crate::image::{Image, check_tag, media_type};

/// How to sign in to the registry.
#[derive(Clone, Default)]
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
    let tagged = reference(repository)?;
    let client = client(tagged.resolve_registry(), repository)?;
    let auth = match credentials {
        Credentials::Anonymous => RegistryAuth::Anonymous,
        Credentials::Basic { username, password } => RegistryAuth::Basic(username.clone(), password.clone()),
    };
    let failed = |what: &str, e: &dyn std::fmt::Display| Error::Push {
        what: what.to_owned(),
        reference: tagged.whole(),
        reason: e.to_string(),
    };
    client
        .auth(&tagged, &auth, RegistryOperation::Push)
        .await
        .map_err(|e| failed("credentials", &e))?;
    for (what, data, digest) in [
        ("the layer", image.layer(), image.layer_digest()),
        ("the config", image.config(), image.config_digest()),
    ] {
        client
            .push_blob(&tagged, data.to_vec(), digest)
            .await
            .map_err(|e| failed(what, &e))?;
    }
    let content_type = http_header(media_type::MANIFEST);
    let location = client
        .push_manifest_raw(&tagged, image.manifest().to_vec(), content_type)
        .await
        .map_err(|e| failed("the manifest", &e))?;
    // The registry's Location names the manifest by digest when it says one.
    if let Some(at) = location.rfind("sha256:") {
        let got = &location[at..];
        if got != image.digest() {
            return Err(Error::DigestMismatch {
                reference: tagged.whole(),
                expected: image.digest().to_owned(),
                got: got.to_owned(),
            });
        }
    }
    Ok(format!(
        "{}/{}@{}",
        tagged.registry(),
        tagged.repository(),
        image.digest()
    ))
}

/// The reference to push the manifest to: the repository and its tag.
fn reference(repository: &str) -> Result<Reference, Error> {
    let refused = |reason: String| Error::Reference {
        reference: repository.to_owned(),
        reason,
    };
    let parsed: Reference = repository
        .parse()
        .map_err(|e: oci_client::ParseError| refused(e.to_string()))?;
    if parsed.digest().is_some() {
        return Err(refused(
            "it names a digest; a push names the repository, the digest comes from the image".into(),
        ));
    }
    let tag = parsed.tag().unwrap_or("latest").to_owned();
    check_tag(&tag)?;
    Ok(Reference::with_tag(
        parsed.registry().to_owned(),
        parsed.repository().to_owned(),
        tag,
    ))
}

fn client(registry: &str, repository: &str) -> Result<Client, Error> {
    // reqwest takes rustls' process-wide provider; without one it would
    // panic. Installing ring is a no-op when the process chose one already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let protocol = if is_loopback(registry) {
        ClientProtocol::HttpsExcept(vec![registry.to_owned()])
    } else {
        ClientProtocol::Https
    };
    Client::try_from(ClientConfig {
        protocol,
        ..ClientConfig::default()
    })
    .map_err(|e| Error::Push {
        what: "a client".into(),
        reference: repository.to_owned(),
        reason: e.to_string(),
    })
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

fn http_header(value: &'static str) -> http::HeaderValue {
    http::HeaderValue::from_static(value)
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
        let tagged = reference("localhost:5000/team/controller").unwrap();
        assert_eq!(tagged.whole(), "localhost:5000/team/controller:latest");
        let tagged = reference("localhost:5000/controller:v1").unwrap();
        assert_eq!(tagged.tag(), Some("v1"));
        let digest = format!("localhost:5000/controller@sha256:{}", "0".repeat(64));
        assert!(matches!(reference(&digest), Err(Error::Reference { .. })));
        assert!(matches!(
            reference("Not A Reference"),
            Err(Error::Reference { .. })
        ));
    }
}
