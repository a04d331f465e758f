//! The process's environment: every variable it honours, read once.

use kinject_runtime::leaderelection;

use crate::error::MainError;

/// What `--help` says of the environment a process reads ([`Env`]); the
/// variables behind flags are shown beside their flags.
pub const ENVIRONMENT_HELP: &str = "\
Environment:
  SYSTEM_NAMESPACE            (required) the namespace of this component's ConfigMaps and leases
  POD_NAME, else HOSTNAME     this replica's name, in logs, the User-Agent and events
  CLUSTER_DOMAIN              the cluster's DNS domain (default: /etc/resolv.conf's search, else cluster.local)
  CONFIG_LOGGING_NAME         the logging ConfigMap (default config-logging)
  CONFIG_OBSERVABILITY_NAME   the observability ConfigMap (default config-observability)
  CONFIG_LEADERELECTION_NAME  the leader election ConfigMap (default config-leader-election)
  K_THREADS_PER_CONTROLLER    workers per controller (default 2)
  METRICS_PROMETHEUS_PORT     the /metrics port (default 9090; 0 picks a free one)
  PROBES_PORT                 the /health and /readiness port (default 8080; 0 picks a free one)
  STATEFUL_CONTROLLER_ORDINAL this StatefulSet pod's name (<statefulset>-<ordinal>): own the bucket of
                              that ordinal, without Lease elections; needs STATEFUL_SERVICE_NAME
  STATEFUL_SERVICE_NAME       the StatefulSet's spec.serviceName
  STATEFUL_SERVICE_PORT       the port in the StatefulSet's bucket names (default 80)
  STATEFUL_SERVICE_PROTOCOL   the scheme in the StatefulSet's bucket names (default http)";

/// The environment of a controller process: every variable the process
/// honours, read once at start ([`Env::from_process`]) and passed down as
/// values, so nothing below reads the environment.
#[derive(Debug, Clone)]
pub struct Env {
    /// `SYSTEM_NAMESPACE` (required): where this component's ConfigMaps and
    /// leases live.
    pub system_namespace: String,
    /// `POD_NAME`, else `HOSTNAME`: added to every log line, the User-Agent
    /// and the events the process writes.
    pub pod_name: Option<String>,
    /// `CLUSTER_DOMAIN`: the cluster's DNS domain; unset, it is read from
    /// `/etc/resolv.conf`, else `cluster.local`.
    pub cluster_domain: Option<String>,
    /// `CONFIG_LOGGING_NAME` (default `config-logging`).
    pub config_logging_name: String,
    /// `CONFIG_OBSERVABILITY_NAME` (default `config-observability`).
    pub config_observability_name: String,
    /// `CONFIG_LEADERELECTION_NAME` (default `config-leader-election`).
    pub config_leader_election_name: String,
    /// `K_THREADS_PER_CONTROLLER` (default 2).
    pub threads_per_controller: usize,
    /// `METRICS_PROMETHEUS_PORT` (default 9090; 0 picks a free port).
    pub metrics_port: u16,
    /// `PROBES_PORT` (default 8080; 0 picks a free port).
    pub probes_port: u16,
    /// `STATEFUL_CONTROLLER_ORDINAL`, `STATEFUL_SERVICE_NAME`,
    /// `STATEFUL_SERVICE_PORT` and `STATEFUL_SERVICE_PROTOCOL`: set, the
    /// process owns the bucket of its StatefulSet ordinal instead of electing
    /// leaders with Leases (see [`leaderelection::StatefulSetConfig`]).
    pub stateful_set: Option<leaderelection::StatefulSetConfig>,
}

