//! Which shared libraries an executable links, found where the dynamic
//! loader would find them, so the image holds exactly those and nothing else.
//!
//! The search follows `ld.so(8)`: a name with a slash is a path; otherwise
//! `DT_RPATH` (when there is no `DT_RUNPATH`, its own and the executable's),
//! `DT_RUNPATH` (its own only), the directories of `/etc/ld.so.conf` (what
//! `ldconfig` builds the loader's cache from), then the built-in directories.
//! `LD_LIBRARY_PATH` is left out on purpose: the image's loader never sees
//! the building machine's environment. A candidate of another ELF class or
//! machine is skipped, as the loader skips it. A name already loaded (the
//! interpreter, a library found earlier) is not searched again.
//!
//! ```
//! let linked = kinject_image::elf::linked(&std::env::current_exe()?)?;
//! // A Rust test executable on glibc: the loader, and libc among its libraries.
//! assert!(linked.interpreter.is_some());
//! assert!(linked.libraries.iter().any(|l| l.ends_with("libc.so.6")));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use goblin::elf::Elf;
use goblin::elf::header::{EM_386, EM_AARCH64, EM_X86_64};

use crate::error::Error;

/// An executable's dynamic linking, as found on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Linked {
    /// The OCI architecture (`amd64`, `arm64`, `386`).
    pub architecture: &'static str,
    /// `PT_INTERP`: the dynamic loader's path, `None` for a static executable.
    pub interpreter: Option<PathBuf>,
    /// Every shared library loaded at start, directly or not, at the path the
    /// loader finds it through (not the symlink's target), sorted.
    pub libraries: Vec<PathBuf>,
}

/// What the loader needs to know of one ELF object.
struct Object {
    is_64: bool,
    machine: u16,
    interpreter: Option<PathBuf>,
    needed: Vec<String>,
    rpath: Vec<PathBuf>,
    runpath: Vec<PathBuf>,
}

/// Reads `executable` and every library it needs, transitively.
///
/// # Errors
/// [`Error::Read`] when a file cannot be read, [`Error::NotElf`] when the
/// executable is not an ELF file of a known machine, and
/// [`Error::MissingLibrary`] when a needed library is nowhere the loader looks.
pub fn linked(executable: &Path) -> Result<Linked, Error> {
    let root = read_object(executable)?;
    let architecture = architecture(root.machine).ok_or_else(|| Error::NotElf {
        path: executable.to_owned(),
        reason: format!("machine {} is not x86_64, aarch64 or i386", root.machine),
    })?;
    let system = system_directories(root.machine);
    let mut loaded: BTreeSet<String> = BTreeSet::new();
    if let Some(name) = root.interpreter.as_deref().and_then(file_name) {
        loaded.insert(name);
    }
    let mut libraries = BTreeSet::new();
    let mut queue = VecDeque::from([(
        executable.to_owned(),
        root.needed.clone(),
        search_path(&root, &root),
    )]);
    while let Some((needed_by, needed, dirs)) = queue.pop_front() {
        for name in needed {
            if !loaded.insert(name.clone()) {
                continue;
            }
            let searched: Vec<PathBuf> = dirs.iter().chain(&system).cloned().collect();
            let path = find(&name, &searched, &root).ok_or_else(|| Error::MissingLibrary {
                library: name.clone(),
                needed_by: needed_by.clone(),
                searched: searched.clone(),
            })?;
            let object = read_object(&path)?;
            queue.push_back((path.clone(), object.needed.clone(), search_path(&object, &root)));
            libraries.insert(path);
        }
    }
    Ok(Linked {
        architecture,
        interpreter: root.interpreter,
        libraries: libraries.into_iter().collect(),
    })
}

/// The OCI name of an ELF machine.
fn architecture(machine: u16) -> Option<&'static str> {
    match machine {
        EM_X86_64 => Some("amd64"),
        EM_AARCH64 => Some("arm64"),
        EM_386 => Some("386"),
        _ => None,
    }
}

