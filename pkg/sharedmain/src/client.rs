//! The kube client's configuration and request limits, from the flags.

use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::MainError;
use crate::flags::Flags;

/// The kube config the flags and environment describe.
pub async fn kube_config(flags: &Flags) -> Result<Config, MainError> {
    let options = KubeConfigOptions {
        context: flags.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = match &flags.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                MainError::Kubeconfig(format!(
                    "cannot read kubeconfig {path:?}: {e}; fix the file, or point --kubeconfig (or KUBECONFIG) at a valid kubeconfig"
                ))
            })?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| {
                    MainError::Kubeconfig(format!(
                        "kubeconfig {path:?} cannot be used{}: {e}",
                        flags
                            .context
                            .as_deref()
                            .map(|c| format!(" with context {c:?}"))
                            .unwrap_or_default()
                    ))
                })?
        }
        None if flags.context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| MainError::Kubeconfig(format!("cannot use the default kubeconfig: {e}")))?,
        None => Config::infer().await.map_err(|e| {
            MainError::Kubeconfig(format!(
                "no kubeconfig found and not running in a cluster ({e}); pass --kubeconfig or set KUBECONFIG"
            ))
        })?,
    };
    if let Some(server) = &flags.server {
        config.cluster_url = server
            .parse()
            .map_err(|e| MainError::Kubeconfig(format!("--server {server:?} is not a URL: {e}")))?;
    }
    Ok(config)
}

/// The client's QPS and burst: the flags, or 5 and 10 per controller when they
/// say 0 (Knative's defaults).
pub(crate) fn client_limits(flags: &Flags, controllers: usize) -> Result<(f32, u32), MainError> {
    if flags.kube_api_qps < 0.0 || !flags.kube_api_qps.is_finite() {
        return Err(MainError::BadFlag(format!(
            "--kube-api-qps {} must be a number ≥ 0",
            flags.kube_api_qps
        )));
    }
    let burst = u32::try_from(flags.kube_api_burst).map_err(|_| {
        MainError::BadFlag(format!(
            "--kube-api-burst {} must be a whole number ≥ 0",
            flags.kube_api_burst
        ))
    })?;
    let controllers = controllers.max(1);
    let qps = if flags.kube_api_qps == 0.0 {
        5.0 * controllers as f32
    } else {
        flags.kube_api_qps
    };
    let burst = if burst == 0 {
        10 * u32::try_from(controllers).unwrap_or(u32::MAX / 10)
    } else {
        burst
    };
    Ok((qps, burst))
}
