//! The generator: reads annotated API types and emits the typed layer
//! (clients, listers, informers, injection accessors and reconciler traits) as
//! thin glue over `kinject-runtime`.
//!
//! # Where it stands
//!
//! This is the generation-time end of kinject's code generation, above
//! [`model`] (`kinject-model`, the one parser of marker attributes, which the
//! `kinject-macros` derive uses too, so both agree on what a marker means).
//! It depends on the model, `syn`, `quote` and `proc-macro2` to read and
//! write Rust, `prettyplease` to format it, `toml` and `serde` for the
//! config, `thiserror`, and `clap` for the binary only (feature `cli`). It
//! never depends on the runtime or on Kubernetes crates: the code it writes
//! does.
//!
//! The pipeline is parse → model → emit → format → write:
//! [`config`] names the inputs, the scanner reads every `#[derive(Kind)]`
//! struct through [`model`] into a plan per kind, the emitter turns each kind
//! into one module, prettyplease formats it, and only files whose bytes
//! changed are written, all or none (see [`Generated::write`]).
//! [`scaffold`] starts a new kind's hand-written files.
//!
//! Three ways to run it:
//!
//! * `hack/update-codegen.sh` (or `cargo run -p kinject-codegen`) regenerates the
//!   checked-in `generated/` crate from `codegen.toml`; `--verify` only checks.
//! * [`generate`] and [`Generated`] do the same from a program.
//! * [`Builder`] generates into `OUT_DIR` from a `build.rs`, as
//!   `codegen/tests/buildrs-fixture` does:
//!
//! ```no_run
//! // build.rs of a crate beside the API crate `apis`
//! fn main() -> Result<(), kinject_codegen::Error> {
//!     kinject_codegen::Builder::new()
//!         .api("apis", "apis::v1alpha1", "../apis/src/v1alpha1")
//!         .generate()
//! }
//! // src/lib.rs: pub mod generated { include!(concat!(env!("OUT_DIR"), "/codegen.rs")); }
//! ```

#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
mod emit;
mod error;
pub use kinject_model as model;
pub mod scaffold;
mod scan;
mod stage;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use config::{ApiModule, Config, ExternalKind, ScaffoldPaths};
pub use emit::{HEADER, Layout};
pub use error::{Diagnostic, Error};
/// All-or-nothing writes of several files (see the `stage` module), for
/// tools that write a tree of their own, as `kinject init` does.
pub use stage::write_all;

/// The rendered output of one run, not yet written.
#[derive(Debug)]
pub struct Generated {
    /// File contents keyed by path relative to the output directory.
    pub files: BTreeMap<PathBuf, String>,
    /// How many kinds were found (API and external).
    pub kinds: usize,
    /// Every source file read, for `cargo:rerun-if-changed`.
    pub inputs: Vec<PathBuf>,
}

/// What [`Generated::write`] changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Files created or rewritten.
    pub written: Vec<PathBuf>,
    /// Generated files no longer produced, deleted.
    pub removed: Vec<PathBuf>,
}

/// A file in the output directory that does not match what would be generated.
#[derive(Debug, PartialEq, Eq)]
pub enum Stale {
    /// Would be created.
    Missing(PathBuf),
    /// Would be rewritten.
    Differs(PathBuf),
    /// A generated file that would be deleted.
    Extra(PathBuf),
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::Missing(p) => write!(f, "{} (missing)", p.display()),
            Stale::Differs(p) => write!(f, "{} (differs)", p.display()),
            Stale::Extra(p) => write!(f, "{} (no longer generated)", p.display()),
        }
    }
}

/// Scans the inputs `config` names and renders every output file.
pub fn generate(config: &Config, layout: &Layout) -> Result<Generated, Error> {
    let scanned = scan::scan(config)?;
    let files = emit::emit(&scanned.kinds, config.reconcilers, config.testing, layout)?;
    Ok(Generated {
        files,
        kinds: scanned.kinds.iter().filter(|k| k.verbs.is_some()).count(),
        inputs: scanned.inputs,
    })
}

impl Generated {
    /// Writes the files into `dir`, touching only those whose bytes differ, and
    /// deletes generated files (those starting with [`HEADER`]) that are no
    /// longer produced. Hand-written files are never touched.
    ///
    /// All or nothing: every changed file is first written to a temporary file
    /// beside it, and only once all were written are they renamed into place
    /// (each rename replaces its file atomically; should one fail, the files
    /// renamed before it are put back). On an error while writing, no file in
    /// `dir` has changed and the error names the file or directory at fault.
    /// Files no longer produced are deleted last, after every new file is in
    /// place. Unchanged files are not written, so their modification times stay.
    pub fn write(&self, dir: &Path) -> Result<WriteReport, Error> {
        let mut report = WriteReport::default();
        let mut extra = Vec::new();
        for stale in self.check(dir)? {
            match stale {
                Stale::Missing(path) | Stale::Differs(path) => report.written.push(path),
                Stale::Extra(path) => extra.push(path),
            }
        }
        stage::write_all(report.written.iter().map(|path| {
            let rel = path.strip_prefix(dir).unwrap_or(path);
            (path.as_path(), self.files.get(rel).map_or("", String::as_str))
        }))?;
        for path in extra {
            std::fs::remove_file(&path).map_err(|e| io_error(&path, "remove", e))?;
            report.removed.push(path);
        }
        Ok(report)
    }

