//! The manifests a command works on: one file, or the `.yaml`/`.yml` files
//! directly in a directory, in name order (as `kubectl apply -f dir/` reads
//! them, so `config/samples/` stays out).

use std::path::{Path, PathBuf};

/// Manifest files and their text.
pub(crate) struct Manifests(Vec<(String, String)>);

/// Reads `path`: a file, or a directory's manifests.
pub(crate) fn read(path: &Path) -> Result<Manifests, String> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut read = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        read.push((file.display().to_string(), text));
    }
    if read.is_empty() {
        return Err(format!("{} holds no .yaml or .yml manifest", path.display()));
    }
    Ok(Manifests(read))
}

impl Manifests {
    /// Each file's name and text.
    pub(crate) fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(file, text)| (file.as_str(), text.as_str()))
    }

    /// Every document, as one multi-document stream.
    pub(crate) fn join(&self) -> String {
        self.0
            .iter()
            .map(|(_, text)| text.as_str())
            .collect::<Vec<_>>()
            .join("\n---\n")
    }

    /// Only the documents of kind CustomResourceDefinition.
    pub(crate) fn definitions_only(&self, path: &Path) -> Result<Manifests, String> {
        let mut kept = Vec::new();
        for (file, text) in &self.0 {
            for document in text.split("\n---") {
                if document
                    .lines()
                    .any(|line| line.trim_end() == "kind: CustomResourceDefinition")
                {
                    kept.push((file.clone(), document.trim_start_matches('\n').to_owned()));
                }
            }
        }
        if kept.is_empty() {
            return Err(format!(
                "{} holds no CustomResourceDefinition; run hack/update-codegen.sh to write them",
                path.display()
            ));
        }
        Ok(Manifests(kept))
    }
}
