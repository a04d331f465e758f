//! Retiring a version of a kind (`new-kind --drop`): its files, its module
//! (and `[[api]]` entry) when nothing else lives there, and its example
//! objects go. What still needs it is refused, each with the step that
//! comes first: the hub and the stored version move to another version
//! (`--hub`), and a reconciler moves with it.

use std::path::{Path, PathBuf};

use crate::error::{Diagnostic, Error};
use crate::scan::{self, KindPlan};

use super::{Files, Plan, load_scaffold, module_file, read, relative, snake};

/// The version of a kind to retire.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DropVersion {
    /// The API group (`tutorial.example.com`).
    pub group: String,
    /// The version to retire (`v1alpha1`).
    pub version: String,
    /// The kind (`Widget`).
    pub kind: String,
}

impl DropVersion {
    /// The version `version` of `kind` in `group`.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        DropVersion {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }
}

/// Plans the retirement of `drop` in the repository `config_path`
/// describes, writing nothing.
///
/// # Errors
///
/// The kind has no such version, or only this one; the version is the hub
/// or the one stored; a reconciler or another file still names its types.
pub fn plan_drop(config_path: &Path, drop: &DropVersion) -> Result<Plan, Error> {
    let (config, root, paths) = load_scaffold(config_path)?;
    let scanned = scan::scan(&config)?;
    let versions: Vec<&KindPlan> = scanned
        .kinds
        .iter()
        .filter(|k| k.is_crd && k.kind == drop.kind && k.group == drop.group)
        .collect();
    let refuse = |message: String| Error::one(Diagnostic::file(config_path, message));
    let dropped = retirable(config_path, &versions, drop)?;
    let module = dropped
        .rust_path
        .rsplit_once("::")
        .map_or(dropped.rust_path.as_str(), |(module, _)| module)
        .to_owned();
    let dir = dropped.source.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut files = Files::default();
    let (mut removed, api_entry_removed) = unlink_version(&mut files, config_path, &dir, &module, drop)?;
    refuse_while_named(
        &root,
        &[
            root.join(&paths.reconcilers),
            dir.parent().unwrap_or(Path::new("")).to_path_buf(),
        ],
        &removed,
        &module,
        &config,
        drop,
    )
    .map_err(refuse)?;
    // The version left alone converts nothing: it is no hub any more.
    let left: Vec<&&KindPlan> = versions.iter().filter(|k| k.version != drop.version).collect();
    if let [only] = left.as_slice()
        && only.hub
    {
        let text = read(&only.source)?;
        files.edit(
            only.source.clone(),
            super::version::without_hub_marker(&text, &drop.kind),
        );
    }
    let samples = samples_of(&paths.samples, &drop.group, &drop.version, &drop.kind)?;
    removed.extend(samples);
    let entry = if api_entry_removed {
        format!(" (and its [[api]] entry, {module})")
    } else {
        String::new()
    };
    let summary = format!(
        "dropped version {} of {} ({}){entry}: the CRD no longer serves it once you run \
         hack/update-codegen.sh. On a cluster that stored objects in it, run `kinject migrate {}` before \
         applying the CRD: the API server refuses a CRD without a version its status.storedVersions lists.",
        drop.version, drop.kind, drop.group, drop.kind
    );
    Ok(Plan {
        files: files.0,
        removed,
        packages: Vec::new(),
        summary,
    })
}

