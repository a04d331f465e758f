//! The admission webhook as a cluster runs it beside the controller:
//! testenv calls it, as kube-apiserver would, for every write its
//! configurations match, so `kubectl apply` of an invalid object is refused
//! with the field.

use std::time::Duration;

use kinject_runtime::apis::registry::CustomKind;
use kinject_sharedmain::{Env, Flags, MainError};
use kinject_testenv::TestEnv;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::Error;

/// How long the webhook has to put its CA bundle in its configurations.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Starts the webhook on a free port of `flags.bind_address`, and routes the
/// `webhook` Service of `system_namespace` to it.
pub(crate) async fn spawn(
    env: &TestEnv,
    kinds: Vec<CustomKind>,
    flags: Flags,
    system_namespace: &str,
    shutdown: &CancellationToken,
) -> Result<JoinHandle<Result<(), MainError>>, Error> {
    let cannot_listen = |e: std::io::Error| {
        MainError::Serve(format!(
            "cannot listen on {} for the webhook: {e}",
            flags.bind_address
        ))
    };
    let listener = tokio::net::TcpListener::bind((flags.bind_address, 0))
        .await
        .map_err(cannot_listen)?;
    let addr = listener.local_addr().map_err(cannot_listen)?;
    env.route_service(system_namespace, "webhook", 443, addr);
    let webhook_env = Env::from_lookup(|name| match name {
        "SYSTEM_NAMESPACE" => Some(system_namespace.to_owned()),
        // The controller holds the configured ports; the webhook takes free ones.
        "PROBES_PORT" | "METRICS_PROMETHEUS_PORT" => Some("0".into()),
        _ => std::env::var(name).ok(),
    })?;
    let webhook_flags = kinject_webhook::WebhookFlags {
        common: flags,
        port: 0,
        drain_period: Duration::ZERO,
        disable_namespace_ownership: false,
    };
    Ok(tokio::spawn(kinject_webhook::run(
        "webhook",
        kinds,
        webhook_flags,
        webhook_env,
        listener,
        shutdown.clone(),
    )))
}

/// Waits until every webhook of every admission configuration has its
/// caBundle: the webhook then serves, and writes reach it.
pub(crate) async fn ready(env: &TestEnv) -> Result<(), Error> {
    let configured = || {
        ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
            .iter()
            .flat_map(|plural| env.list_objects("admissionregistration.k8s.io", "v1", plural, None))
            .flat_map(|configuration| configuration["webhooks"].as_array().cloned().unwrap_or_default())
            .all(|webhook| {
                webhook
                    .pointer("/clientConfig/caBundle")
                    .is_some_and(|ca| ca != "")
            })
    };
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    while !configured() {
        if tokio::time::Instant::now() > deadline {
            return Err(Error::WebhookNotReady(READY_WITHIN.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
