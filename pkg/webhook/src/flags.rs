//! The command line of a webhook process.

use std::time::Duration;

use clap::Parser;
use kinject_sharedmain::Flags;

/// The flags of a webhook process: the controller's, and where to listen.
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Serves admission webhooks (defaulting, validation, ConfigMap validation) over TLS.",
    after_help = kinject_sharedmain::ENVIRONMENT_HELP
)]
pub struct WebhookFlags {
    /// The controller flags.
    #[command(flatten)]
    pub common: Flags,
    /// The HTTPS port admission reviews arrive on (the `webhook` Service's
    /// targetPort).
    #[arg(long, env = "WEBHOOK_PORT", default_value_t = 8443)]
    pub port: u16,
    /// After SIGTERM, how long to keep answering reviews (with /readiness
    /// failing) before closing the port, so the API server stops calling this
    /// replica first; Go duration syntax. Knative's default is 45s.
    #[arg(long, default_value = "45s", value_parser = parse_duration)]
    pub drain_period: Duration,
    /// Leave the webhook configurations without the system namespace as
    /// their owner (Knative's variable of the same name; any value turns it
    /// on).
    #[arg(long, env = "WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP", value_parser = any_value_is_true, default_value = "false")]
    pub disable_namespace_ownership: bool,
}

/// Knative checks `WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP` for presence, so any
/// value but an explicit false (the flag's default) turns it on.
fn any_value_is_true(text: &str) -> Result<bool, String> {
    Ok(!matches!(text.trim(), "" | "false"))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    kinject_runtime::parse_go_duration(text)
        .map_err(|e| format!("{e}; write a Go duration such as 45s or 0s"))
        .and_then(|nanos| {
            u64::try_from(nanos)
                .map(Duration::from_nanos)
                .map_err(|_| "must not be negative".to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_the_environment_and_the_webhooks_variables() {
        use clap::CommandFactory;
        let help = WebhookFlags::command().render_long_help().to_string();
        for name in [
            "SYSTEM_NAMESPACE",
            "K_THREADS_PER_CONTROLLER",
            "WEBHOOK_PORT",
            "KUBECONFIG",
        ] {
            assert!(help.contains(name), "{name}:\n{help}");
        }
    }
}