fn file_name(path: &Path) -> Option<String> {
    path.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn read_object(path: &Path) -> Result<Object, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
        fix: "check that the executable was built and the path is right",
    })?;
    let elf = Elf::parse(&bytes).map_err(|e| Error::NotElf {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let origin = path.parent().unwrap_or(Path::new("/"));
    let dirs = |list: &[&str]| -> Vec<PathBuf> {
        list.iter()
            .flat_map(|entry| entry.split(':'))
            .filter(|dir| !dir.is_empty())
            .map(|dir| expand_origin(dir, origin))
            .collect()
    };
    Ok(Object {
        is_64: elf.is_64,
        machine: elf.header.e_machine,
        interpreter: elf.interpreter.map(PathBuf::from),
        needed: elf.libraries.iter().map(|l| (*l).to_owned()).collect(),
        rpath: dirs(&elf.rpaths),
        runpath: dirs(&elf.runpaths),
    })
}

/// `$ORIGIN` is the directory of the object that names the path.
fn expand_origin(dir: &str, origin: &Path) -> PathBuf {
    let origin = origin.to_string_lossy();
    PathBuf::from(dir.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))
}

/// The object's own search directories, before the system's.
fn search_path(object: &Object, executable: &Object) -> Vec<PathBuf> {
    if !object.runpath.is_empty() {
        return object.runpath.clone();
    }
    let mut dirs = object.rpath.clone();
    if executable.runpath.is_empty() {
        dirs.extend(executable.rpath.iter().cloned());
    }
    dirs
}

/// The first file named `name` in `dirs` of the same class and machine as
/// `like`; a name with a slash is taken as a path.
fn find(name: &str, dirs: &[PathBuf], like: &Object) -> Option<PathBuf> {
    let compatible = |path: &Path| {
        read_object(path)
            .map(|o| o.is_64 == like.is_64 && o.machine == like.machine)
            .unwrap_or(false)
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        return compatible(&path).then_some(path);
    }
    dirs.iter()
        .map(|dir| dir.join(name))
        .find(|path| path.is_file() && compatible(path))
}

/// `/etc/ld.so.conf`'s directories, then the loader's built-in ones (Debian's
/// multiarch directories first, as its glibc searches them).
fn system_directories(machine: u16) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    ld_so_conf(Path::new("/etc/ld.so.conf"), &mut dirs, 0);
    let triplet = match machine {
        EM_X86_64 => "x86_64-linux-gnu",
        EM_AARCH64 => "aarch64-linux-gnu",
        _ => "i386-linux-gnu",
    };
    for dir in [
        format!("/lib/{triplet}"),
        format!("/usr/lib/{triplet}"),
        "/lib".to_owned(),
        "/usr/lib".to_owned(),
        "/lib64".to_owned(),
        "/usr/lib64".to_owned(),
    ] {
        let dir = PathBuf::from(dir);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// One `ld.so.conf` file: a directory a line, `#` comments, `include GLOB`.
/// A missing file adds nothing, as for `ldconfig`.
fn ld_so_conf(file: &Path, dirs: &mut Vec<PathBuf>, depth: usize) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include") {
            // An include cycle would never end; ldconfig stops too.
            if depth < 8 {
                for included in glob(pattern.trim(), file.parent().unwrap_or(Path::new("/"))) {
                    ld_so_conf(&included, dirs, depth + 1);
                }
            }
        } else if line.starts_with('/') {
            let dir = PathBuf::from(line);
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
}

/// The files matching `pattern`, a path whose last part may hold one `*`,
/// sorted as `glob(3)` sorts them.
fn glob(pattern: &str, relative_to: &Path) -> Vec<PathBuf> {
    let pattern = relative_to.join(pattern);
    let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name()) else {
        return Vec::new();
    };
    let name = name.to_string_lossy();
    let (prefix, suffix) = name.split_once('*').unwrap_or((&name, ""));
    let exact = !name.contains('*');
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| {
            let entry = entry.file_name().to_string_lossy().into_owned();
            if exact {
                entry == name
            } else {
                entry.len() >= prefix.len() + suffix.len()
                    && entry.starts_with(prefix)
                    && entry.ends_with(suffix)
            }
        })
        .map(|entry| entry.path())
        .collect();
    found.sort();
    found
}
