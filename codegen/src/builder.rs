//! [`Builder`]: the generator called from a `build.rs`.

use std::path::{Path, PathBuf};

use crate::config::{ApiModule, Config, ExternalKind};
use crate::emit::Layout;
use crate::error::{Diagnostic, Error};
use crate::output::generate;
use crate::stage;

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
        self.apis.push(ApiModule::new(krate, module, source));
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
            None => Config::new(out_dir.clone()),
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