    /// The files in `dir` that differ from what would be written, without
    /// writing anything; empty when `dir` is up to date.
    pub fn check(&self, dir: &Path) -> Result<Vec<Stale>, Error> {
        let mut stale = Vec::new();
        for (rel, content) in &self.files {
            let path = dir.join(rel);
            match std::fs::read(&path) {
                Ok(existing) if existing == content.as_bytes() => {}
                Ok(_) => stale.push(Stale::Differs(path)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => stale.push(Stale::Missing(path)),
                Err(e) => return Err(io_error(&path, "read", e)),
            }
        }
        for path in generated_files(dir)? {
            let rel = path.strip_prefix(dir).unwrap_or(&path);
            if !self.files.contains_key(rel) {
                stale.push(Stale::Extra(path));
            }
        }
        Ok(stale)
    }
}

/// The `.rs` files under `dir` that carry the generated header.
fn generated_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io_error(dir, "read directory", e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, "read directory", e))?;
        let path = entry.path();
        if path.is_dir() {
            out.extend(generated_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs")
            && std::fs::read_to_string(&path).is_ok_and(|t| t.starts_with(HEADER))
        {
            out.push(path);
        }
    }
    Ok(out)
}

fn io_error(path: &Path, action: &str, e: std::io::Error) -> Error {
    Error::one(Diagnostic::file(
        path,
        format!("cannot {action}: {e}; check the path and its permissions"),
    ))
}

/// Generates into `OUT_DIR` from a `build.rs`, like prost-build and tonic-build.
///
/// The output is one file (`codegen.rs` unless [`Builder::file_name`] says
/// otherwise) of nested modules, `<group>::<version>::<kind>`, to `include!`
/// inside a module. The crate needs the generated code's dependencies:
/// `kinject-runtime`, `kube`, `k8s-openapi`, `futures`, `either`, `serde` and
/// `serde_json`, plus the crates holding the kinds.
#[derive(Debug, Clone)]
pub struct Builder {
    config_file: Option<PathBuf>,
    apis: Vec<ApiModule>,
    externals: Vec<ExternalKind>,
    reconcilers: Option<bool>,
    testing: Option<bool>,
    out_dir: Option<PathBuf>,
    file_name: String,
    cargo_directives: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            config_file: None,
            apis: Vec::new(),
            externals: Vec::new(),
            reconcilers: None,
            testing: None,
            out_dir: None,
            file_name: "codegen.rs".to_owned(),
            cargo_directives: true,
        }
    }
}

impl Builder {
    /// A builder with no inputs, writing `codegen.rs` into `OUT_DIR`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the API modules, external kinds and `reconcilers` switch of a
    /// `codegen.toml` (its `output` is ignored: the output goes to `OUT_DIR`).
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// Scans `source` (a directory) for kinds reachable at `module` of `krate`.
    pub fn api(mut self, krate: &str, module: &str, source: impl Into<PathBuf>) -> Self {
        self.apis.push(ApiModule {
            krate: krate.to_owned(),
            module: module.to_owned(),
            source: source.into(),
        });
        self
    }

    /// Serves a kind defined elsewhere (client, informer and lister).
    pub fn external(mut self, kind: ExternalKind) -> Self {
        self.externals.push(kind);
        self
    }

    /// Whether `#[genreconciler]` kinds get their reconciler module (default:
    /// the config file's `reconcilers`, or yes).
    pub fn reconcilers(mut self, on: bool) -> Self {
        self.reconcilers = Some(on);
        self
    }

    /// Whether to emit the `testing` module (the CRDs tests install);
    /// default: the config file's `testing`, or no.
    pub fn testing(mut self, on: bool) -> Self {
        self.testing = Some(on);
        self
    }

    /// Writes there instead of `OUT_DIR`.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The name of the output file (default `codegen.rs`).
    pub fn file_name(mut self, name: impl Into<String>) -> Self {
        self.file_name = name.into();
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for every input (default yes).
    pub fn cargo_directives(mut self, on: bool) -> Self {
        self.cargo_directives = on;
        self
    }

    /// Generates and writes the output file if its content changed, through a
    /// temporary file renamed into place, so the file is either the old one or
    /// the new one, never a part of it.
    pub fn generate(self) -> Result<(), Error> {
        let out_dir = match self
            .out_dir
            .clone()
            .or_else(|| std::env::var_os("OUT_DIR").map(PathBuf::from))
        {
            Some(dir) => dir,
            None => {
                return Err(Error::one(Diagnostic::file(
                    "build.rs",
                    "OUT_DIR is not set; call Builder::generate from a build script, or set Builder::out_dir",
                )));
            }
        };
        let mut config = match &self.config_file {
            Some(path) => Config::load(path)?,
            None => Config {
                output: out_dir.clone(),
                reconcilers: true,
                testing: false,
                apis: Vec::new(),
                externals: Vec::new(),
                scaffold: None,
            },
        };
        if let Some(on) = self.reconcilers {
            config.reconcilers = on;
        }
        if let Some(on) = self.testing {
            config.testing = on;
        }
        config.output = out_dir.clone();
        config.apis.extend(self.apis);
        config.externals.extend(self.externals);
        let generated = generate(&config, &Layout::SingleFile(self.file_name.clone()))?;
        if self.cargo_directives {
            for input in generated.inputs.iter().chain(self.config_file.iter()) {
                println!("cargo:rerun-if-changed={}", input.display());
            }
            for api in &config.apis {
                // A new file in an API directory must rerun the build script too.
                println!("cargo:rerun-if-changed={}", api.source.display());
            }
        }
        // Only the one file is ours in OUT_DIR; write it alone.
        let content = generated
            .files
            .get(Path::new(&self.file_name))
            .map_or("", String::as_str);
        let path = out_dir.join(&self.file_name);
        if std::fs::read(&path).ok().as_deref() != Some(content.as_bytes()) {
            // Through a temporary file and a rename: an interrupted build never
            // leaves a half-written file for the next one to include.
            stage::write_all([(path.as_path(), content)])?;
        }
        Ok(())
    }
}
