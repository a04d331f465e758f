//! `image: kinject://<binary>` in Kubernetes manifests, replaced by the
//! digest reference of that binary's pushed image, as `ko resolve` does for
//! `ko://`.
//!
//! The replacement is made in the text, not through a YAML parser: every
//! other byte (comments, key order, quoting, fields this crate does not know)
//! stays as it was, so the output diffs cleanly against its source. Only the
//! value of an `image` key is a reference; `kinject://` anywhere else (a
//! comment, an argument, a ConfigMap's text) is left alone.
//!
//! ```
//! let yaml = "# the controller\nspec:\n  containers:\n  - name: controller\n    image: kinject://controller # built from cmd/controller\n";
//! let resolved = kinject_image::resolve("config/controller.yaml", yaml, |binary| {
//!     Ok::<_, std::convert::Infallible>(format!("localhost:5000/{binary}@sha256:0123"))
//! })?;
//! assert_eq!(resolved, yaml.replace("kinject://controller", "localhost:5000/controller@sha256:0123"));
//! # Ok::<(), kinject_image::Error>(())
//! ```

use std::collections::BTreeMap;
use std::fmt::Display;

use crate::error::Error;

/// The scheme that makes an image reference name a binary of the workspace.
pub const SCHEME: &str = "kinject://";

/// One `image: kinject://<binary>` in a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Use {
    /// The binary named.
    pub binary: String,
    /// Which YAML document of the file, from 1.
    pub document: usize,
    /// The line, from 1.
    pub line: usize,
    /// The byte range of `kinject://<binary>` in the text.
    span: (usize, usize),
}

/// Every binary `yaml` names, in order, so a caller can build and push them
/// (in parallel, asynchronously) before calling [`resolve`].
///
/// # Errors
/// [`Error::BadReference`] naming `file`, the document and the line of a
/// `kinject://` value that names no binary.
pub fn references(file: &str, yaml: &str) -> Result<Vec<Use>, Error> {
    let mut uses = Vec::new();
    let mut document = 1;
    let mut content_seen = false;
    let mut offset = 0;
    for (index, line) in yaml.split_inclusive('\n').enumerate() {
        let text = line.trim_end_matches(['\n', '\r']);
        if is_document_start(text) {
            if content_seen {
                document += 1;
                content_seen = false;
            }
        } else {
            let code = &text[..code_end(text)];
            content_seen |= !code.trim().is_empty();
            for (start, end) in image_values(code) {
                let reference = &code[start..end];
                let binary = &reference[SCHEME.len()..];
                if !is_binary_name(binary) {
                    return Err(Error::BadReference {
                        file: file.to_owned(),
                        document,
                        line: index + 1,
                        reference: reference.to_owned(),
                    });
                }
                uses.push(Use {
                    binary: binary.to_owned(),
                    document,
                    line: index + 1,
                    span: (offset + start, offset + end),
                });
            }
        }
        offset += line.len();
    }
    Ok(uses)
}

/// `yaml` with every `image: kinject://<binary>` replaced by what `publish`
/// answers for that binary (a digest reference, `registry/repo@sha256:...`).
/// `publish` is called once per binary, however often it is named.
///
/// # Errors
/// [`Error::BadReference`] as [`references`]; [`Error::Publish`] naming the
/// file, document and line when `publish` fails.
pub fn resolve<E: Display>(
    file: &str,
    yaml: &str,
    mut publish: impl FnMut(&str) -> Result<String, E>,
) -> Result<String, Error> {
    let mut published: BTreeMap<String, String> = BTreeMap::new();
    let mut out = String::with_capacity(yaml.len());
    let mut copied = 0;
    for found in references(file, yaml)? {
        if !published.contains_key(&found.binary) {
            let pushed = publish(&found.binary).map_err(|e| Error::Publish {
                file: file.to_owned(),
                document: found.document,
                line: found.line,
                binary: found.binary.clone(),
                reason: e.to_string(),
            })?;
            published.insert(found.binary.clone(), pushed);
        }
        let (start, end) = found.span;
        out.push_str(&yaml[copied..start]);
        out.push_str(published.get(&found.binary).map_or("", String::as_str));
        copied = end;
    }
    out.push_str(&yaml[copied..]);
    Ok(out)
}

/// `---`, alone or before a document's first node.
fn is_document_start(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
}

/// Where a line's comment starts (a `#` at the start or after a blank,
/// outside quotes), or its length.
fn code_end(line: &str) -> usize {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q && previous != '\\' => quote = None,
            (None, '#') if previous == ' ' || previous == '\t' => return at,
            _ => {}
        }
        previous = c;
    }
    line.len()
}

