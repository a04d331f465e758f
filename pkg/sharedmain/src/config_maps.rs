//! The configuration ConfigMaps: read and checked at start, followed while
//! the process runs, and checked the same way for a webhook.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kinject_runtime::informer::EventHandler;
use kinject_runtime::injection::Context;
use kinject_runtime::leaderelection;
use kube::{Api, Client};

use crate::error::MainError;
use crate::logging;

/// How long config ConfigMaps are retried at start (Knative polls for 5 s).
const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads a ConfigMap's data; `None` when it does not exist. Transient errors are
/// retried for a few seconds (a sidecar proxy may still be starting).
pub(crate) async fn read_config_map(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, MainError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + CONFIG_READ_TIMEOUT;
    loop {
        match api.get_opt(name).await {
            Ok(found) => return Ok(found.map(|cm| cm.data.unwrap_or_default())),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(MainError::ConfigRead {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    why: kinject_runtime::reconciler::api_message(&e),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// Applies the log level of the ConfigMap `name` in `system`'s namespace live,
/// and the default level when it is deleted.
pub(crate) fn follow_logging_config(system: &Context, name: &str, levels: &logging::LevelHandle) {
    let watched = name.to_owned();
    let (on_add, on_update, on_delete) = (levels.clone(), levels.clone(), levels.clone());
    system.informer::<ConfigMap>().add_event_handler(
        EventHandler::new()
            .with_filter(move |cm: &ConfigMap| cm.metadata.name.as_deref() == Some(watched.as_str()))
            .on_add(move |cm: &ConfigMap| on_add.apply(&cm.data.clone().unwrap_or_default()))
            .on_update(move |_, cm: &ConfigMap| on_update.apply(&cm.data.clone().unwrap_or_default()))
            .on_delete(move |_| {
                tracing::info!("config-logging was deleted; logging at the default level");
                on_delete.apply(&BTreeMap::new());
            }),
    );
}
/// The ConfigMaps read only at start (leader election, observability): an
/// edit is announced when it happens, not at the next start. An invalid one
/// is an error line naming the key and why, while the process keeps the
/// values it started with; a valid one says it applies at the next start.
pub(crate) fn announce_start_config_edits(
    system: &Context,
    leader_election: &str,
    observability: &str,
    kept: Kept,
) {
    let names = [
        (leader_election.to_owned(), StartConfig::LeaderElection),
        (observability.to_owned(), StartConfig::Observability),
    ];
    let filter_names = names.clone();
    system.informer::<ConfigMap>().add_event_handler(
        EventHandler::new()
            .with_filter(move |cm: &ConfigMap| {
                filter_names
                    .iter()
                    .any(|(name, _)| cm.metadata.name.as_deref() == Some(name.as_str()))
            })
            .on_update(move |old: &ConfigMap, new: &ConfigMap| {
                let Some((name, which)) = names
                    .iter()
                    .find(|(name, _)| new.metadata.name.as_deref() == Some(name.as_str()))
                else {
                    return;
                };
                if old.data == new.data {
                    return;
                }
                match start_config_edit(name, *which, &new.data.clone().unwrap_or_default(), &kept) {
                    Err(message) => tracing::error!("{message}"),
                    Ok(message) => tracing::info!("{message}"),
                }
            }),
    );
}

/// The values read at start that a process keeps, in words, for the line
/// that refuses an invalid edit.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    leader_election: String,
    observability: String,
}

impl Kept {
    /// What `election` and the metrics setting say.
    pub(crate) fn new(election: &leaderelection::ComponentConfig, serve_metrics: bool) -> Self {
        Kept {
            leader_election: format!(
                "buckets {}, lease-duration {}, renew-deadline {}, retry-period {}",
                election.buckets,
                kinject_runtime::go_duration(election.lease_duration),
                kinject_runtime::go_duration(election.renew_deadline),
                kinject_runtime::go_duration(election.retry_period),
            ),
            observability: format!(
                "metrics-protocol {}",
                if serve_metrics { "prometheus" } else { "none" }
            ),
        }
    }

    fn of(&self, which: StartConfig) -> &str {
        match which {
            StartConfig::LeaderElection => &self.leader_election,
            StartConfig::Observability => &self.observability,
        }
    }
}

/// Which ConfigMap read only at start.
#[derive(Clone, Copy, Debug)]
enum StartConfig {
    LeaderElection,
    Observability,
}

/// What to say of an edit of a ConfigMap read only at start: `Err` when the
/// new data would stop the next start.
fn start_config_edit(
    name: &str,
    which: StartConfig,
    data: &BTreeMap<String, String>,
    kept: &Kept,
) -> Result<String, String> {
    let checked = match which {
        StartConfig::LeaderElection => leader_election_config(data).map(drop),
        StartConfig::Observability => metrics_enabled(data).map(drop),
    };
    match checked {
        Ok(()) => Ok(format!(
            "{name} changed; the new values apply when the process restarts"
        )),
        Err(why) => Err(format!(
            "{name} is invalid: {why}; this process keeps the values it started with ({}), \
             and it would not start again until {name} is fixed",
            kept.of(which)
        )),
    }
}

/// `component`'s log level and the line encoding from `config-logging` data,
/// or why the ConfigMap cannot be used.
pub fn logging_config(
    component: &str,
    data: &BTreeMap<String, String>,
    stdout_is_terminal: bool,
) -> Result<(tracing_subscriber::filter::LevelFilter, logging::Encoding), String> {
    let level = logging::level_from_config(component, data).map_err(|e| e.to_string())?;
    let encoding = logging::Encoding::from_config(data, stdout_is_terminal).map_err(|e| e.to_string())?;
    Ok((level, encoding))
}

/// `config-leader-election` data read, or why it cannot be used.
pub fn leader_election_config(data: &BTreeMap<String, String>) -> Result<leaderelection::Config, String> {
    leaderelection::Config::from_map(data).map_err(|e| format!("{e:#}"))
}

/// The configuration ConfigMaps every process reads at start, by their
/// default names.
pub const CONFIG_MAPS: [&str; 3] = ["config-logging", "config-leader-election", "config-observability"];

/// Checks the data of the configuration ConfigMap `name` (one of
/// [`CONFIG_MAPS`]) with the parsers a process uses at start, so a webhook can
/// refuse at apply time what would stop a process, with the same words.
/// `config-logging` is checked for every component it names
/// (`loglevel.<component>`). `None` for any other name.
pub fn check_config_map(name: &str, data: &BTreeMap<String, String>) -> Option<Result<(), String>> {
    match name {
        "config-logging" => Some((|| {
            logging_config("", data, false)?;
            for component in data.keys().filter_map(|k| k.strip_prefix("loglevel.")) {
                logging_config(component, data, false)?;
            }
            Ok(())
        })()),
        "config-leader-election" => Some(leader_election_config(data).map(drop)),
        "config-observability" => Some(metrics_enabled(data).map(drop)),
        _ => None,
    }
}

/// Whether `/metrics` is served, from `config-observability`'s
/// `metrics-protocol`: Prometheus unless it says `none`. Knative's default is
/// `none`; serving Prometheus by default is a deliberate difference, so a
/// fresh install has metrics to scrape.
pub fn metrics_enabled(data: &BTreeMap<String, String>) -> Result<bool, String> {
    match data.get("metrics-protocol").map(|s| s.trim()) {
        None | Some("") | Some("prometheus") => Ok(true),
        Some("none") => Ok(false),
        Some(other @ ("grpc" | "http/protobuf")) => Err(format!(
            "metrics-protocol {other:?} (OpenTelemetry export) is not supported; use \"prometheus\" or \"none\""
        )),
        Some(other) => Err(format!(
            "metrics-protocol {other:?} is not one of prometheus, none"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_edit_of_a_start_config_says_which_key_and_what_is_kept() {
        let data = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        let kept = Kept::new(&leaderelection::ComponentConfig::new("controller"), true);
        let bad = start_config_edit(
            "config-leader-election",
            StartConfig::LeaderElection,
            &data(&[("leaseDuration", "banana")]),
            &kept,
        )
        .unwrap_err();
        assert!(bad.contains("leaseDuration"), "{bad}");
        assert!(
            bad.contains(
                "keeps the values it started with (buckets 1, lease-duration 1m0s, renew-deadline 40s, \
                 retry-period 10s)"
            ),
            "{bad}"
        );
        let bad = start_config_edit(
            "config-observability",
            StartConfig::Observability,
            &data(&[("metrics-protocol", "carrier-pigeon")]),
            &kept,
        )
        .unwrap_err();
        assert!(bad.contains("metrics-protocol \"carrier-pigeon\""), "{bad}");
        assert!(bad.contains("(metrics-protocol prometheus)"), "{bad}");
        let good = start_config_edit(
            "config-leader-election",
            StartConfig::LeaderElection,
            &data(&[("lease-duration", "90s")]),
            &kept,
        )
        .unwrap();
        assert!(good.contains("when the process restarts"), "{good}");
    }

    #[test]
    fn config_maps_are_checked_with_the_start_up_parsers() {
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let err = check_config_map("config-logging", &data(&[("loglevel.webhook", "loud")]));
        assert_eq!(
            err,
            Some(Err(
                "invalid log level \"loud\" in loglevel.webhook; use one of debug, info, warn, error, dpanic, panic, fatal"
                    .to_owned()
            )),
            "every component's level is checked, not only this process's"
        );
        let err = check_config_map(
            "config-logging",
            &data(&[("zap-logger-config", r#"{"encoding": "xml"}"#)]),
        );
        assert_eq!(
            err,
            Some(Err(
                "invalid encoding \"xml\" in zap-logger-config; use \"json\" or \"console\"".to_owned()
            ))
        );
        let err = check_config_map("config-leader-election", &data(&[("buckets", "0")]))
            .unwrap()
            .unwrap_err();
        assert!(
            err.starts_with("buckets: value must be between 1 and 10, got 0"),
            "{err}"
        );
        assert!(
            check_config_map("config-observability", &data(&[("metrics-protocol", "none")])) == Some(Ok(()))
        );
        assert_eq!(check_config_map("config-network", &BTreeMap::new()), None);
    }

    #[test]
    fn metrics_protocols() {
        let with = |v: &str| metrics_enabled(&[("metrics-protocol".to_string(), v.to_string())].into());
        assert_eq!(metrics_enabled(&BTreeMap::new()), Ok(true));
        assert_eq!(with("prometheus"), Ok(true));
        assert_eq!(with("none"), Ok(false));
        assert!(with("grpc").unwrap_err().contains("not supported"));
        assert!(with("carrier-pigeon").is_err());
    }
}
