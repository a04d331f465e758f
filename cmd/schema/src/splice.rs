//! Replacing the `openAPIV3Schema` block of a CRD manifest in place, keeping
//! every other byte of the file (comments, key order, quoting) as written.

use std::fmt;

/// Why a manifest's schema block could not be found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SpliceError(String);

impl fmt::Display for SpliceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `manifest` with the block under its one `openAPIV3Schema:` line replaced by
/// `schema_yaml` (a YAML document), indented two spaces deeper than the key.
pub(crate) fn splice_schema(manifest: &str, schema_yaml: &str) -> Result<String, SpliceError> {
    let lines: Vec<&str> = manifest.split_inclusive('\n').collect();
    let keys: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("openAPIV3Schema:"))
        .map(|(i, _)| i)
        .collect();
    let [key] = keys[..] else {
        return Err(SpliceError(format!(
            "expected exactly one `openAPIV3Schema:` key, found {}; keep one version with `schema:\\n  openAPIV3Schema:` in the manifest",
            keys.len()
        )));
    };
    let key_line = lines[key];
    let indent = key_line.len() - key_line.trim_start().len();
    let after_key = key_line.trim_start()["openAPIV3Schema:".len()..].trim();
    if !after_key.is_empty() && !after_key.starts_with('#') {
        return Err(SpliceError(format!(
            "line {}: `openAPIV3Schema:` is followed by an inline value; put the schema on the lines below the key",
            key + 1
        )));
    }
    // The block is every following line that is blank or indented deeper.
    let end = lines[key + 1..]
        .iter()
        .position(|l| {
            let body = l.trim_end_matches(['\n', '\r']);
            !body.trim().is_empty() && body.len() - body.trim_start().len() <= indent
        })
        .map_or(lines.len(), |p| key + 1 + p);
    // Blank lines at the end of the block belong to what follows.
    let mut block_end = end;
    while block_end > key + 1 && lines[block_end - 1].trim().is_empty() {
        block_end -= 1;
    }

    let pad = " ".repeat(indent + 2);
    let mut out = String::with_capacity(manifest.len() + schema_yaml.len());
    lines[..=key].iter().for_each(|l| out.push_str(l));
    if !key_line.ends_with('\n') {
        out.push('\n');
    }
    for line in schema_yaml.lines() {
        out.push_str(&pad);
        out.push_str(line);
        out.push('\n');
    }
    lines[block_end..].iter().for_each(|l| out.push_str(l));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "# keep me\nspec:\n  versions:\n    - name: v1\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            old: {}\n\n      additionalPrinterColumns:\n        - name: Ready\n";

    #[test]
    fn replaces_only_the_schema_block() {
        let out = splice_schema(MANIFEST, "type: object\nproperties:\n  new:\n    type: string\n").unwrap();
        assert_eq!(
            out,
            "# keep me\nspec:\n  versions:\n    - name: v1\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            new:\n              type: string\n\n      additionalPrinterColumns:\n        - name: Ready\n"
        );
        assert_eq!(
            splice_schema(&out, "type: object\nproperties:\n  old: {}\n").unwrap(),
            MANIFEST
        );
    }

    #[test]
    fn works_at_the_end_of_the_file() {
        let out = splice_schema("schema:\n  openAPIV3Schema:\n    type: string", "type: object\n").unwrap();
        assert_eq!(out, "schema:\n  openAPIV3Schema:\n    type: object\n");
    }

    #[test]
    fn refuses_missing_duplicate_or_inline_keys() {
        assert!(splice_schema("a: 1\n", "x\n").unwrap_err().0.contains("found 0"));
        assert!(
            splice_schema("openAPIV3Schema:\n  a: 1\nopenAPIV3Schema:\n  a: 1\n", "x\n")
                .unwrap_err()
                .0
                .contains("found 2")
        );
        assert!(
            splice_schema("openAPIV3Schema: {}\n", "x\n")
                .unwrap_err()
                .0
                .contains("inline value")
        );
    }
}