/// Plans what the version's module loses: the kind's files, or the whole
/// module (with its `pub mod` line and `[[api]]` entry) when nothing else
/// lives there. The paths to remove, and whether the entry goes.
fn unlink_version(
    files: &mut Files,
    config_path: &Path,
    dir: &Path,
    module: &str,
    drop: &DropVersion,
) -> Result<(Vec<PathBuf>, bool), Error> {
    let stem = format!("{}_", snake(&drop.kind));
    let mut removed = kind_files(dir, &stem)?;
    let mod_file = module_file(dir)?;
    let mod_text = read(&mod_file)?;
    let others_live_here = mod_text.lines().any(|line| {
        line.trim_start_matches("pub ")
            .strip_prefix("mod ")
            .is_some_and(|name| !name.starts_with(&stem))
    });
    let mut api_entry_removed = false;
    if others_live_here {
        let kept: Vec<&str> = mod_text
            .lines()
            .filter(|line| {
                let item = line.trim_start_matches("pub ");
                !(item.starts_with(&format!("mod {stem}")) || item.starts_with(&format!("use {stem}")))
            })
            .collect();
        files.edit(mod_file, kept.join("\n") + "\n");
    } else {
        removed = vec![dir.to_path_buf()];
        let parent_dir = dir.parent().unwrap_or(Path::new(""));
        let parent = module_file(parent_dir)?;
        let line = format!("pub mod {};", drop.version);
        let parent_text = read(&parent)?;
        let kept: Vec<&str> = parent_text.lines().filter(|l| l.trim() != line).collect();
        files.edit(parent, kept.join("\n") + "\n");
        let toml = read(config_path)?;
        if let Some(without) = without_api_entry(&toml, module) {
            files.edit(config_path.to_path_buf(), without);
            api_entry_removed = true;
        }
    }
    Ok((removed, api_entry_removed))
}

/// The version `drop` names, when it may go: the kind has another, and it
/// is neither the hub nor the one stored.
fn retirable<'a>(
    config_path: &Path,
    versions: &[&'a KindPlan],
    drop: &DropVersion,
) -> Result<&'a KindPlan, Error> {
    let refuse = |message: String| Error::one(Diagnostic::file(config_path, message));
    let names: Vec<&str> = versions.iter().map(|k| k.version.as_str()).collect();
    let Some(dropped) = versions.iter().copied().find(|k| k.version == drop.version) else {
        return Err(refuse(if versions.is_empty() {
            format!("there is no kind {} in group {}", drop.kind, drop.group)
        } else {
            format!(
                "{} ({}) has no version {}; its versions are {}",
                drop.kind,
                drop.group,
                drop.version,
                names.join(", ")
            )
        }));
    };
    if versions.len() == 1 {
        return Err(refuse(format!(
            "{} is the only version of {}; a kind keeps at least one",
            drop.version, drop.kind
        )));
    }
    let role = match (dropped.hub, stored(versions, dropped)) {
        (true, true) => Some("the hub every other version converts through, and the version stored"),
        (true, false) => Some("the hub every other version converts through"),
        (false, true) => Some("the version stored (`storage`)"),
        (false, false) => None,
    };
    if let Some(role) = role {
        return Err(Error::one(Diagnostic::file(
            &dropped.source,
            format!(
                "{} {} is {role}; make a version that stays the hub and the one stored first (a new one: \
                 new-kind --hub), run `kinject migrate {}` on each cluster, then drop {}",
                drop.kind, drop.version, drop.kind, drop.version
            ),
        )));
    }
    Ok(dropped)
}

/// Refuses, naming the files, while a Rust file below `searched` (but for
/// those `removed`) names the version's types or generated module.
fn refuse_while_named(
    root: &Path,
    searched: &[PathBuf],
    removed: &[PathBuf],
    module: &str,
    config: &crate::config::Config,
    drop: &DropVersion,
) -> Result<(), String> {
    let generated_crate = super::rust_name(&super::package_name(&config.output).map_err(|e| e.to_string())?);
    let generated_module = format!(
        "{generated_crate}::{}::{}",
        scan::group_module(&drop.group, true),
        drop.version
    );
    let local = format!("super::{}::", drop.version);
    let mut naming = Vec::new();
    for base in searched {
        for file in rust_files(base) {
            if removed.iter().any(|r| file.starts_with(r)) {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if text.contains(&format!("{module}::"))
                || text.contains(&format!("{generated_module}::"))
                || text.contains(&local)
            {
                naming.push(relative(&file, root));
            }
        }
    }
    if naming.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} still name{} the types of {} {}; point {} at the version that stays first",
        naming.join(", "),
        if naming.len() == 1 { "s" } else { "" },
        drop.kind,
        drop.version,
        if naming.len() == 1 { "it" } else { "them" }
    ))
}

