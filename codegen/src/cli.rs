//! The generator's command line: `[--config codegen.toml] [--verify]`
//! regenerates the typed layer from the API sources named in `codegen.toml`,
//! or with `--verify` only checks that it is up to date;
//! `new-kind --group G --version V --kind K [--scope cluster]` starts a new
//! kind, and `new-kind --for KIND` a controller of a Kubernetes kind, either
//! with `--owns KIND` and `--watches KIND` (see [`crate::scaffold`]).
//!
//! A project runs it through a binary of its own whose `main` is
//! [`main`] (the sample app's `cmd/codegen`, which `hack/update-codegen.sh`,
//! `hack/verify-codegen.sh` and `hack/new-kind.sh` run with `cargo run -p
//! codegen`), so the generator it runs is the version its `Cargo.lock` pins
//! for the runtime it generates for.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use crate::model::Scope;
use crate::scaffold::{self, NewController, NewKind};
use crate::{Config, Generated, Layout};
use clap::{Parser, Subcommand, ValueEnum};

/// Regenerates the files under the config's `output` from the API sources it
/// names, writing only files whose content changed.
#[derive(Debug, Parser)]
#[command(name = "kinject-codegen")]
struct Args {
    /// The generator config; without it, codegen.toml is looked up in the
    /// current directory and its parents.
    #[arg(long, value_name = "PATH", global = true)]
    config: Option<PathBuf>,
    /// Write nothing; exit 1 listing the files that are out of date.
    #[arg(long)]
    verify: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a new kind: its API types, reconciler, table test and example
    /// object, registered where they belong. Writes all files or none; run
    /// hack/update-codegen.sh afterwards.
    NewKind {
        /// The API group, a domain you own (`tutorial.example.com`).
        #[arg(long, required_unless_present = "for_kind")]
        group: Option<String>,
        /// The version (`v1alpha1`, `v1beta1`, `v1`).
        #[arg(long, required_unless_present = "for_kind")]
        version: Option<String>,
        /// The kind, CamelCase (`Widget`).
        #[arg(long, required_unless_present = "for_kind")]
        kind: Option<String>,
        /// Whether objects live in a namespace or are cluster-wide.
        #[arg(long, value_enum, ignore_case = true, default_value = "namespaced")]
        scope: ScopeArg,
        /// Instead of a new kind, a controller keyed by a Kubernetes kind
        /// (`Pod`, `apps/v1/Deployment`): kubebuilder's `For`.
        #[arg(long = "for", value_name = "KIND", conflicts_with_all = ["group", "version", "kind"])]
        for_kind: Option<String>,
        /// A kind the reconciler creates and controls (`Job`, `batch/v1/Job`,
        /// a kind of this project): its changes enqueue the owner.
        /// Repeatable; kubebuilder's `Owns`.
        #[arg(long, value_name = "KIND")]
        owns: Vec<String>,
        /// A kind the reconciler reads and tracks: a change to one it
        /// tracks enqueues it. Repeatable; kubebuilder's `Watches`.
        #[arg(long, value_name = "KIND")]
        watches: Vec<String>,
        /// A spec field, NAME:TYPE (`replicas:int32`; types string, int32,
        /// int64, bool, float64, []string). Repeatable; without any, one
        /// example field, `description`, with a validation rule.
        #[arg(long, value_name = "NAME:TYPE", conflicts_with = "for_kind")]
        field: Vec<String>,
        /// For a new version of a kind with one version: the new version
        /// becomes the hub (stored, and the one its reconciler reads), and
        /// the old one a spoke converting to and from it.
        #[arg(long, conflicts_with = "for_kind")]
        hub: bool,
    },
    /// Retire a version of a kind: its API files, its module and [[api]]
    /// entry when nothing else lives there, and its example objects. The hub,
    /// the stored version and a version a reconciler reads are refused.
    /// Writes all changes or none; run hack/update-codegen.sh afterwards.
    DropVersion {
        /// The API group (`tutorial.example.com`).
        #[arg(long)]
        group: String,
        /// The version to retire (`v1alpha1`).
        #[arg(long)]
        version: String,
        /// The kind, CamelCase (`Widget`).
        #[arg(long)]
        kind: String,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ScopeArg {
    Namespaced,
    Cluster,
}

/// Parses the command line and runs it; the exit code to return from `main`.
pub fn main() -> ExitCode {
    let Args {
        config,
        verify,
        command,
    } = Args::parse();
    let config_path = match config.or_else(find_config) {
        Some(path) => path,
        None => {
            eprintln!(
                "error: no codegen.toml in the current directory or its parents; run from the repository or pass --config <path>"
            );
            return ExitCode::from(2);
        }
    };

    if verify && command.is_some() {
        eprintln!("error: --verify checks generated code and cannot go with a subcommand; run it alone");
        return ExitCode::from(2);
    }
    if let Some(Command::DropVersion { group, version, kind }) = &command {
        let drop = scaffold::DropVersion::new(group, version, kind);
        return scaffold_and_format(&config_path, scaffold::plan_drop(&config_path, &drop));
    }
    if let Some(Command::NewKind {
        group,
        version,
        kind,
        scope,
        for_kind,
        owns,
        watches,
        field,
        hub,
    }) = command
    {
        if let Some(for_kind) = for_kind {
            let new = NewController {
                for_kind,
                owns,
                watches,
            };
            return scaffold_and_format(&config_path, scaffold::plan_controller(&config_path, &new));
        }
        let scope = match scope {
            ScopeArg::Namespaced => Scope::Namespaced,
            ScopeArg::Cluster => Scope::Cluster,
        };
        let new = NewKind {
            group: group.unwrap_or_default(),
            version: version.unwrap_or_default(),
            kind: kind.unwrap_or_default(),
            scope,
            owns,
            watches,
            fields: field,
            hub,
        };
        return scaffold_and_format(&config_path, scaffold::plan(&config_path, &new));
    }

    generate(&config_path, verify)
}

/// Regenerates the output `config_path` names, or with `verify` checks it.
fn generate(config_path: &Path, verify: bool) -> ExitCode {
    let started = Instant::now();
    let result = Config::load(config_path).and_then(|config| {
        let generated = crate::generate(&config, &Layout::Crate)?;
        Ok((config, generated))
    });
    let (config, generated) = match result {
        Ok(ok) => ok,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    if verify {
        return verify_up_to_date(config_path, &config, &generated);
    }
    match generated.write(&config.output) {
        Ok(report) => {
            for path in &report.written {
                eprintln!("wrote {}", shown(path).display());
            }
            for path in &report.removed {
                eprintln!("removed {}", shown(path).display());
            }
            println!(
                "generated {} files for {} kinds in {} ms",
                generated.files.len(),
                generated.kinds,
                started.elapsed().as_millis()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// Success when the output directory holds exactly what would be written;
/// otherwise lists the stale files and how to refresh them.
fn verify_up_to_date(config_path: &Path, config: &Config, generated: &Generated) -> ExitCode {
    match generated.check(&config.output) {
        Ok(stale) if stale.is_empty() => {
            println!(
                "{} is up to date ({} files for {} kinds)",
                shown(&config.output).display(),
                generated.files.len(),
                generated.kinds
            );
            ExitCode::SUCCESS
        }
        Ok(stale) => {
            eprintln!("error: generated code is out of date:");
            for s in &stale {
                eprintln!("  {}", shown_stale(s));
            }
            // The script is in every project (the sample and what `kinject
            // init` writes); the generator's package name is not.
            eprintln!(
                "run `hack/update-codegen.sh` (it regenerates from {}) and commit the result",
                shown(config_path).display()
            );
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `planned` (all files or none), then formats them with the
/// project's settings.
fn scaffold_and_format(config_path: &Path, planned: Result<scaffold::Plan, crate::Error>) -> ExitCode {
    let plan = match planned.and_then(|plan| plan.write().map(|()| plan)) {
        Ok(plan) => plan,
        Err(err) => {
            eprintln!("{err}");
            eprintln!("no file was changed");
            return ExitCode::FAILURE;
        }
    };
    for file in &plan.files {
        let verb = if file.created { "created" } else { "edited" };
        eprintln!("{verb} {}", shown(&file.path).display());
    }
    for path in &plan.removed {
        eprintln!("removed {}", shown(path).display());
    }
    if !plan.packages.is_empty() {
        // The templates follow rustfmt's defaults; the project's rustfmt.toml and
        // edition have the last word, so the new files pass `cargo fmt --check`.
        let mut fmt = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        fmt.arg("fmt");
        for package in &plan.packages {
            fmt.args(["--package", package]);
        }
        let dir = config_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        match fmt.current_dir(dir).status() {
            Ok(status) if status.success() => {}
            Ok(_) | Err(_) => eprintln!(
                "warning: `cargo fmt --package {}` failed; format the new files before committing",
                plan.packages.join(" --package ")
            ),
        }
    }
    println!("{}", plan.summary);
    ExitCode::SUCCESS
}

fn find_config() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .map(|dir| dir.join("codegen.toml"))
        .find(|p| p.is_file())
}

/// A path relative to the current directory when it lies below it.
fn shown(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
}

fn shown_stale(stale: &crate::Stale) -> String {
    match stale {
        crate::Stale::Missing(p) => format!("{} (missing)", shown(p).display()),
        crate::Stale::Differs(p) => format!("{} (differs)", shown(p).display()),
        crate::Stale::Extra(p) => format!("{} (no longer generated)", shown(p).display()),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Args::command().debug_assert();
        let args = Args::try_parse_from([
            "kinject-codegen",
            "new-kind",
            "--group",
            "tutorial.example.io",
            "--version",
            "v1",
            "--kind",
            "Widget",
            "--scope",
            "Cluster",
        ])
        .unwrap();
        assert!(matches!(
            args.command,
            Some(Command::NewKind {
                scope: ScopeArg::Cluster,
                ..
            })
        ));
        let args = Args::try_parse_from([
            "kinject-codegen",
            "new-kind",
            "--for",
            "Pod",
            "--owns",
            "ConfigMap",
            "--owns",
            "batch/v1/Job",
        ])
        .unwrap();
        assert!(matches!(
            args.command,
            Some(Command::NewKind { for_kind: Some(ref k), ref owns, .. }) if k == "Pod" && owns.len() == 2
        ));
        let both = Args::try_parse_from(["kinject-codegen", "new-kind", "--for", "Pod", "--kind", "Widget"]);
        assert!(both.is_err(), "--for and --kind together must be refused");
        let neither = Args::try_parse_from(["kinject-codegen", "new-kind", "--group", "a.example.com"]);
        assert!(neither.is_err(), "a new kind needs --version and --kind");
    }
}
