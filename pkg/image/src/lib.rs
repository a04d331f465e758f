//! Images without a daemon, as ko builds them for Go: an OCI image of one
//! executable, built in pure Rust, pushed over the OCI distribution API, and
//! named in Kubernetes manifests as `image: kinject://<binary>`.
//!
//! **Where it stands.** A leaf of the framework, beside the runtime rather
//! than on it: a command line (`image`, `apply`) and its tests use it, a
//! controller never does. It depends on no other `kinject-*` crate and no
//! crate of an application; on goblin (ELF), tar, flate2 and sha2 (the
//! layer), and for the push hyper with rustls (ring), the client stack kube already
//! brings (the push module says why not a registry crate). Nothing here
//! runs a container daemon or a shell command.
//!
//! What an image holds, and why:
//!
//! | path | what |
//! |---|---|
//! | `/ko-app/<name>` | the executable, the entrypoint (ko's place for it) |
//! | the interpreter and its libraries | exactly what the dynamic loader loads, at the paths it finds them ([`elf`]); none for a static executable |
//! | `/etc/ssl/certs/ca-certificates.crt` | the host's CA bundle, named by `SSL_CERT_FILE` |
//! | `/etc/passwd`, `/etc/group` | `root` and `nonroot` (65532), the user the config runs as |
//! | `/home/nonroot`, `/tmp` | a home owned by 65532, and a world-writable `/tmp` |
//!
//! The config says `User: 65532`, the entrypoint, `PATH` and `SSL_CERT_FILE`,
//! and the labels `org.opencontainers.image.revision` (and `.source` when
//! given). The same inputs give the same digest: sorted entries, owner 0,
//! one time for everything (`SOURCE_DATE_EPOCH`, or 0), gzip without a
//! name or time, JSON with a fixed field order.
//!
//! ```no_run
//! # async fn run() -> Result<(), kinject_image::Error> {
//! use kinject_image::{Build, Credentials, push, resolve};
//!
//! let image = Build::new("target/release/controller", "0123abc").build()?;
//! image.write_layout("target/oci".as_ref(), "latest")?; // skopeo/umoci read it
//! let pushed = push(&image, "localhost:5000/controller", &Credentials::Anonymous).await?;
//! let manifest = std::fs::read_to_string("config/controller.yaml").unwrap_or_default();
//! let applied = resolve("config/controller.yaml", &manifest, |_binary| {
//!     Ok::<_, kinject_image::Error>(pushed.clone())
//! })?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod elf;
mod error;
mod image;
mod layer;
mod local_registry;
mod push;
mod resolve;

pub use error::Error;
pub use image::{APP_DIR, Build, CA_CERTIFICATES, Image, NONROOT, media_type};
pub use local_registry::{LocalRegistry, LocalRegistryError, source_revision, source_url};
pub use push::{Credentials, push};
pub use resolve::{SCHEME, Use, references, resolve};
