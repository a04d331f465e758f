//! The image of one executable: what goes in its layer, its config and
//! manifest, and the OCI image layout directory `skopeo` and `umoci` read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::elf;
use crate::error::Error;
use crate::layer::{self, Content, Layer};

/// Where the executable lives in the image, as ko puts it: `/ko-app/<name>`.
pub const APP_DIR: &str = "/ko-app";
/// The user and group the image runs as: distroless' `nonroot`, the one
/// `config/`'s Deployments name in `runAsUser`.
pub const NONROOT: u32 = 65532;
/// Where the CA certificates are, and what `SSL_CERT_FILE` says.
pub const CA_CERTIFICATES: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The OCI media types this crate writes.
pub mod media_type {
    /// An image manifest.
    pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    /// An image config.
    pub const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
    /// A gzip-compressed tar layer.
    pub const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
}

/// What to build: an executable and what the labels say of its sources.
///
/// ```no_run
/// # fn main() -> Result<(), kinject_image::Error> {
/// let image = kinject_image::Build::new("target/release/controller", "0123abc")
///     .source("https://github.com/example/controller")
///     .build()?;
/// image.write_layout("target/image".as_ref(), "latest")?;
/// println!("{} ({} bytes compressed)", image.digest(), image.compressed_size());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Build {
    executable: PathBuf,
    name: Option<String>,
    revision: String,
    source: Option<String>,
    epoch: Option<u64>,
    ca_certificates: PathBuf,
}

/// A built image: its blobs in memory, named by their digests.
#[derive(Clone, Debug)]
pub struct Image {
    manifest: Vec<u8>,
    digest: String,
    config: Vec<u8>,
    config_digest: String,
    layer: Layer,
    files: Vec<String>,
}

impl Build {
    /// The image of `executable`, whose sources are at git commit `revision`
    /// (the label `org.opencontainers.image.revision`).
    pub fn new(executable: impl Into<PathBuf>, revision: impl Into<String>) -> Self {
        Build {
            executable: executable.into(),
            name: None,
            revision: revision.into(),
            source: None,
            epoch: None,
            ca_certificates: PathBuf::from(CA_CERTIFICATES),
        }
    }

    /// The executable's name in the image; by default its file name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Where the sources are (the label `org.opencontainers.image.source`).
    #[must_use]
    pub fn source(mut self, url: impl Into<String>) -> Self {
        self.source = Some(url.into());
        self
    }

    /// The time of every file and of the config, in seconds since 1970; by
    /// default `SOURCE_DATE_EPOCH`, or 0 when it is unset, so two builds of
    /// the same sources agree.
    #[must_use]
    pub fn epoch(mut self, seconds: u64) -> Self {
        self.epoch = Some(seconds);
        self
    }

    /// The CA bundle to copy to [`CA_CERTIFICATES`]; by default the host's.
    #[must_use]
    pub fn ca_certificates(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_certificates = path.into();
        self
    }

    /// Reads the executable, the libraries it links and the CA bundle, and
    /// builds the image in memory.
    ///
    /// # Errors
    /// Anything [`elf::linked`] says; [`Error::Read`] for the CA bundle;
    /// [`Error::InvalidName`] for a name that is no file name;
    /// [`Error::SourceDateEpoch`] when that variable is no number.
    pub fn build(&self) -> Result<Image, Error> {
        let name = self.app_name()?;
        let epoch = match self.epoch {
            Some(seconds) => seconds,
            None => source_date_epoch()?,
        };
        let linked = elf::linked(&self.executable)?;
        let files = layer::with_parents(self.files(&name, &linked)?);
        let listing = files.keys().cloned().collect();
        let layer = layer::layer(&files, epoch)?;
        let config =
            serde_json::to_vec(&self.config(&name, &linked, &layer, epoch)).map_err(|e| in_memory(&e))?;
        let config_digest = layer::sha256(&config);
        let manifest = serde_json::to_vec(&Manifest {
            schema_version: 2,
            media_type: media_type::MANIFEST,
            config: Descriptor::new(media_type::CONFIG, &config_digest, config.len()),
            layers: vec![Descriptor::new(
                media_type::LAYER,
                &layer.digest,
                layer.compressed.len(),
            )],
        })
        .map_err(|e| in_memory(&e))?;
        Ok(Image {
            digest: layer::sha256(&manifest),
            manifest,
            config,
            config_digest,
            layer,
            files: listing,
        })
    }

