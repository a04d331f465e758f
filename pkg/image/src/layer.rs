//! One reproducible `tar+gzip` layer: the same files give the same bytes on
//! any machine, on any day, so the same sources give the same image digest.
//!
//! Entries are sorted by path, each parent directory comes before its
//! children, every entry is owned by 0:0 (unless said otherwise) with no user
//! or group names, and every time is one fixed time (`SOURCE_DATE_EPOCH`, or
//! 0). The gzip header has no file name and no time.

use std::collections::BTreeMap;
use std::io::Write;

use flate2::{Compression, GzBuilder};
use sha2::{Digest, Sha256};

use crate::error::Error;

/// What one path of the layer holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Content {
    /// A directory, with its mode and owner.
    Directory { mode: u32, owner: u64 },
    /// A regular file, with its mode.
    File { mode: u32, data: Vec<u8> },
}

/// The compressed layer and the digests an image names it by.
#[derive(Clone, Debug)]
pub(crate) struct Layer {
    /// The gzip stream, as pushed.
    pub(crate) compressed: Vec<u8>,
    /// `sha256:` of `compressed`: the manifest's layer digest.
    pub(crate) digest: String,
    /// `sha256:` of the tar stream: the config's `rootfs.diff_ids`.
    pub(crate) diff_id: String,
}

/// `sha256:<hex>` of `data`, the form OCI digests take.
pub(crate) fn sha256(data: &[u8]) -> String {
    let hash = Sha256::digest(data);
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    for byte in hash {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    hex
}

/// Adds every missing parent directory of `files` (mode 0755, root's), so
/// an unpacker never invents one with its own mode and time.
pub(crate) fn with_parents(mut files: BTreeMap<String, Content>) -> BTreeMap<String, Content> {
    let parents: Vec<String> = files
        .keys()
        .flat_map(|path| {
            path.match_indices('/')
                .map(|(at, _)| path[..at].to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    for parent in parents {
        files.entry(parent).or_insert(Content::Directory {
            mode: 0o755,
            owner: 0,
        });
    }
    files
}

/// The layer of `files` (paths without a leading `/`), every time `mtime`.
pub(crate) fn layer(files: &BTreeMap<String, Content>, mtime: u64) -> Result<Layer, Error> {
    let tar = tar_stream(files, mtime)?;
    let diff_id = sha256(&tar);
    // A gzip header without name, comment or time; "unknown" operating system.
    let mut gzip = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::default());
    gzip.write_all(&tar).map_err(in_memory)?;
    let compressed = gzip.finish().map_err(in_memory)?;
    Ok(Layer {
        digest: sha256(&compressed),
        diff_id,
        compressed,
    })
}

fn tar_stream(files: &BTreeMap<String, Content>, mtime: u64) -> Result<Vec<u8>, Error> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(mtime);
        header.set_gid(0);
        match content {
            Content::Directory { mode, owner } => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(*mode);
                header.set_uid(*owner);
                header.set_gid(*owner);
                header.set_size(0);
                tar.append_data(&mut header, format!("{path}/"), std::io::empty())
                    .map_err(in_memory)?;
            }
            Content::File { mode, data } => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(*mode);
                header.set_uid(0);
                header.set_size(data.len() as u64);
                tar.append_data(&mut header, path, data.as_slice())
                    .map_err(in_memory)?;
            }
        }
    }
    tar.into_inner().map_err(in_memory)
}

/// Writing to a `Vec` fails only on a path the tar format cannot hold.
fn in_memory(source: std::io::Error) -> Error {
    Error::Write {
        path: "<layer in memory>".into(),
        source,
    }
}
