//! What can go wrong, each variant worded as what failed, where, and what to
//! do about it, so a command line can print it as it stands.

use std::path::PathBuf;

/// Why an image could not be built, written, pushed, or a manifest resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file the image needs could not be read.
    #[error("cannot read {path}: {source}; {fix}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
        /// What to do about it.
        fix: &'static str,
    },

    /// The image layout directory could not be written.
    #[error("cannot write {path}: {source}; check that the directory is writable and the disk not full")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },

    /// The executable is not an ELF file this crate can read.
    #[error(
        "{path} is not an executable for Linux: {reason}; build it for a Linux target (`cargo build --target x86_64-unknown-linux-gnu`)"
    )]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What the ELF reader said.
        reason: String,
    },

    /// A shared library the executable needs is nowhere the dynamic loader
    /// would look.
    #[error(
        "{library}, which {needed_by} needs, is in none of {searched:?}; install the package that ships it (`apt-file search {library}`), or build a static executable"
    )]
    MissingLibrary {
        /// The library's name as the dynamic section says it.
        library: String,
        /// The executable or library that needs it.
        needed_by: PathBuf,
        /// The directories looked in, in order.
        searched: Vec<PathBuf>,
    },

    /// `SOURCE_DATE_EPOCH` is set but is not a number of seconds.
    #[error(
        "SOURCE_DATE_EPOCH={value:?} is not a whole number of seconds since 1970; set it to e.g. `$(git log -1 --format=%ct)` or unset it"
    )]
    SourceDateEpoch {
        /// The variable's value.
        value: String,
    },

    /// A name given for the image (its executable's name, a tag) would make a
    /// bad path or reference.
    #[error("{what} {value:?} is not valid: {rule}")]
    InvalidName {
        /// Which name.
        what: &'static str,
        /// The name given.
        value: String,
        /// What a valid one looks like.
        rule: &'static str,
    },

    /// The reference to push to does not parse.
    #[error(
        "cannot push to {reference:?}: {reason}; name a repository as `registry[:port]/path/name`, e.g. `localhost:5000/controller`"
    )]
    Reference {
        /// The reference given.
        reference: String,
        /// What the parser said.
        reason: String,
    },

    /// The registry refused or did not answer.
    #[error(
        "pushing {what} to {reference} failed: {reason}; check that the registry runs and that the credentials may push there"
    )]
    Push {
        /// The blob or manifest.
        what: String,
        /// Where to.
        reference: String,
        /// What the registry or the connection said.
        reason: String,
    },

    /// The registry stored the manifest under a digest other than the image's.
    #[error(
        "the registry at {reference} answered digest {got}, but the image's manifest is {expected}; the registry rewrote the manifest, so the digest reference would name another image"
    )]
    DigestMismatch {
        /// Where to.
        reference: String,
        /// The image's manifest digest.
        expected: String,
        /// What the registry answered.
        got: String,
    },

    /// A `kinject://` reference in a manifest does not name a binary.
    #[error(
        "{file}, document {document}, line {line}: {reference:?} does not name a binary; write `image: kinject://<binary>` with the name of a binary of the workspace (letters, digits, `-` and `_`)"
    )]
    BadReference {
        /// The manifest file.
        file: String,
        /// Which YAML document in the file, from 1.
        document: usize,
        /// The line, from 1.
        line: usize,
        /// The reference as written.
        reference: String,
    },

    /// The caller's function could not publish a binary a manifest names.
    #[error("{file}, document {document}, line {line}: cannot publish kinject://{binary}: {reason}")]
    Publish {
        /// The manifest file.
        file: String,
        /// Which YAML document in the file, from 1.
        document: usize,
        /// The line, from 1.
        line: usize,
        /// The binary named.
        binary: String,
        /// What the caller's function said.
        reason: String,
    },
}