    fn app_name(&self) -> Result<String, Error> {
        let name = match &self.name {
            Some(name) => name.clone(),
            None => self
                .executable
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let valid = !name.is_empty()
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if valid {
            Ok(name)
        } else {
            Err(Error::InvalidName {
                what: "the executable's name",
                value: name,
                rule: "letters, digits, `-`, `_` and `.`, as cargo names binaries",
            })
        }
    }

    /// Every file of the layer, by path without the leading `/`.
    fn files(&self, name: &str, linked: &elf::Linked) -> Result<BTreeMap<String, Content>, Error> {
        let mut files = BTreeMap::new();
        let executable = |path: &Path| -> Result<Content, Error> {
            Ok(Content::File {
                mode: 0o755,
                data: read(
                    path,
                    "check that the executable and the libraries it links are readable",
                )?,
            })
        };
        files.insert(format!("{}/{name}", &APP_DIR[1..]), executable(&self.executable)?);
        for library in linked.interpreter.iter().chain(&linked.libraries) {
            files.insert(relative(library), executable(library)?);
        }
        let certificates = read(
            &self.ca_certificates,
            "install the CA bundle (`apt-get install ca-certificates`) or name one with `ca_certificates`",
        )?;
        files.insert(
            relative(Path::new(CA_CERTIFICATES)),
            Content::File {
                mode: 0o644,
                data: certificates,
            },
        );
        let text = |data: String| Content::File {
            mode: 0o644,
            data: data.into_bytes(),
        };
        files.insert(
            "etc/passwd".into(),
            text(format!("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n")),
        );
        files.insert(
            "etc/group".into(),
            text(format!("root:x:0:\nnonroot:x:{NONROOT}:\n")),
        );
        files.insert(
            "home/nonroot".into(),
            Content::Directory {
                mode: 0o700,
                owner: u64::from(NONROOT),
            },
        );
        files.insert(
            "tmp".into(),
            Content::Directory {
                mode: 0o1777,
                owner: 0,
            },
        );
        Ok(files)
    }

    fn config(&self, name: &str, linked: &elf::Linked, layer: &Layer, epoch: u64) -> ImageConfig {
        let created = created(epoch);
        let mut labels = BTreeMap::new();
        labels.insert(
            "org.opencontainers.image.revision".to_owned(),
            self.revision.clone(),
        );
        if let Some(source) = &self.source {
            labels.insert("org.opencontainers.image.source".to_owned(), source.clone());
        }
        ImageConfig {
            created: created.clone(),
            architecture: linked.architecture,
            os: "linux",
            config: RunConfig {
                user: NONROOT.to_string(),
                env: vec![
                    format!("PATH={APP_DIR}:/usr/local/bin:/usr/bin:/bin"),
                    format!("SSL_CERT_FILE={CA_CERTIFICATES}"),
                ],
                entrypoint: vec![format!("{APP_DIR}/{name}")],
                working_dir: "/".into(),
                labels,
            },
            rootfs: RootFs {
                kind: "layers",
                diff_ids: vec![layer.diff_id.clone()],
            },
            history: vec![History {
                created,
                created_by: format!("kinject-image {APP_DIR}/{name}"),
            }],
        }
    }
}

impl Image {
    /// The manifest's digest, `sha256:<hex>`: what a digest reference names.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The manifest, as written and pushed.
    pub fn manifest(&self) -> &[u8] {
        &self.manifest
    }

    /// The config blob (user, entrypoint, environment, labels).
    pub fn config(&self) -> &[u8] {
        &self.config
    }

    /// The config blob's digest.
    pub fn config_digest(&self) -> &str {
        &self.config_digest
    }

    /// The one layer, gzip-compressed.
    pub fn layer(&self) -> &[u8] {
        &self.layer.compressed
    }

    /// The layer's digest (of the compressed bytes).
    pub fn layer_digest(&self) -> &str {
        &self.layer.digest
    }

