//! The local cluster's run: the API server, `config/`, the workloads, the
//! webhook, the samples and the controller, in that order, until Ctrl-C.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use kinject_runtime::apis::registry::CustomKind;
use kinject_runtime::injection::Constructor;
use kinject_sharedmain::{Env, Flags};
use kinject_testenv::{Server, TestEnv, Workloads};
use tokio_util::sync::CancellationToken;

use crate::args::LocalArgs;
use crate::error::Error;
use crate::manifests::{InProcess, apply_config, apply_samples};

/// A project as its local cluster runs it: where its `config/` is, its
/// namespace, its controllers and the kinds its webhook admits.
///
/// ```no_run
/// # fn controllers() -> Vec<kinject_runtime::injection::Constructor> { Vec::new() }
/// # fn custom_kinds() -> Vec<kinject_runtime::apis::registry::CustomKind> { Vec::new() }
/// // cmd/controller/examples/local.rs
/// fn main() -> std::process::ExitCode {
///     let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
///     kinject_local::main(kinject_local::App::new("shop", root, controllers()).webhook(custom_kinds()))
/// }
/// ```
#[derive(Clone)]
pub struct App {
    system_namespace: String,
    root: PathBuf,
    controllers: Vec<Constructor>,
    webhook_kinds: Option<Vec<CustomKind>>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("system_namespace", &self.system_namespace)
            .field("root", &self.root)
            .field("controllers", &self.controllers.len())
            .field("webhook", &self.webhook_kinds.is_some())
            .finish()
    }
}

impl App {
    /// The project at `root` (the folder holding `config/`), whose
    /// controllers run in `system_namespace` (`SYSTEM_NAMESPACE` overrides
    /// it), with `controllers` and no webhook.
    pub fn new(
        system_namespace: impl Into<String>,
        root: impl Into<PathBuf>,
        controllers: impl IntoIterator<Item = Constructor>,
    ) -> Self {
        App {
            system_namespace: system_namespace.into(),
            root: root.into(),
            controllers: controllers.into_iter().collect(),
            webhook_kinds: None,
        }
    }

    /// Runs the project's admission webhook too, for `kinds` (the generated
    /// registry's `custom_kinds()`), as `cmd/webhook` runs it in a cluster.
    pub fn webhook(mut self, kinds: Vec<CustomKind>) -> Self {
        self.webhook_kinds = Some(kinds);
        self
    }
}

/// The local cluster's `main`: reads [`LocalArgs`] from the command line and
/// runs [`run`] until Ctrl-C or SIGTERM; a failure is one line on stderr
/// and exit code 1.
pub fn main(app: App) -> ExitCode {
    let args = LocalArgs::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&Error::Runtime(e.to_string())),
    };
    let shutdown = CancellationToken::new();
    runtime.spawn(kinject_sharedmain::handle_signals(shutdown.clone()));
    match runtime.block_on(run(&app, &args, shutdown)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(err: &Error) -> ExitCode {
    eprintln!("local: {err}");
    ExitCode::FAILURE
}

/// Serves the API server with `config/` applied, plays the kubelet and the
/// workload controllers, starts the webhook (when the app has one) and
/// routes its Service to it, applies `config/samples/` once it serves, and
/// runs the controllers until `shutdown`.
pub async fn run(app: &App, args: &LocalArgs, shutdown: CancellationToken) -> Result<(), Error> {
    let system_namespace = std::env::var("SYSTEM_NAMESPACE")
        .ok()
        .filter(|ns| !ns.trim().is_empty())
        .unwrap_or_else(|| app.system_namespace.clone());
    let config = app.root.join("config");
    // The webhook converts the versions of kinds with a hub; the local API
    // server asks it in process (testenv calls no webhook over HTTP).
    let converted = match (&app.webhook_kinds, args.no_webhook) {
        (Some(kinds), false) => KindsConverter::for_hubs(kinds),
        _ => Vec::new(),
    };
    let (env, server, kubeconfig, in_process) = serve(args, &app.root, &config, converted).await?;

    let workloads = in_process.iter().fold(
        Workloads::all()
            .kubelet(!args.no_kubelet)
            .controllers(!args.no_workload_controllers),
        |workloads, deployment| workloads.run_in_process(&deployment.namespace, &deployment.name),
    );
    let workloads = tokio::spawn({
        let (env, stop) = (env.clone(), shutdown.clone());
        async move { env.run_workloads(workloads, stop.cancelled_owned()).await }
    });

    let identity = Identities {
        args,
        server: &server,
        kubeconfig: &kubeconfig,
        system_namespace: &system_namespace,
        in_process: &in_process,
        env: &env,
    };
    let webhook = match (&app.webhook_kinds, args.no_webhook) {
        (Some(kinds), false) => {
            let flags = flags(args, identity.kubeconfig_of("webhook")?);
            Some(crate::webhook::spawn(&env, kinds.clone(), flags, &system_namespace, &shutdown).await?)
        }
        _ => None,
    };
    let samples = tokio::spawn({
        let (env, config, with_webhook) = (env.clone(), config.clone(), webhook.is_some());
        async move {
            let ready = if with_webhook {
                crate::webhook::ready(&env).await
            } else {
                Ok(())
            };
            // A sample the API server refused is the user's to see at once.
            if let Err(e) = ready.and_then(|()| apply_samples(&env, &config)) {
                eprintln!("error: applying config/samples: {e}");
            }
        }
    });

    let kubeconfig = identity.kubeconfig_of("controller")?;
    let replicas = (0..args.replicas.max(1)).map(|replica| {
        let env = Env::from_lookup(|name| match name {
            "SYSTEM_NAMESPACE" => Some(system_namespace.clone()),
            "POD_NAME" if args.replicas > 1 => Some(format!("controller-{replica}")),
            // The first replica holds the configured ports, the others free ones.
            "PROBES_PORT" | "METRICS_PROMETHEUS_PORT" if replica > 0 => Some("0".into()),
            _ => std::env::var(name).ok(),
        });
        let (flags, shutdown) = (flags(args, kubeconfig.clone()), shutdown.clone());
        async move {
            let env = env?;
            kinject_sharedmain::run("controller", &app.controllers, flags, env, shutdown).await
        }
    });
    let ran: Result<(), kinject_sharedmain::MainError> =
        futures::future::join_all(replicas).await.into_iter().collect();
    shutdown.cancel();
    samples.abort();
    let webhook_ran = match webhook {
        Some(webhook) => webhook.await.unwrap_or(Ok(())),
        None => Ok(()),
    };
    let _ = workloads.await;
    server.shutdown().await;
    ran?;
    webhook_ran?;
    Ok(())
}

/// The flags the controller and the webhook run with here: the kubeconfig
/// of their identity, metrics and probes where the API server listens.
fn flags(args: &LocalArgs, kubeconfig: PathBuf) -> Flags {
    Flags {
        kubeconfig: Some(kubeconfig.to_string_lossy().into_owned()),
        server: None,
        context: None,
        kube_api_qps: 0.0,
        kube_api_burst: 0,
        disable_ha: false,
        disable_controllers: Vec::new(),
        // A workstation's metrics and probes stay where the API server is.
        bind_address: args.address,
        resync_period: kinject_runtime::informer::DEFAULT_RESYNC_PERIOD,
    }
}

/// The API server with `config/` applied, serving over loopback, and the
/// administrator's kubeconfig written for it.
async fn serve(
    args: &LocalArgs,
    root: &Path,
    config: &Path,
    converted: Vec<(String, Arc<dyn kinject_testenv::Converter>)>,
) -> Result<(TestEnv, Server, PathBuf, Vec<InProcess>), Error> {
    let env = converted
        .into_iter()
        .fold(TestEnv::builder(), |builder, (crd, converter)| {
            builder.converter(&crd, converter)
        })
        .port(args.port)
        .address(args.address)
        .garbage_collection(!args.no_garbage_collection)
        .namespace_deletion(!args.no_namespace_deletion)
        .build();
    let in_process = apply_config(&env, config)?;
    let server = env.serve().await?;
    let kubeconfig = root.join(&args.kubeconfig);
    if let Some(dir) = kubeconfig.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::Write {
            path: dir.to_owned(),
            message: e.to_string(),
        })?;
    }
    server.write_kubeconfig(&kubeconfig)?;
    eprintln!(
        "API server at {}; kubeconfig written to {}",
        server.url(),
        kubeconfig.display()
    );
    eprintln!(
        "config/ applied; kubectl --kubeconfig {} reaches the API server",
        args.kubeconfig.display()
    );
    Ok((env, server, kubeconfig, in_process))
}