impl Env {
    /// Reads the environment of this process.
    pub fn from_process() -> Result<Env, MainError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the environment through `lookup` (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Env, MainError> {
        // An empty variable is an unset one, as Knative's `os.Getenv` checks read it.
        let lookup = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let system_namespace = lookup("SYSTEM_NAMESPACE")
            .filter(|s| !s.trim().is_empty())
            .ok_or(MainError::MissingSystemNamespace)?;
        let threads_per_controller = match lookup("K_THREADS_PER_CONTROLLER") {
            None => kinject_runtime::controller::DEFAULT_CONCURRENCY,
            Some(value) => match value.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(MainError::BadEnv {
                        name: "K_THREADS_PER_CONTROLLER",
                        value,
                        why: "expected a positive whole number of workers per controller, such as 2".into(),
                    });
                }
            },
        };
        let port = |name: &'static str, default: u16| -> Result<u16, MainError> {
            match lookup(name) {
                None => Ok(default),
                Some(value) => value.trim().parse::<u16>().map_err(|_| MainError::BadEnv {
                    name,
                    value,
                    why: "expected a TCP port number between 0 and 65535".into(),
                }),
            }
        };
        Ok(Env {
            system_namespace,
            pod_name: lookup("POD_NAME").or_else(|| lookup("HOSTNAME")),
            cluster_domain: lookup("CLUSTER_DOMAIN"),
            config_logging_name: lookup("CONFIG_LOGGING_NAME").unwrap_or_else(|| "config-logging".into()),
            config_observability_name: lookup("CONFIG_OBSERVABILITY_NAME")
                .unwrap_or_else(|| "config-observability".into()),
            config_leader_election_name: lookup(leaderelection::CONFIG_MAP_NAME_ENV)
                .unwrap_or_else(|| leaderelection::CONFIG_MAP_NAME.into()),
            threads_per_controller,
            metrics_port: port("METRICS_PROMETHEUS_PORT", 9090)?,
            probes_port: port("PROBES_PORT", 8080)?,
            stateful_set: leaderelection::StatefulSetConfig::from_lookup(lookup)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<Env, MainError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn system_namespace_is_required_and_the_message_says_how_to_set_it() {
        let err = env(&[]).unwrap_err().to_string();
        assert!(err.starts_with("SYSTEM_NAMESPACE is not set."), "{err}");
        assert!(err.contains("fieldPath: metadata.namespace"), "{err}");
        assert!(err.contains("export SYSTEM_NAMESPACE=knative-samples"), "{err}");
        assert!(err.contains("IDE"), "{err}");
    }

    #[test]
    fn defaults_and_overrides() {
        let e = env(&[("SYSTEM_NAMESPACE", "knative-samples"), ("HOSTNAME", "pod-1")]).unwrap();
        assert_eq!(e.config_logging_name, "config-logging");
        assert_eq!(e.config_leader_election_name, "config-leader-election");
        assert_eq!(
            (e.threads_per_controller, e.metrics_port, e.probes_port),
            (2, 9090, 8080)
        );
        assert_eq!(e.pod_name.as_deref(), Some("pod-1"));
        assert_eq!(e.cluster_domain, None);
        let e = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("POD_NAME", "p"),
            ("K_THREADS_PER_CONTROLLER", "4"),
            ("METRICS_PROMETHEUS_PORT", "0"),
        ])
        .unwrap();
        assert_eq!(
            (e.pod_name.as_deref(), e.threads_per_controller, e.metrics_port),
            (Some("p"), 4, 0)
        );
    }

    #[test]
    fn every_variable_is_read_here_and_empty_means_unset() {
        let e = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("POD_NAME", ""),
            ("HOSTNAME", "host-1"),
            ("CLUSTER_DOMAIN", "corp.internal"),
            ("CONFIG_LEADERELECTION_NAME", ""),
            ("CONFIG_LOGGING_NAME", "my-logging"),
        ])
        .unwrap();
        assert_eq!(
            e.pod_name.as_deref(),
            Some("host-1"),
            "POD_NAME falls back to HOSTNAME"
        );
        assert_eq!(e.cluster_domain.as_deref(), Some("corp.internal"));
        assert_eq!(e.config_leader_election_name, "config-leader-election");
        assert_eq!(e.config_logging_name, "my-logging");
        assert!(matches!(
            env(&[("SYSTEM_NAMESPACE", "  ")]),
            Err(MainError::MissingSystemNamespace)
        ));
    }

    #[test]
    fn the_statefulset_variables_are_read_here_and_refused_with_the_fix() {
        let e = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("STATEFUL_SERVICE_NAME", "controller"),
        ])
        .unwrap();
        assert_eq!(e.stateful_set, None, "the ordinal turns the mode on");
        let e = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("STATEFUL_CONTROLLER_ORDINAL", "controller-1"),
            ("STATEFUL_SERVICE_NAME", "controller"),
            ("STATEFUL_SERVICE_PORT", "8080"),
        ])
        .unwrap();
        let pod = e.stateful_set.unwrap();
        assert_eq!(
            (
                pod.stateful_set.as_str(),
                pod.ordinal,
                pod.port,
                pod.protocol.as_str()
            ),
            ("controller", 1, 8080, "http")
        );
        let err = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("STATEFUL_CONTROLLER_ORDINAL", "controller-one"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("STATEFUL_CONTROLLER_ORDINAL=\"controller-one\" is not a StatefulSet pod's name"),
            "{err}"
        );
        let err = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("STATEFUL_CONTROLLER_ORDINAL", "controller-0"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with(
                "STATEFUL_SERVICE_NAME is not set, but STATEFUL_CONTROLLER_ORDINAL=\"controller-0\""
            ),
            "{err}"
        );
    }

    #[test]
    fn bad_numbers_are_rejected_with_the_fix() {
        let err = env(&[("SYSTEM_NAMESPACE", "ns"), ("K_THREADS_PER_CONTROLLER", "many")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "K_THREADS_PER_CONTROLLER=\"many\" is not valid: expected a positive whole number of workers per controller, such as 2"
        );
        let err = env(&[("SYSTEM_NAMESPACE", "ns"), ("METRICS_PROMETHEUS_PORT", "99999")]).unwrap_err();
        assert!(err.to_string().contains("TCP port"), "{err}");
    }
}
