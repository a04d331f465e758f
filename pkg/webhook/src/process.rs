//! The webhook process: flags, environment and the sharedmain phases, with
//! the HTTPS server beside them.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use kinject_runtime::apis::registry::CustomKind;
use kinject_sharedmain::{Env, MainError, Setup};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::admission::ConfigValidation;
use crate::conversion::ConversionMetrics;
use crate::flags::WebhookFlags;
use crate::metrics;
use crate::webhook::{Options, Webhook};

/// Runs the webhook `component` for `kinds` until a signal; the exit code to
/// return from `main`. Reads the flags ([`WebhookFlags`]) and the environment
/// as the controller does (`SYSTEM_NAMESPACE` is required); every failure
/// before it serves exits 1 saying what failed and how to fix it.
pub fn main(component: &str, kinds: Vec<CustomKind>) -> ExitCode {
    let flags = WebhookFlags::parse();
    kinject_sharedmain::process(component, |env, shutdown| async move {
        let listener = bind(&flags).await?;
        run(component, kinds, flags, env, listener, shutdown).await
    })
}

/// Listens where the flags say (`--bind-address`, `--port`).
pub async fn bind(flags: &WebhookFlags) -> Result<TcpListener, MainError> {
    let address = SocketAddr::from((flags.common.bind_address, flags.port));
    let cannot = |e: std::io::Error| {
        MainError::Serve(format!(
            "cannot listen on {address}: {e}; free the port or choose another (--port, WEBHOOK_PORT), \
             or another address (--bind-address)"
        ))
    };
    match TcpListener::bind(address).await {
        Ok(listener) => Ok(listener),
        // Hosts without IPv6 still get every interface on IPv4.
        Err(_) if flags.common.bind_address == std::net::IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED) => {
            TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], flags.port)))
                .await
                .map_err(cannot)
        }
        Err(e) => Err(cannot(e)),
    }
}

/// The webhook process once flags and environment are read: the sharedmain
/// phases (`Setup::read`, the process's context, the four reconcilers, which
/// watch only `SYSTEM_NAMESPACE`, `Setup::run`) with the HTTPS server on
/// `listener` beside them, until `shutdown`; returns once both have stopped.
pub async fn run(
    component: &str,
    kinds: Vec<CustomKind>,
    flags: WebhookFlags,
    env: Env,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), MainError> {
    let names = [
        ("config-logging", env.config_logging_name.clone()),
        ("config-leader-election", env.config_leader_election_name.clone()),
        ("config-observability", env.config_observability_name.clone()),
    ];
    let config = ConfigValidation::sharedmain(|default| {
        names
            .iter()
            .find(|(d, _)| *d == default)
            .map_or_else(|| default.to_owned(), |(_, name)| name.clone())
    });
    let options = Options {
        drain: flags.drain_period,
        namespace_owns_configurations: !flags.disable_namespace_ownership,
        ..Options::default()
    };
    let webhook = Webhook::new(&env.system_namespace, kinds, config, options);
    let constructors = webhook.constructors();
    let mut setup = Setup::read(component, &constructors, flags.common, env).await?;
    let span = setup.component_span();
    async {
        let admission = metrics::AdmissionMetrics::register(setup.registry_mut());
        let conversion = ConversionMetrics::register(setup.registry_mut());
        let ctx = setup.context();
        ctx.insert(admission);
        ctx.insert(conversion);
        let controllers = setup.construct(&ctx, &constructors)?;
        tracing::info!(
            address = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            "Serving admission webhooks over TLS"
        );
        // A failed run must not leave the server waiting for a signal.
        let stop_server = shutdown.child_token();
        let run = async {
            let ran = setup.run(&ctx, controllers, shutdown.clone()).await;
            stop_server.cancel();
            ran
        };
        let (served, ran) = tokio::join!(webhook.serve(&ctx, listener, stop_server.clone()), run);
        ran.and(served)
    }
    .instrument(span)
    .await
}
