//! Errors a person can act on: where (file:line:col), what is wrong, and the fix.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem, located in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file at fault (as the user named it, relative paths kept relative).
    pub file: PathBuf,
    /// 1-based line and column, when the problem has a place inside the file.
    pub position: Option<(usize, usize)>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Diagnostic {
    /// A problem at `line:column` (both 1-based) of `file`.
    pub fn at(file: impl Into<PathBuf>, line: usize, column: usize, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.into(),
            position: Some((line, column)),
            message: message.into(),
        }
    }

    /// A problem with a whole file (or directory).
    pub fn file(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.into(),
            position: None,
            message: message.into(),
        }
    }

    /// One diagnostic per message of a (possibly combined) `syn::Error`, located
    /// through its span.
    pub(crate) fn from_syn(file: &Path, err: syn::Error) -> Vec<Self> {
        err.into_iter()
            .map(|e| {
                let start = e.span().start();
                // proc-macro2 counts columns from 0, editors from 1.
                Diagnostic::at(file, start.line, start.column + 1, e.to_string())
            })
            .collect()
    }

    /// The position of byte `offset` in `text`, 1-based, counting characters.
    pub(crate) fn position_of(text: &str, offset: usize) -> (usize, usize) {
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{}:{line}:{column}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// Why generation failed: every problem found, not just the first.
///
/// `Debug` prints the same text as `Display`, so a `build.rs` whose `main`
/// returns `Result<(), Error>` (or calls `.unwrap()`) shows the located
/// messages rather than a struct dump.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub struct Error {
    /// The problems, in the order they were found.
    pub diagnostics: Vec<Diagnostic>,
}

impl Error {
    pub(crate) fn one(diagnostic: Diagnostic) -> Self {
        Error {
            diagnostics: vec![diagnostic],
        }
    }
}

impl From<Vec<Diagnostic>> for Error {
    fn from(diagnostics: Vec<Diagnostic>) -> Self {
        Error { diagnostics }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "error: {d}")?;
        }
        Ok(())
    }
}

/// An I/O failure on `path`, with what was being done and how to fix it.
pub(crate) fn io_error(path: &Path, action: &str, e: std::io::Error) -> Error {
    Error::one(Diagnostic::file(
        path,
        format!("cannot {action}: {e}; check the path and its permissions"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_like_display() {
        let err = Error::from(vec![
            Diagnostic::at("apis/src/lib.rs", 3, 5, "unknown key `namespace`"),
            Diagnostic::file("codegen.toml", "no such file"),
        ]);
        let text = "error: apis/src/lib.rs:3:5: unknown key `namespace`\nerror: codegen.toml: no such file";
        assert_eq!(err.to_string(), text);
        assert_eq!(format!("{err:?}"), text);
    }

    #[test]
    fn positions_are_one_based() {
        let text = "ab\ncdé\nf";
        assert_eq!(Diagnostic::position_of(text, 0), (1, 1));
        assert_eq!(Diagnostic::position_of(text, 3), (2, 1));
        assert_eq!(Diagnostic::position_of(text, text.find('f').unwrap()), (3, 1));
        assert_eq!(
            Diagnostic::position_of(text, 7),
            (2, 4),
            "columns count characters"
        );
    }
}
