//! All-or-nothing writes of several files.
//!
//! Every new content first goes to a temporary file beside its target (same
//! directory, so same filesystem). Only once all of them are written are they
//! renamed into place, and a rename within a filesystem replaces its target
//! atomically. A failure while writing removes the temporary files (and the
//! directories created for them) and leaves every target as it was. A failure
//! while renaming, which needs something to change the directory under the
//! run, puts back the files already renamed: each replaced target was first
//! hard-linked (or, where links are not supported, copied) to a backup beside
//! it.
//!
//! Temporary files and backups are hidden (`.<name>.<pid>.<n>.kinject-tmp`,
//! `.kinject-old`) and do not end in `.rs`, so one left behind by a killed
//! process is never taken for a generated file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, io_error};

/// Names the temporary files of this process apart (tests write in parallel).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Writes each `(target, content)`, all or none: on `Err` no target changed.
pub fn write_all<'a>(files: impl IntoIterator<Item = (&'a Path, &'a str)>) -> Result<(), Error> {
    stage(files)?.commit()
}

/// New contents written beside their targets, not yet in place. Dropped
/// before [`commit`](Staged::commit) succeeds, it removes what it wrote.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    files: Vec<StagedFile>,
    /// A second name for each target's current file, once backed up (`None`
    /// where the target does not exist).
    backups: Vec<Option<PathBuf>>,
    /// Directories created for the targets, outermost first.
    created_dirs: Vec<PathBuf>,
}

#[derive(Debug)]
struct StagedFile {
    target: PathBuf,
    temp: PathBuf,
}

/// Writes every content to a temporary file beside its target.
pub(crate) fn stage<'a>(files: impl IntoIterator<Item = (&'a Path, &'a str)>) -> Result<Staged, Error> {
    let mut staged = Staged::default();
    for (target, content) in files {
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_dirs(parent, &mut staged.created_dirs)?;
        }
        let (temp, mut file) = create_sibling(target, "kinject-tmp", |path| {
            OpenOptions::new().write(true).create_new(true).open(path)
        })
        .map_err(|e| io_error(target, "write", e))?;
        staged.files.push(StagedFile {
            target: target.to_path_buf(),
            temp: temp.clone(),
        });
        file.write_all(content.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| io_error(target, &format!("write {}", temp.display()), e))?;
        drop(file);
        // A rewritten file keeps its permissions, as an in-place write would.
        if let Ok(meta) = std::fs::metadata(target) {
            std::fs::set_permissions(&temp, meta.permissions())
                .map_err(|e| io_error(target, &format!("set the permissions of {}", temp.display()), e))?;
        }
    }
    Ok(staged)
}

impl Staged {
    /// Renames every temporary file over its target. On `Err`, the targets
    /// already replaced are restored from their backups and the new ones
    /// removed.
    pub(crate) fn commit(mut self) -> Result<(), Error> {
        self.back_up()?;
        self.rename()
    }

    /// Backs up every target that exists, before any is replaced.
    fn back_up(&mut self) -> Result<(), Error> {
        for f in &self.files {
            let b = backup(&f.target).map_err(|e| io_error(&f.target, "back up", e))?;
            self.backups.push(b);
        }
        Ok(())
    }

    /// The renames, once every target is backed up.
    fn rename(mut self) -> Result<(), Error> {
        let mut failure = None;
        for (i, f) in self.files.iter().enumerate() {
            if let Err(e) = std::fs::rename(&f.temp, &f.target) {
                failure = Some((i, e));
                break;
            }
        }
        let Some((failed, e)) = failure else {
            self.files.clear();
            // A leftover backup is hidden and harmless; nothing to report.
            for backup in self.backups.drain(..).flatten() {
                let _ = std::fs::remove_file(backup);
            }
            self.created_dirs.clear();
            return Ok(());
        };
        let restored = self.files[..failed]
            .iter()
            .zip(&self.backups[..failed])
            .rev()
            .fold(true, |ok, (done, backup)| {
                restore(&done.target, backup.as_deref()) && ok
            });
        let target = self.files[failed].target.clone();
        // The restored files are done with; dropping `self` removes the rest
        // (temporaries, backups, the directories created for new files).
        self.files.drain(..failed);
        self.backups.drain(..failed);
        let action = if restored {
            "rename the new content into place (every file was left as it was)"
        } else {
            "rename the new content into place, nor restore every file renamed before it"
        };
        Err(io_error(&target, action, e))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(&f.temp);
        }
        for backup in self.backups.iter().flatten() {
            let _ = std::fs::remove_file(backup);
        }
        for dir in self.created_dirs.drain(..).rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Creates `dir` and its missing ancestors, recording each one created.
fn create_dirs(dir: &Path, created: &mut Vec<PathBuf>) -> Result<(), Error> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dirs(parent, created)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {
            created.push(dir.to_path_buf());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(io_error(dir, "create directory", e)),
    }
}