    /// What a pull transfers: the compressed layer's bytes.
    pub fn compressed_size(&self) -> u64 {
        self.layer.compressed.len() as u64
    }

    /// Every path in the layer, in the layer's order, without leading `/`.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// Writes an OCI image layout to `dir` holding this image under `tag`
    /// (`oci:<dir>:<tag>` for skopeo, `<dir>:<tag>` for umoci). Blobs already
    /// there stay; `index.json` is replaced, so it names this image alone.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for a tag OCI refuses; [`Error::Write`] when the
    /// directory cannot be written.
    pub fn write_layout(&self, dir: &Path, tag: &str) -> Result<(), Error> {
        check_tag(tag)?;
        let blobs = dir.join("blobs").join("sha256");
        std::fs::create_dir_all(&blobs).map_err(|source| Error::Write {
            path: blobs.clone(),
            source,
        })?;
        for (digest, data) in [
            (self.digest.as_str(), &self.manifest),
            (self.config_digest.as_str(), &self.config),
            (self.layer.digest.as_str(), &self.layer.compressed),
        ] {
            write(&blobs.join(digest.trim_start_matches("sha256:")), data)?;
        }
        write(&dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        let mut descriptor = Descriptor::new(media_type::MANIFEST, &self.digest, self.manifest.len());
        descriptor.annotations = Some(BTreeMap::from([(
            "org.opencontainers.image.ref.name".to_owned(),
            tag.to_owned(),
        )]));
        let index = Index {
            schema_version: 2,
            media_type: "application/vnd.oci.image.index.v1+json",
            manifests: vec![descriptor],
        };
        let index = serde_json::to_vec(&index).map_err(|e| in_memory(&e))?;
        write(&dir.join("index.json"), &index)
    }
}

/// A tag as the OCI distribution spec allows it.
pub(crate) fn check_tag(tag: &str) -> Result<(), Error> {
    let mut chars = tag.chars();
    let first = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if first && tag.len() <= 128 && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
        Ok(())
    } else {
        Err(Error::InvalidName {
            what: "the tag",
            value: tag.to_owned(),
            rule: "up to 128 letters, digits, `_`, `.` and `-`, not starting with `.` or `-`",
        })
    }
}

fn source_date_epoch() -> Result<u64, Error> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) if value.trim().is_empty() => Ok(0),
        Ok(value) => value.trim().parse().map_err(|_| Error::SourceDateEpoch { value }),
        Err(_) => Ok(0),
    }
}

/// RFC 3339 of `epoch`; 1970 for a time past what jiff holds.
fn created(epoch: u64) -> String {
    i64::try_from(epoch)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

fn relative(path: &Path) -> String {
    path.to_string_lossy().trim_start_matches('/').to_owned()
}

fn read(path: &Path, fix: &'static str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
        fix,
    })
}

fn write(path: &Path, data: &[u8]) -> Result<(), Error> {
    std::fs::write(path, data).map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })
}

/// Serialising plain structs to a `Vec` has no way to fail; kept an error
/// rather than a panic all the same.
fn in_memory(e: &serde_json::Error) -> Error {
    Error::Write {
        path: "<image in memory>".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// The OCI JSON documents, fields in a fixed order so the bytes, and so the
/// digests, never depend on a map's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: u32,
    media_type: &'static str,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u32,
    media_type: &'static str,
    manifests: Vec<Descriptor>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: &'static str,
    digest: String,
    size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    fn new(media_type: &'static str, digest: &str, size: usize) -> Self {
        Descriptor {
            media_type,
            digest: digest.to_owned(),
            size,
            annotations: None,
        }
    }
}

#[derive(Serialize)]
struct ImageConfig {
    created: String,
    architecture: &'static str,
    os: &'static str,
    config: RunConfig,
    rootfs: RootFs,
    history: Vec<History>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct RunConfig {
    user: String,
    env: Vec<String>,
    entrypoint: Vec<String>,
    working_dir: String,
    labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct RootFs {
    #[serde(rename = "type")]
    kind: &'static str,
    diff_ids: Vec<String>,
}

#[derive(Serialize)]
struct History {
    created: String,
    created_by: String,
}