/// The byte ranges of `kinject://...` values of `image` keys in `code`:
/// `image: kinject://x`, `- image: "kinject://x"`, `{image: 'kinject://x'}`,
/// `"image": "kinject://x"`.
fn image_values(code: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices(SCHEME) {
        let before = &code[..at];
        let quote = before.chars().next_back().filter(|c| matches!(c, '"' | '\''));
        let before = before.trim_end_matches(['"', '\'']).trim_end();
        let Some(key) = before.strip_suffix(':') else {
            continue;
        };
        let key = key.trim_end().trim_end_matches(['"', '\'']);
        let is_image_key = key.strip_suffix("image").is_some_and(|rest| {
            rest.chars()
                .next_back()
                .is_none_or(|c| matches!(c, ' ' | '\t' | '-' | '{' | ',' | '"' | '\''))
        });
        if !is_image_key {
            continue;
        }
        let value = &code[at..];
        let len = match quote {
            Some(q) => value.find(q).unwrap_or(value.len()),
            None => value
                .find(|c: char| c.is_whitespace() || matches!(c, ',' | '}' | ']'))
                .unwrap_or(value.len()),
        };
        found.push((at, at + len));
    }
    found
}

/// A cargo binary name: letters, digits, `-` and `_`.
fn is_binary_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;

    const MANIFESTS: &str = "\
# Two documents; the second runs the controller.
apiVersion: v1
kind: ConfigMap
metadata: {name: notes} # image: kinject://not-this
data:
  text: \"args: kinject://not-this-either\"
---
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - image: kinject://controller   # built from cmd/controller
        unknownField: kept
      - name: sidecar
        image: \"kinject://webhook\"
      initContainers: [{name: init, image: 'kinject://controller'}]
";

    fn pushed(binary: &str) -> Result<String, std::convert::Infallible> {
        Ok(format!("127.0.0.1:5000/{binary}@sha256:abc"))
    }

    #[test]
    fn every_image_value_is_found_with_its_document_and_line() {
        let uses = references("config/app.yaml", MANIFESTS).unwrap();
        let found: Vec<(&str, usize, usize)> = uses
            .iter()
            .map(|u| (u.binary.as_str(), u.document, u.line))
            .collect();
        assert_eq!(
            found,
            [("controller", 2, 14), ("webhook", 2, 17), ("controller", 2, 18)]
        );
    }

    #[test]
    fn only_the_references_change_and_each_binary_is_published_once() {
        let mut calls = Vec::new();
        let resolved = resolve("config/app.yaml", MANIFESTS, |binary| {
            calls.push(binary.to_owned());
            pushed(binary)
        })
        .unwrap();
        assert_eq!(calls, ["controller", "webhook"]);
        let expected = MANIFESTS
            .replace(
                "image: kinject://controller   #",
                "image: 127.0.0.1:5000/controller@sha256:abc   #",
            )
            .replace("\"kinject://webhook\"", "\"127.0.0.1:5000/webhook@sha256:abc\"")
            .replace("'kinject://controller'", "'127.0.0.1:5000/controller@sha256:abc'");
        assert_eq!(resolved, expected);
        assert!(resolved.contains("# image: kinject://not-this\n"));
    }

    #[test]
    fn a_bad_reference_names_the_file_document_and_line() {
        let yaml = "a: 1\n---\nb: 2\n---\nspec:\n  image: kinject://cmd/controller\n";
        let error = resolve("config/bad.yaml", yaml, pushed).unwrap_err();
        let Error::BadReference {
            file,
            document,
            line,
            reference,
        } = &error
        else {
            panic!("{error}");
        };
        assert_eq!((file.as_str(), *document, *line), ("config/bad.yaml", 3, 6));
        assert_eq!(reference, "kinject://cmd/controller");
        let message = error.to_string();
        assert!(
            message.starts_with("config/bad.yaml, document 3, line 6:"),
            "{message}"
        );

        let empty = references("x.yaml", "image: kinject://\n").unwrap_err();
        assert!(matches!(empty, Error::BadReference { line: 1, .. }), "{empty}");
    }

    #[test]
    fn a_failed_publish_names_where_the_binary_was_asked_for() {
        let error = resolve("config/app.yaml", MANIFESTS, |_| Err("no registry")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "config/app.yaml, document 2, line 14: cannot publish kinject://controller: no registry"
        );
    }

    #[test]
    fn a_leading_document_marker_starts_document_one() {
        let uses = references("a.yaml", "---\nimage: kinject://a\n---\nimage: kinject://b\n").unwrap();
        let documents: Vec<usize> = uses.iter().map(|u| u.document).collect();
        assert_eq!(documents, [1, 2]);
        assert_eq!(
            resolve("a.yaml", "no: references\n", pushed).unwrap(),
            "no: references\n"
        );
    }
}