/// Runs `make` on a fresh hidden name beside `target` ending in `.<suffix>`,
/// until one is free.
fn create_sibling<T>(
    target: &Path,
    suffix: &str,
    mut make: impl FnMut(&Path) -> std::io::Result<T>,
) -> std::io::Result<(PathBuf, T)> {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = target.with_file_name(format!(".{name}.{}.{n}.{suffix}", std::process::id()));
        match make(&path) {
            Ok(made) => return Ok((path, made)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}

/// A second name for `target`'s current file, if it has one: a hard link, or a
/// copy where links are not supported.
fn backup(target: &Path) -> std::io::Result<Option<PathBuf>> {
    match std::fs::symlink_metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    let (path, ()) = create_sibling(target, "kinject-old", |path| {
        std::fs::hard_link(target, path).or_else(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                return Err(e);
            }
            let mut copy = OpenOptions::new().write(true).create_new(true).open(path)?;
            let copied = File::open(target)
                .and_then(|mut from| std::io::copy(&mut from, &mut copy))
                .and_then(|_| std::fs::metadata(target))
                .and_then(|meta| std::fs::set_permissions(path, meta.permissions()));
            if copied.is_err() {
                let _ = std::fs::remove_file(path);
            }
            copied
        })
    })?;
    Ok(Some(path))
}

/// Puts `target` back as it was: its backup, or no file when it had none.
fn restore(target: &Path, backup: Option<&Path>) -> bool {
    match backup {
        Some(backup) => std::fs::rename(backup, target).is_ok(),
        None => std::fs::remove_file(target).is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("codegen-stage-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Every entry under `dir`: file bytes and mtime, or `None` for a directory.
    fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<(Vec<u8>, SystemTime)>> {
        let mut out = BTreeMap::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(path.clone(), None);
                out.extend(tree(&path));
            } else {
                out.insert(
                    path.clone(),
                    Some((std::fs::read(&path).unwrap(), meta.modified().unwrap())),
                );
            }
        }
        out
    }

    #[test]
    fn a_failed_rename_puts_back_the_files_renamed_before_it() {
        let dir = temp_dir("rollback");
        let (a, b, c) = (dir.join("a.rs"), dir.join("new/b.rs"), dir.join("c.rs"));
        std::fs::write(&a, "old a").unwrap();
        let mut staged = stage([
            (a.as_path(), "new a"),
            (b.as_path(), "new b"),
            (c.as_path(), "new c"),
        ])
        .unwrap();
        staged.back_up().unwrap();
        // Something takes c's place between the backups and the renames.
        std::fs::create_dir(&c).unwrap();
        std::fs::write(c.join("keep"), "").unwrap();
        let before = tree(&dir)
            .into_iter()
            .filter(|(p, _)| {
                let name = p.to_string_lossy();
                !name.ends_with(".kinject-tmp")
                    && !name.ends_with(".kinject-old")
                    && !p.starts_with(dir.join("new"))
            })
            .collect::<BTreeMap<_, _>>();

        let err = staged.rename().unwrap_err().to_string();
        assert!(err.contains(&format!("{}: cannot rename", c.display())), "{err}");
        assert!(err.contains("every file was left as it was"), "{err}");
        assert_eq!(
            tree(&dir),
            before,
            "a restored (same file, same mtime), b and the temporaries gone"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dropping_staged_files_removes_them_and_the_directories_made_for_them() {
        let dir = temp_dir("drop");
        std::fs::write(dir.join("a.rs"), "old a").unwrap();
        let before = tree(&dir);
        let staged = stage([
            (dir.join("a.rs").as_path(), "new a"),
            (dir.join("x/y/b.rs").as_path(), "new b"),
        ])
        .unwrap();
        assert_eq!(tree(&dir).len(), before.len() + 4, "two temporaries, x and x/y");
        drop(staged);
        assert_eq!(tree(&dir), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn commit_replaces_and_creates_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("commit");
        let a = dir.join("a.rs");
        std::fs::write(&a, "old a").unwrap();
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o600)).unwrap();
        let b = dir.join("sub/b.rs");
        write_all([(a.as_path(), "new a"), (b.as_path(), "new b")]).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new b");
        assert_eq!(std::fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o600);
        let names: Vec<String> = tree(&dir)
            .keys()
            .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            ["a.rs", "sub", "sub/b.rs"],
            "no temporaries or backups left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
