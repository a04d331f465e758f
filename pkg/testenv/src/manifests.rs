//! Manifests as `kubectl apply -f` reads them: one file, or the `.yaml` and
//! `.yml` files directly in a directory (not its folders, so
//! `config/samples/` stays out of `config/`), in name order; and the
//! documents of each, skipping those that hold only comments.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `path` itself when it is a file, else the manifests directly in it, in
/// name order.
pub fn manifest_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !std::fs::metadata(path)?.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let file = entry?.path();
        if file.is_file() && file.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}

/// The documents of a multi-document YAML text, each with its number in the
/// text (from 1); `source` names the text in the error of one that does not
/// parse (`config/x.yaml, document 2: ...`).
pub fn yaml_documents(source: &str, yaml: &str) -> Result<Vec<(usize, Value)>, String> {
    let mut documents = Vec::new();
    for (i, doc) in yaml.split("\n---").enumerate() {
        let empty = doc.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#') || l == "---"
        });
        if empty {
            continue;
        }
        let value = serde_saphyr::from_str(doc).map_err(|e| format!("{source}, document {}: {e}", i + 1))?;
        documents.push((i + 1, value));
    }
    Ok(documents)
}
