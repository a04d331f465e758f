//! The command line of every controller process.

use std::time::Duration;

use clap::Parser;

use crate::env::ENVIRONMENT_HELP;

/// The flags of every controller process (Knative's `sharedmain` flags).
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Runs Knative-style controllers against the cluster in the kubeconfig.",
    after_help = ENVIRONMENT_HELP
)]
pub struct Flags {
    /// Path to a kubeconfig. Without it, $KUBECONFIG, ~/.kube/config, then the
    /// in-cluster config are tried.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<String>,
    /// The API server URL, overriding the kubeconfig's.
    #[arg(long)]
    pub server: Option<String>,
    /// The kubeconfig context to use instead of its current one.
    #[arg(long)]
    pub context: Option<String>,
    /// Client-side requests per second to the API server; 0 means 5 per controller.
    #[arg(long, env = "KUBE_API_QPS", default_value_t = 0.0)]
    pub kube_api_qps: f32,
    /// Client-side burst of requests; 0 means 10 per controller.
    #[arg(long, env = "KUBE_API_BURST", default_value_t = 0)]
    pub kube_api_burst: i64,
    /// Lead every key without electing (one replica only).
    #[arg(long)]
    pub disable_ha: bool,
    /// Comma-separated controllers not to run (for example `addressableservice`);
    /// they are not built, so their informers never start.
    #[arg(long, value_delimiter = ',')]
    pub disable_controllers: Vec<String>,
    /// The address `/metrics`, `/health` and `/readiness` listen on: every
    /// interface by default (as a pod needs), `127.0.0.1` on a workstation.
    #[arg(long, env = "BIND_ADDRESS", default_value = "::")]
    pub bind_address: std::net::IpAddr,
    /// How often every informer hands its whole cache to the controllers
    /// again, which re-reconcile each object in the slow lane (Go duration
    /// syntax; 0 never). Knative's 10h by default.
    #[arg(long, env = "RESYNC_PERIOD", default_value = "10h", value_parser = parse_resync_period)]
    pub resync_period: Duration,
}

/// A `--resync-period` in Go's syntax (`10h`, `90s`), as Knative's ConfigMaps
/// write durations.
fn parse_resync_period(text: &str) -> Result<Duration, String> {
    let nanos = kinject_runtime::parse_go_duration(text)?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("{text:?} is negative; use 0 for no resync or a period such as 10h"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;

    #[test]
    fn help_lists_every_variable_the_environment_is_read_for() {
        use clap::CommandFactory;
        let asked = std::sync::Mutex::new(Vec::new());
        let _ = Env::from_lookup(|name| {
            asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(name.to_owned());
            Some("1".to_owned())
        });
        let help = Flags::command().render_long_help().to_string();
        let asked = asked.into_inner().unwrap_or_else(|e| e.into_inner());
        assert!(asked.len() >= 9, "{asked:?}");
        for name in asked {
            assert!(help.contains(&name), "--help does not name {name}:\n{help}");
        }
    }

    #[test]
    fn resync_period_is_knatives_ten_hours_unless_set_in_go_syntax() {
        let flags = |args: &[&str]| Flags::try_parse_from([&["controller"], args].concat());
        assert_eq!(
            flags(&[]).unwrap().resync_period,
            Duration::from_secs(10 * 60 * 60)
        );
        assert_eq!(
            flags(&["--resync-period", "1m30s"]).unwrap().resync_period,
            Duration::from_secs(90)
        );
        assert_eq!(
            flags(&["--resync-period", "0"]).unwrap().resync_period,
            Duration::ZERO
        );
        let err = flags(&["--resync-period=-5s"]).unwrap_err().to_string();
        assert!(err.contains("negative"), "{err}");
        let err = flags(&["--resync-period", "5"]).unwrap_err().to_string();
        assert!(err.contains("time: missing unit in duration"), "{err}");
    }
}