/// Whether `version` is the one stored: marked `storage`, or the hub when
/// no version is.
fn stored(versions: &[&KindPlan], version: &KindPlan) -> bool {
    version.storage || (!versions.iter().any(|k| k.storage) && version.hub)
}

/// The files of `dir` whose names start with `stem` (`widget_`).
fn kind_files(dir: &Path, stem: &str) -> Result<Vec<PathBuf>, Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::one(Diagnostic::file(dir, format!("cannot list: {e}"))))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(stem) && n.ends_with(".rs"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The example objects of the version: files of `samples` holding one
/// object of that `apiVersion` and kind. A file holding it among others is
/// an error naming it, since removing it would lose them.
fn samples_of(samples: &Path, group: &str, version: &str, kind: &str) -> Result<Vec<PathBuf>, Error> {
    let Ok(entries) = std::fs::read_dir(samples) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        if !path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            continue;
        }
        let text = read(&path)?;
        let documents: Vec<&str> = text
            .split("\n---")
            .filter(|d| {
                d.lines()
                    .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            })
            .collect();
        let ours = |doc: &str| {
            doc.lines()
                .any(|l| l.trim() == format!("apiVersion: {group}/{version}"))
                && doc.lines().any(|l| l.trim() == format!("kind: {kind}"))
        };
        match documents.iter().filter(|d| ours(d)).count() {
            0 => {}
            n if n == documents.len() => out.push(path),
            _ => {
                return Err(Error::one(Diagnostic::file(
                    &path,
                    format!(
                        "holds a {kind} of {group}/{version} among other objects; move it to a file of its \
                         own or delete it, then drop the version"
                    ),
                )));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `toml` (codegen.toml) without the `[[api]]` table of `module`, and the
/// blank line before it; `None` when no table names it.
fn without_api_entry(toml: &str, module: &str) -> Option<String> {
    let lines: Vec<&str> = toml.lines().collect();
    let named = format!("module = \"{module}\"");
    let start = lines.iter().enumerate().position(|(i, l)| {
        l.trim() == "[[api]]"
            && lines[i + 1..]
                .iter()
                .take_while(|l| !l.trim_start().starts_with('['))
                .any(|l| l.trim() == named)
    })?;
    let end = super::toml_table_end(&lines, start);
    let mut from = start;
    while from > 0 && lines[from - 1].trim().is_empty() {
        from -= 1;
    }
    let rest: Vec<&str> = lines[end..]
        .iter()
        .copied()
        .skip_while(|l| l.trim().is_empty())
        .collect();
    let mut out: Vec<&str> = lines[..from].to_vec();
    if from > 0 && !rest.is_empty() {
        out.push("");
    }
    out.extend(rest);
    let mut text = out.join("\n");
    text.push('\n');
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_entry_leaves_with_its_blank_line() {
        let toml = "output = \"generated\"\n\n[[api]]\ncrate = \"apis\"\nmodule = \"apis::a::v1\"\nsource = \"a\"\n\n\
                    [[api]]\ncrate = \"apis\"\nmodule = \"apis::a::v2\"\nsource = \"b\"\n\n# Kinds from k8s-openapi\n[[external]]\npath = \"x\"\n";
        let without = without_api_entry(toml, "apis::a::v1").unwrap();
        assert_eq!(
            without,
            "output = \"generated\"\n\n[[api]]\ncrate = \"apis\"\nmodule = \"apis::a::v2\"\nsource = \"b\"\n\n# Kinds from k8s-openapi\n[[external]]\npath = \"x\"\n"
        );
        let without = without_api_entry(toml, "apis::a::v2").unwrap();
        assert_eq!(
            without,
            "output = \"generated\"\n\n[[api]]\ncrate = \"apis\"\nmodule = \"apis::a::v1\"\nsource = \"a\"\n\n# Kinds from k8s-openapi\n[[external]]\npath = \"x\"\n"
        );
        assert_eq!(without_api_entry(toml, "apis::b::v1"), None);
    }
}
