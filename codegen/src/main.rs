//! `cargo run -p kinject-codegen -- [--config codegen.toml] [--verify]`: regenerates the
//! typed layer from the API sources named in `codegen.toml`, or with
//! `--verify` only checks that it is up to date.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use kinject_codegen::{Config, Layout};

/// Regenerates the files under the config's `output` from the API sources it
/// names, writing only files whose content changed.
#[derive(Debug, Parser)]
#[command(name = "kinject-codegen")]
struct Args {
    /// The generator config; without it, codegen.toml is looked up in the
    /// current directory and its parents.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Write nothing; exit 1 listing the files that are out of date.
    #[arg(long)]
    verify: bool,
}

fn main() -> ExitCode {
    let Args { config, verify } = Args::parse();
    let config_path = match config.or_else(find_config) {
        Some(path) => path,
        None => {
            eprintln!(
                "error: no codegen.toml in the current directory or its parents; run from the repository or pass --config <path>"
            );
            return ExitCode::from(2);
        }
    };

    let started = Instant::now();
    let result = Config::load(&config_path).and_then(|config| {
        let generated = kinject_codegen::generate(&config, &Layout::Crate)?;
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
        return match generated.check(&config.output) {
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
                eprintln!(
                    "run `hack/update-codegen.sh` (or `cargo run -p kinject-codegen -- --config {}`) and commit the result",
                    shown(&config_path).display()
                );
                ExitCode::FAILURE
            }
            Err(err) => {
                eprintln!("{err}");
                ExitCode::FAILURE
            }
        };
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

fn shown_stale(stale: &kinject_codegen::Stale) -> String {
    match stale {
        kinject_codegen::Stale::Missing(p) => format!("{} (missing)", shown(p).display()),
        kinject_codegen::Stale::Differs(p) => format!("{} (differs)", shown(p).display()),
        kinject_codegen::Stale::Extra(p) => format!("{} (no longer generated)", shown(p).display()),
    }
}
