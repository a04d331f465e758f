//! The local cluster's switches: one place for its ports and addresses, so
//! the API server, the controller and the webhook never ask for the same one.

use std::net::IpAddr;
use std::path::PathBuf;

/// The local cluster's command line (`cargo run -p controller --example
/// local -- --help`).
#[derive(Clone, Debug, clap::Parser)]
#[command(
    about = "The controller and its webhook against a local, in-memory API server",
    after_help = "Environment: what the controller reads (`cargo run -p controller -- --help` lists it); \
                  SYSTEM_NAMESPACE is the project's namespace unless set."
)]
#[non_exhaustive]
pub struct LocalArgs {
    /// The API server's port (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Where the API server, the controller's /metrics and its probes listen:
    /// this machine only by default; 0.0.0.0 (or ::) to reach them from others.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: IpAddr,
    /// Where to write the kubeconfig for the API server (relative to the
    /// project's root).
    #[arg(long, default_value = ".testenv/kubeconfig")]
    pub kubeconfig: PathBuf,
    /// Leave pods Pending, as a cluster without nodes would.
    #[arg(long)]
    pub no_kubelet: bool,
    /// Leave Jobs, ReplicaSets and Deployments without pods, as a bare API
    /// server does.
    #[arg(long)]
    pub no_workload_controllers: bool,
    /// Keep owned objects when their owner is deleted, as a bare API server does.
    #[arg(long)]
    pub no_garbage_collection: bool,
    /// Leave deleted namespaces Terminating, as a bare API server does.
    #[arg(long)]
    pub no_namespace_deletion: bool,
    /// Run without the admission webhook, so nothing is defaulted or
    /// validated when it is written.
    #[arg(long)]
    pub no_webhook: bool,
    /// Run the controller and the webhook as the cluster administrator
    /// instead of as their service accounts, so RBAC refuses them nothing.
    #[arg(long)]
    pub no_rbac: bool,
    /// Replicas of the controller, each with its own leader-election
    /// identity, as a Deployment of that many pods: they share the buckets
    /// of `config-leader-election` (`kubectl get leases -n <namespace>` shows
    /// the split).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
}

impl Default for LocalArgs {
    fn default() -> Self {
        LocalArgs {
            port: 0,
            address: IpAddr::from([127, 0, 0, 1]),
            kubeconfig: PathBuf::from(".testenv/kubeconfig"),
            no_kubelet: false,
            no_workload_controllers: false,
            no_garbage_collection: false,
            no_namespace_deletion: false,
            no_webhook: false,
            no_rbac: false,
            replicas: 1,
        }
    }
}
