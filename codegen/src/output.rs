//! One run's output: rendered files, written all or none, or compared with
//! what a directory holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::emit::{self, HEADER, Layout};
use crate::error::{Error, io_error};
use crate::{scan, stage};

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