/// Who the controller and the webhook are: the service account their
/// Deployment in `config/` names, as in a cluster, so RBAC refuses locally
/// what it would refuse there.
struct Identities<'a> {
    args: &'a LocalArgs,
    server: &'a Server,
    kubeconfig: &'a Path,
    system_namespace: &'a str,
    in_process: &'a [InProcess],
    env: &'a TestEnv,
}

impl Identities<'_> {
    /// The kubeconfig `component` runs with: a token of its service account
    /// beside the administrator's kubeconfig, or that kubeconfig itself with
    /// `--no-rbac` or when `config/` has no Deployment of that name.
    fn kubeconfig_of(&self, component: &str) -> Result<PathBuf, Error> {
        let deployment = self
            .in_process
            .iter()
            .find(|d| d.name == component && d.namespace == self.system_namespace);
        let Some(deployment) = deployment.filter(|_| !self.args.no_rbac) else {
            return Ok(self.kubeconfig.to_owned());
        };
        let token = self
            .env
            .service_account_token(&deployment.namespace, &deployment.service_account);
        let path = self.kubeconfig.with_file_name(format!("{component}.kubeconfig"));
        std::fs::write(&path, self.server.kubeconfig_with_token(&token)).map_err(|e| Error::Write {
            path: path.clone(),
            message: e.to_string(),
        })?;
        eprintln!(
            "the {component} runs as system:serviceaccount:{}:{}, with the RBAC of config/ \
             (--no-rbac runs it as the administrator)",
            deployment.namespace, deployment.service_account
        );
        Ok(path)
    }
}

/// The conversions of a project's kinds, as its webhook answers them: any
/// version to any other through the kind's hub, defaulted as the target
/// version defaults.
#[derive(Debug)]
struct KindsConverter(Vec<CustomKind>);

impl KindsConverter {
    /// The CRD of each kind with a hub, by name, with one converter for all.
    fn for_hubs(kinds: &[CustomKind]) -> Vec<(String, Arc<dyn kinject_testenv::Converter>)> {
        let converter: Arc<dyn kinject_testenv::Converter> = Arc::new(KindsConverter(kinds.to_vec()));
        kinds
            .iter()
            .filter(|kind| kind.hub)
            .map(|kind| (format!("{}.{}", kind.plural, kind.group), converter.clone()))
            .collect()
    }
}

impl kinject_testenv::Converter for KindsConverter {
    fn convert(&self, object: &serde_json::Value, api_version: &str) -> Result<serde_json::Value, String> {
        kinject_runtime::apis::registry::convert(&self.0, object, api_version).map_err(|e| e.to_string())
    }
}
