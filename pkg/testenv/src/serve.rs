//! The `serve` command: the in-memory API server on 127.0.0.1 until SIGINT or
//! SIGTERM, its kubeconfig written for clients. The `kinject-testenv` binary
//! and the `kinject` command (`kinject serve`) both run it, so a project's
//! local cluster needs no build of its own.

use std::path::PathBuf;
use std::process::ExitCode;

/// `serve`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Where to write a kubeconfig that points at the server.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: PathBuf,
    /// The port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Calls to the Service NS/NAME (port 443 unless :PORT) go to ADDR,
    /// e.g. `knative-samples/webhook=127.0.0.1:8443` for a webhook run
    /// locally. Repeatable.
    #[arg(long = "route-service", value_name = "NS/NAME[:PORT]=ADDR", value_parser = parse_route)]
    pub routes: Vec<Route>,
    /// Keep owned objects when their owner is deleted, as a bare API server
    /// does (a cluster's garbage collector removes them).
    #[arg(long)]
    pub no_garbage_collection: bool,
    /// Leave deleted namespaces Terminating, as a bare API server does (a
    /// cluster's namespace controller empties and removes them, and
    /// `kubectl delete` of a namespace waits for that).
    #[arg(long)]
    pub no_namespace_deletion: bool,
    /// Leave pods Pending, as a cluster without nodes would (a stand-in
    /// kubelet starts them otherwise, and runs a Job's to completion).
    #[arg(long)]
    pub no_kubelet: bool,
    /// Leave Jobs, ReplicaSets and Deployments without pods, as a bare API
    /// server does.
    #[arg(long)]
    pub no_workload_controllers: bool,
}

/// A `--route-service` value.
#[derive(Clone, Debug)]
pub struct Route {
    namespace: String,
    name: String,
    port: u16,
    addr: std::net::SocketAddr,
}

fn parse_route(value: &str) -> Result<Route, String> {
    let usage = "write NS/NAME[:PORT]=ADDR, e.g. knative-samples/webhook=127.0.0.1:8443";
    let (service, addr) = value
        .split_once('=')
        .ok_or_else(|| format!("{value:?} has no '='; {usage}"))?;
    let addr = addr
        .parse()
        .map_err(|e| format!("{addr:?} is not an address (IP:PORT): {e}; {usage}"))?;
    let (service, port) = match service.rsplit_once(':') {
        Some((service, port)) => (
            service,
            port.parse()
                .map_err(|e| format!("{port:?} is not a port: {e}; {usage}"))?,
        ),
        None => (service, 443),
    };
    let (namespace, name) = service
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .ok_or_else(|| format!("{service:?} is not NS/NAME; {usage}"))?;
    Ok(Route {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        port,
        addr,
    })
}

/// Serves until SIGINT or SIGTERM, printing the server's URL on stdout;
/// every failure is one line on stderr and exit code 1.
pub async fn serve(args: ServeArgs) -> ExitCode {
    // Nothing reads this server's action log, which would otherwise hold
    // the newest requests' bodies for as long as it runs; counters still count.
    let env = crate::TestEnv::builder()
        .action_log_bytes(0)
        .port(args.port)
        .garbage_collection(!args.no_garbage_collection)
        .namespace_deletion(!args.no_namespace_deletion)
        .build();
    for route in &args.routes {
        env.route_service(&route.namespace, &route.name, route.port, route.addr);
    }
    let server = match env.serve().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testenv: {e}; pick another --port or free this one");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = server.write_kubeconfig(&args.kubeconfig) {
        eprintln!("testenv: {e}; check that the directory exists and is writable");
        return ExitCode::FAILURE;
    }
    println!("{}", server.url());
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testenv: cannot listen for SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    let workloads = crate::Workloads::all()
        .kubelet(!args.no_kubelet)
        .controllers(!args.no_workload_controllers);
    let stop = async {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    env.run_workloads(workloads, stop).await;
    server.shutdown().await;
    ExitCode::SUCCESS
}
