//! `kinject`: what `ko` and kubebuilder's Makefile targets do for a Go
//! controller, for a project on this framework, with no container daemon.
//!
//! ```sh
//! kinject init shop --group shop.example.com   # a new project, laid out as the sample app is
//! kinject create api --group shop.example.com --version v1alpha1 --kind Widget --owns Job
//! kinject create controller --for Pod --watches ConfigMap
//! kinject registry     # a registry on 127.0.0.1:5000 until Ctrl-C
//! kinject build controller --repo registry.example.com/team/controller
//! kinject apply -f config/ --repo registry.example.com/team   # builds each kinject://<binary>, pushes, applies
//! kinject delete -f config/
//! kinject install      # the CRDs of config/ alone
//! kinject uninstall
//! kinject validate -f config/samples/   # as the API server would, with no cluster
//! kinject migrate Widget   # every Widget stored in the storage version, storedVersions trimmed
//! ```
//!
//! **Where it stands.** The command line of the framework, above
//! `kinject-image` (images and `kinject://` references); it runs `cargo` to
//! build a binary and `kubectl` to apply, as `ko apply` runs `kubectl`, so a
//! kubeconfig, context or `--server-side` are kubectl's own flags, passed
//! after `--`.
#![warn(missing_docs)]

mod cargo_build;
mod init;
mod kubectl;
mod manifests;
mod migrate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Build, push and deploy a controller of this framework.
#[derive(Debug, Parser)]
#[command(name = "kinject", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a project of one's own in DIR (created if missing; no file in
    /// it may exist yet): workspace, apis, generated, reconcilers, the
    /// binaries, config/, hack/, CI, an IDE launch configuration and a README.
    Init {
        /// The project's directory; its name names the project.
        dir: PathBuf,
        /// The API group its kinds go in (`shop.example.com`); also the
        /// prefix of its manifests' labels.
        #[arg(long)]
        group: String,
        /// The namespace the controller runs in (`SYSTEM_NAMESPACE`);
        /// default: the directory's name.
        #[arg(long)]
        namespace: Option<String>,
        /// Take the framework from this checkout (default: the one this
        /// command was installed from, while it exists).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["framework_git", "framework_version"])]
        framework_path: Option<PathBuf>,
        /// Take the framework from this git repository.
        #[arg(long, value_name = "URL", conflicts_with = "framework_version")]
        framework_git: Option<String>,
        /// The commit, tag or branch of --framework-git.
        #[arg(long, value_name = "REV", requires = "framework_git")]
        rev: Option<String>,
        /// Take the framework from a registry, at this version.
        #[arg(long, value_name = "VERSION")]
        framework_version: Option<String>,
    },
    /// Serve an in-memory API server on 127.0.0.1 until Ctrl-C, its
    /// kubeconfig written to --kubeconfig (kinject-testenv's `serve`; the
    /// project's `hack/run-local.sh` runs a whole local cluster).
    #[cfg(feature = "serve")]
    Serve(kinject_testenv::serve::ServeArgs),
    /// Not in this build: a bare in-memory API server, with `cargo install
    /// --locked --path pkg/cli --features serve`. The project's `hack/run-local.sh` serves a whole
    /// local cluster with the controller.
    #[cfg(not(feature = "serve"))]
    Serve {
        /// What `serve` would take.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Run a container registry on 127.0.0.1 until Ctrl-C, without
    /// authentication, for `kinject apply --repo 127.0.0.1:<port>` (Debian's
    /// `docker-registry`; `apt-get install docker-registry`).
    Registry {
        /// The port to listen on; 0 picks a free one.
        #[arg(long, default_value_t = 5000)]
        port: u16,
        /// Where the images and the registry's log are kept.
        #[arg(long, value_name = "DIR", default_value = ".testenv/registry")]
        dir: PathBuf,
    },
    /// Start a new kind in the project around the current directory: its
    /// types, reconciler, table test and example object (`hack/new-kind.sh`).
    /// Then run `hack/update-codegen.sh`.
    #[command(subcommand)]
    Create(Create),
    /// Build one binary of the workspace in the current directory, make its
    /// image and push it; prints the pushed reference (`repo@sha256:…`).
    Build {
        /// The binary (`controller`).
        binary: String,
        #[command(flatten)]
        image: ImageArgs,
    },
    /// Apply manifests, each `image: kinject://<binary>` replaced by the
    /// digest of that binary's image, built and pushed first (`ko apply`).
    Apply {
        /// A manifest, or a directory whose `.yaml`/`.yml` files (not its
        /// folders, so `config/samples/` stays out) are applied.
        #[arg(short = 'f', long = "filename", default_value = "config")]
        path: PathBuf,
        #[command(flatten)]
        image: ImageArgs,
        /// kubectl's own flags (`--kubeconfig`, `--context`, `--server-side`).
        #[arg(last = true)]
        kubectl: Vec<String>,
    },
    /// Delete what `apply` applied (`kubectl delete --ignore-not-found`).
    Delete {
        /// A manifest or a directory, as for `apply`.
        #[arg(short = 'f', long = "filename", default_value = "config")]
        path: PathBuf,
        /// kubectl's own flags.
        #[arg(last = true)]
        kubectl: Vec<String>,
    },
    /// Check manifests against the project's CRDs with no cluster, as the
    /// API server would on `kubectl apply`: schema, CEL rules, and
    /// transition rules against --old. Prints the API server's message for
    /// each refusal and exits 1 if there is one. Runs the project's
    /// `cargo run -p schema -- validate`, which builds the CRDs from its types.
    Validate {
        /// A manifest, or a directory of `.yaml`/`.yml` manifests; repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
        /// The objects as they are stored now: each manifest is then checked
        /// as an update of its old self; repeatable.
        #[arg(long)]
        old: Vec<PathBuf>,
        /// Skip objects of kinds that are neither the project's nor
        /// Kubernetes' (another operator's), instead of failing.
        #[arg(long)]
        skip_unknown: bool,
    },
    /// Apply the CustomResourceDefinitions among the manifests, nothing else.
    Install {
        /// A manifest or a directory, as for `apply`.
        #[arg(short = 'f', long = "filename", default_value = "config")]
        path: PathBuf,
        /// kubectl's own flags.
        #[arg(last = true)]
        kubectl: Vec<String>,
    },
    /// Rewrite every object of a kind in its CRD's storage version, then set
    /// the CRD's `status.storedVersions` to that version alone, so an older
    /// version can leave the CRD (Knative's storage-version migrator).
    /// Safe to stop and run again.
    Migrate {
        /// The kind as kubectl names it: `Widget`, `widgets`, a short name,
        /// or `widgets.tutorial.example.com`.
        resource: String,
        /// kubectl's own flags (`--kubeconfig`, `--context`).
        #[arg(last = true)]
        kubectl: Vec<String>,
    },
    /// Delete the CustomResourceDefinitions among the manifests (and so every
    /// object of their kinds).
    Uninstall {
        /// A manifest or a directory, as for `apply`.
        #[arg(short = 'f', long = "filename", default_value = "config")]
        path: PathBuf,
        /// kubectl's own flags.
        #[arg(last = true)]
        kubectl: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum Create {
    /// A new kind (kubebuilder's `create api`), with `--owns` and
    /// `--watches` for what its reconciler owns and watches.
    Api(init::CreateApi),
    /// A controller keyed by a Kubernetes kind (`--for Pod`): no new API
    /// type, a reconciler and its table test.
    Controller(init::CreateController),
}

/// Where images go and how binaries are built.
#[derive(Debug, clap::Args)]
struct ImageArgs {
    /// The repository, or the prefix each binary's name is added to for
    /// `apply` (`registry.example.com/team` → `…/team/controller`).
    #[arg(long, env = "KINJECT_REPO")]
    repo: String,
    /// Build with the dev profile instead of release (faster, larger).
    #[arg(long)]
    debug: bool,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Init {
            dir,
            group,
            namespace,
            framework_path,
            framework_git,
            rev,
            framework_version,
        } => {
            let framework = match (framework_path, framework_git, framework_version) {
                (Some(path), _, _) => init::Framework::Path(path),
                (_, Some(url), _) => init::Framework::Git { url, rev },
                (_, _, Some(version)) => init::Framework::Version(version),
                (None, None, None) => init::Framework::default_source(),
            };
            init::init(&init::Init {
                dir,
                group,
                namespace,
                framework,
            })
        }
        #[cfg(not(feature = "serve"))]
        Command::Serve { .. } => Err("this kinject was installed without its API server; run the \
             project's hack/run-local.sh for a local cluster with the controller, or reinstall \
             with `cargo install --locked --path <framework>/pkg/cli --features serve`"
            .to_owned()),
        #[cfg(feature = "serve")]
        Command::Serve(args) => {
            return match tokio::runtime::Runtime::new() {
                Ok(runtime) => runtime.block_on(kinject_testenv::serve::serve(args)),
                Err(e) => {
                    eprintln!("error: cannot start the async runtime: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Registry { port, dir } => registry(&dir, port),
        Command::Create(Create::Api(request)) => init::create_api(&request),
        Command::Create(Create::Controller(request)) => init::create_controller(&request),
        Command::Build { binary, image } => build_and_push(&binary, &image, &image.repo).map(|pushed| {
            println!("{pushed}");
        }),
        Command::Apply { path, image, kubectl } => apply(&path, &image, &kubectl),
        Command::Delete { path, kubectl } => manifests::read(&path).and_then(|docs| {
            kubectl::delete(
                &kubectl,
                &docs.join(),
                &format!("the objects of {}", path.display()),
            )
        }),
        Command::Validate {
            paths,
            old,
            skip_unknown,
        } => validate(&paths, &old, skip_unknown),
        Command::Install { path, kubectl } => manifests::read(&path)
            .and_then(|docs| docs.definitions_only(&path))
            .and_then(|crds| kubectl::run(&["apply", "-f", "-"], &kubectl, &crds.join()).map(drop)),
        Command::Migrate { resource, kubectl } => migrate::migrate(&resource, &kubectl),
        Command::Uninstall { path, kubectl } => manifests::read(&path)
            .and_then(|docs| docs.definitions_only(&path))
            .and_then(|crds| {
                kubectl::delete(
                    &kubectl,
                    &crds.join(),
                    &format!("the CustomResourceDefinitions of {}", path.display()),
                )
            }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo run -p schema -- validate ...` in the project.
fn validate(paths: &[PathBuf], old: &[PathBuf], skip_unknown: bool) -> Result<(), String> {
    let mut args: Vec<std::ffi::OsString> = vec!["validate".into()];
    for path in paths {
        args.extend(["-f".into(), path.into()]);
    }
    for path in old {
        args.extend(["--old".into(), path.into()]);
    }
    if skip_unknown {
        args.push("--skip-unknown".into());
    }
    if cargo_build::run_package("schema", &args)? {
        Ok(())
    } else {
        Err("the API server would refuse the manifests above".to_owned())
    }
}

/// Runs a registry until Ctrl-C or SIGTERM, or until it stops on its own.
fn registry(dir: &std::path::Path, port: u16) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut registry = kinject_image::LocalRegistry::start_on(dir, port).map_err(|e| e.to_string())?;
    println!("{}", registry.address());
    eprintln!(
        "a registry at {} until Ctrl-C (kinject apply --repo {}); images and log in {}",
        registry.address(),
        registry.address(),
        dir.display()
    );
    let runtime = current_thread_runtime()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| format!("cannot listen for SIGTERM: {e}"))?;
        let mut poll = tokio::time::interval(std::time::Duration::from_millis(200));
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(()),
                _ = term.recv() => return Ok(()),
                _ = poll.tick() => {
                    if let Some(status) = registry.exited() {
                        // The registry shares this process group, so the
                        // Ctrl-C (or SIGTERM) meant for both may end it
                        // before this loop sees the signal: a stop asked for.
                        use std::os::unix::process::ExitStatusExt;
                        if matches!(status.signal(), Some(2 | 15)) {
                            return Ok(());
                        }
                        return Err(format!(
                            "the registry stopped ({status}); see {}",
                            registry.log().display()
                        ));
                    }
                }
            }
        }
    })
}

/// A runtime on this thread, for one command's async work.
fn current_thread_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Builds `binary`, makes its image and pushes it to `repository`.
fn build_and_push(binary: &str, args: &ImageArgs, repository: &str) -> Result<String, String> {
    let executable = cargo_build::binary(binary, !args.debug)?;
    let here = std::path::Path::new(".");
    let mut build = kinject_image::Build::new(&executable, kinject_image::source_revision(here));
    if let Some(url) = kinject_image::source_url(here) {
        build = build.source(url);
    }
    let image = build.build().map_err(|e| e.to_string())?;
    eprintln!(
        "built the image of {binary}: {} bytes compressed, {}",
        image.compressed_size(),
        image.digest()
    );
    let runtime = current_thread_runtime()?;
    let pushed = runtime
        .block_on(kinject_image::push(&image, repository, &credentials()))
        .map_err(|e| e.to_string())?;
    eprintln!("pushed {pushed}");
    Ok(pushed)
}

/// `KINJECT_REGISTRY_USERNAME` and `KINJECT_REGISTRY_PASSWORD`, when set.
fn credentials() -> kinject_image::Credentials {
    match (
        std::env::var("KINJECT_REGISTRY_USERNAME"),
        std::env::var("KINJECT_REGISTRY_PASSWORD"),
    ) {
        (Ok(username), Ok(password)) => kinject_image::Credentials::Basic { username, password },
        _ => kinject_image::Credentials::Anonymous,
    }
}

fn apply(path: &std::path::Path, args: &ImageArgs, kubectl_args: &[String]) -> Result<(), String> {
    let documents = manifests::read(path)?;
    let mut resolved = Vec::new();
    for (file, text) in documents.files() {
        let text = kinject_image::resolve(file, text, |binary| {
            build_and_push(
                binary,
                args,
                &format!("{}/{binary}", args.repo.trim_end_matches('/')),
            )
        })
        .map_err(|e| e.to_string())?;
        resolved.push(text);
    }
    kubectl::run(&["apply", "-f", "-"], kubectl_args, &resolved.join("\n---\n")).map(drop)
}
