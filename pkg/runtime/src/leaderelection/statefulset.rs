//! StatefulSet-ordinal mode (Knative's `statefulSetConfig` and
//! `NewStatefulSetBucketAndSet`): the pods of a StatefulSet with as many
//! replicas as buckets each own the bucket of their ordinal, without Leases.

use std::fmt;

use super::config::{CONFIG_MAP_NAME, MAX_BUCKETS};
use super::hash::{BucketSet, HashBucket};
use crate::apis::validation::is_dns1035_label;

/// The pod's name, `<statefulset>-<ordinal>`; setting it turns the mode on.
pub const ORDINAL_ENV: &str = "STATEFUL_CONTROLLER_ORDINAL";
/// The StatefulSet's `spec.serviceName`; required in the mode.
pub const SERVICE_NAME_ENV: &str = "STATEFUL_SERVICE_NAME";
/// The Service's port in the bucket names (default 80).
pub const SERVICE_PORT_ENV: &str = "STATEFUL_SERVICE_PORT";
/// The scheme in the bucket names (default `http`).
pub const SERVICE_PROTOCOL_ENV: &str = "STATEFUL_SERVICE_PROTOCOL";

/// Where a pod stands in its StatefulSet, from the `STATEFUL_*` variables.
///
/// Knative names the buckets after the pods' DNS names,
/// `<protocol>://<statefulset>-<i>.<service>.<namespace>.svc.<cluster domain>:<port>`,
/// so a key hashes to the same ordinal here as in a Knative controller; the
/// pod with ordinal `i` owns bucket `i` and no other, and every controller of
/// the process owns that same bucket.
///
/// ```
/// use kinject_runtime::leaderelection::StatefulSetConfig;
///
/// let env = |name: &str| match name {
///     "STATEFUL_CONTROLLER_ORDINAL" => Some("controller-1".to_owned()),
///     "STATEFUL_SERVICE_NAME" => Some("controller".to_owned()),
///     _ => None,
/// };
/// let pod = StatefulSetConfig::from_lookup(env)?.expect("the mode is on");
/// assert_eq!((pod.stateful_set.as_str(), pod.ordinal), ("controller", 1));
/// let bucket = pod.own_bucket(2, "knative-samples", "cluster.local")?;
/// assert_eq!(
///     kinject_runtime::leader::Bucket::name(&bucket),
///     "http://controller-1.controller.knative-samples.svc.cluster.local:80"
/// );
/// assert!(pod.own_bucket(1, "knative-samples", "cluster.local").is_err(), "ordinal 1 needs 2 buckets");
/// # Ok::<(), kinject_runtime::leaderelection::StatefulSetError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatefulSetConfig {
    /// The pod's name, as `STATEFUL_CONTROLLER_ORDINAL` gave it.
    pub pod_name: String,
    /// The StatefulSet's name: the pod's name before its last `-`.
    pub stateful_set: String,
    /// The pod's ordinal: the pod's name after its last `-`.
    pub ordinal: u32,
    /// `STATEFUL_SERVICE_NAME`.
    pub service_name: String,
    /// `STATEFUL_SERVICE_PORT` (default 80).
    pub port: u16,
    /// `STATEFUL_SERVICE_PROTOCOL` (default `http`).
    pub protocol: String,
}

impl StatefulSetConfig {
    /// Reads the `STATEFUL_*` variables through `lookup` (an empty one counts
    /// as unset): `None` when `STATEFUL_CONTROLLER_ORDINAL` is unset, an error
    /// naming the variable, its value and the fix when one cannot be used.
    ///
    /// Knative falls back to Lease elections when these are wrong; a pod of a
    /// StatefulSet meant to own one bucket would then compete for all of them,
    /// so here the process refuses to start instead.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, StatefulSetError> {
        let lookup = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let Some(pod_name) = lookup(ORDINAL_ENV) else {
            return Ok(None);
        };
        let (stateful_set, ordinal) = parse_pod_name(&pod_name).map(|(s, o)| (s.to_owned(), o))?;
        let service_name = lookup(SERVICE_NAME_ENV).ok_or_else(|| StatefulSetError::MissingServiceName {
            pod_name: pod_name.clone(),
        })?;
        let problems = is_dns1035_label(&service_name);
        if !problems.is_empty() {
            return Err(StatefulSetError::InvalidServiceName {
                value: service_name,
                problems,
            });
        }
        let port = match lookup(SERVICE_PORT_ENV) {
            None => 80,
            Some(value) => match value.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(StatefulSetError::InvalidPort { value }),
            },
        };
        let protocol = lookup(SERVICE_PROTOCOL_ENV).unwrap_or_else(|| "http".to_owned());
        Ok(Some(StatefulSetConfig {
            pod_name,
            stateful_set,
            ordinal,
            service_name,
            port,
            protocol,
        }))
    }

    /// The name of bucket `ordinal`: the DNS name of the StatefulSet's pod
    /// `ordinal` in `namespace`, as Knative names it.
    pub fn bucket_name(&self, ordinal: u32, namespace: &str, cluster_domain: &str) -> String {
        format!(
            "{}://{}-{ordinal}.{}.{namespace}.svc.{cluster_domain}:{}",
            self.protocol, self.stateful_set, self.service_name, self.port
        )
    }

    /// The buckets of `buckets` pods in `namespace` (every controller's: the
    /// names do not depend on the controller), as [`HashBucket::set`], and
    /// this pod's among them. Fails when the ordinal is not below `buckets`.
    pub fn own_bucket(
        &self,
        buckets: u32,
        namespace: &str,
        cluster_domain: &str,
    ) -> Result<HashBucket, StatefulSetError> {
        let out_of_range = || StatefulSetError::OrdinalOutOfRange {
            pod_name: self.pod_name.clone(),
            ordinal: self.ordinal,
            buckets,
        };
        if self.ordinal >= buckets {
            return Err(out_of_range());
        }
        let set = BucketSet::new((0..buckets).map(|i| self.bucket_name(i, namespace, cluster_domain)));
        set.bucket(&self.bucket_name(self.ordinal, namespace, cluster_domain))
            .ok_or_else(out_of_range)
    }
}

/// Splits a StatefulSet pod's name into the StatefulSet's name and the
/// ordinal, at the last `-` as Knative does (`controller-2`: `controller`, 2).
pub fn parse_pod_name(pod_name: &str) -> Result<(&str, u32), StatefulSetError> {
    let not_a_pod_name = || StatefulSetError::NotAPodName {
        value: pod_name.to_owned(),
    };
    let (stateful_set, ordinal) = pod_name.rsplit_once('-').ok_or_else(not_a_pod_name)?;
    if stateful_set.is_empty() || ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_a_pod_name());
    }
    let ordinal = ordinal.parse::<u32>().map_err(|_| not_a_pod_name())?;
    Ok((stateful_set, ordinal))
}

/// Why the `STATEFUL_*` variables cannot be used. The message names the
/// variable, its value and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StatefulSetError {
    /// `STATEFUL_CONTROLLER_ORDINAL` does not end in `-<number>`.
    NotAPodName {
        /// The variable's value.
        value: String,
    },
    /// The ordinal is not below the bucket count.
    OrdinalOutOfRange {
        /// `STATEFUL_CONTROLLER_ORDINAL`'s value.
        pod_name: String,
        /// The ordinal in it.
        ordinal: u32,
        /// The bucket count of `config-leader-election`.
        buckets: u32,
    },
    /// `STATEFUL_CONTROLLER_ORDINAL` is set, `STATEFUL_SERVICE_NAME` is not.
    MissingServiceName {
        /// `STATEFUL_CONTROLLER_ORDINAL`'s value.
        pod_name: String,
    },
    /// `STATEFUL_SERVICE_NAME` is not a Service's name.
    InvalidServiceName {
        /// The variable's value.
        value: String,
        /// What is wrong with it, in apimachinery's words.
        problems: Vec<String>,
    },
    /// `STATEFUL_SERVICE_PORT` is not a port number.
    InvalidPort {
        /// The variable's value.
        value: String,
    },
}

impl fmt::Display for StatefulSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatefulSetError::NotAPodName { value } => write!(
                f,
                "{ORDINAL_ENV}={value:?} is not a StatefulSet pod's name: expected <statefulset>-<ordinal>, \
                 such as controller-0; set it from the downward API (valueFrom: fieldRef: fieldPath: \
                 metadata.name), or unset it to elect leaders with Leases"
            ),
            StatefulSetError::OrdinalOutOfRange {
                pod_name,
                ordinal,
                buckets,
            } => {
                write!(
                    f,
                    "{ORDINAL_ENV}={pod_name:?} is not valid: ordinal {ordinal} is out of range [0, {buckets}), \
                     as each pod of the StatefulSet owns the bucket of its ordinal; run {buckets} replicas \
                     (spec.replicas: {buckets})"
                )?;
                if *ordinal < MAX_BUCKETS {
                    write!(
                        f,
                        " or set buckets to {} in the {CONFIG_MAP_NAME} ConfigMap",
                        ordinal + 1
                    )
                } else {
                    write!(f, "; there are at most {MAX_BUCKETS} buckets")
                }
            }
            StatefulSetError::MissingServiceName { pod_name } => write!(
                f,
                "{SERVICE_NAME_ENV} is not set, but {ORDINAL_ENV}={pod_name:?} is: set it to the StatefulSet's \
                 spec.serviceName (its headless Service), or unset {ORDINAL_ENV} to elect leaders with Leases"
            ),
            StatefulSetError::InvalidServiceName { value, problems } => write!(
                f,
                "{SERVICE_NAME_ENV}={value:?} is not valid: {}; set it to the StatefulSet's spec.serviceName",
                problems.join("; ")
            ),
            StatefulSetError::InvalidPort { value } => write!(
                f,
                "{SERVICE_PORT_ENV}={value:?} is not valid: expected the Service's port number, 1 to 65535, \
                 or unset it for 80"
            ),
        }
    }
}

impl std::error::Error for StatefulSetError {}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::key::ObjectKey;
    use crate::leader::Bucket;

    fn read(pairs: &[(&str, &str)]) -> Result<Option<StatefulSetConfig>, StatefulSetError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        StatefulSetConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn the_mode_is_off_unless_the_ordinal_is_set() {
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(
            read(&[(ORDINAL_ENV, " "), (SERVICE_NAME_ENV, "controller")]),
            Ok(None)
        );
    }

    #[test]
    fn the_ordinal_is_the_pod_names_suffix_and_the_rest_defaults_as_knative() {
        let pod = read(&[(ORDINAL_ENV, "my-controller-12"), (SERVICE_NAME_ENV, "ctl")])
            .unwrap()
            .unwrap();
        assert_eq!(
            pod,
            StatefulSetConfig {
                pod_name: "my-controller-12".into(),
                stateful_set: "my-controller".into(),
                ordinal: 12,
                service_name: "ctl".into(),
                port: 80,
                protocol: "http".into(),
            }
        );
        let pod = read(&[
            (ORDINAL_ENV, "controller-0"),
            (SERVICE_NAME_ENV, "controller"),
            (SERVICE_PORT_ENV, "9090"),
            (SERVICE_PROTOCOL_ENV, "https"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            pod.bucket_name(3, "knative-samples", "corp.internal"),
            "https://controller-3.controller.knative-samples.svc.corp.internal:9090"
        );
    }

    #[test]
    fn an_ordinal_that_is_not_a_number_names_the_variable_and_the_fix() {
        for value in [
            "controller",
            "controller-",
            "controller-x",
            "-3",
            "controller-+1",
            "controller--1x",
        ] {
            let err = read(&[(ORDINAL_ENV, value), (SERVICE_NAME_ENV, "controller")]).unwrap_err();
            assert_eq!(
                err,
                StatefulSetError::NotAPodName {
                    value: value.to_owned()
                }
            );
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("STATEFUL_CONTROLLER_ORDINAL={value:?} is not")),
                "{message}"
            );
            assert!(message.contains("fieldPath: metadata.name"), "{message}");
        }
        assert_eq!(parse_pod_name("a--1"), Ok(("a-", 1)));
    }

    #[test]
    fn the_service_name_is_required_and_must_be_a_services_name() {
        let err = read(&[(ORDINAL_ENV, "controller-0")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "STATEFUL_SERVICE_NAME is not set, but STATEFUL_CONTROLLER_ORDINAL=\"controller-0\" is: set it \
             to the StatefulSet's spec.serviceName (its headless Service), or unset \
             STATEFUL_CONTROLLER_ORDINAL to elect leaders with Leases"
        );
        let err = read(&[
            (ORDINAL_ENV, "controller-0"),
            (SERVICE_NAME_ENV, "Controller.svc"),
        ])
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("STATEFUL_SERVICE_NAME=\"Controller.svc\" is not valid: "),
            "{err}"
        );
    }

    #[test]
    fn a_port_must_be_a_port_number() {
        for value in ["http", "0", "65536"] {
            let err = read(&[
                (ORDINAL_ENV, "controller-0"),
                (SERVICE_NAME_ENV, "controller"),
                (SERVICE_PORT_ENV, value),
            ])
            .unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "STATEFUL_SERVICE_PORT={value:?} is not valid: expected the Service's port number, \
                     1 to 65535, or unset it for 80"
                )
            );
        }
    }

    #[test]
    fn an_ordinal_must_be_below_the_bucket_count() {
        let pod = |name: &str| {
            read(&[(ORDINAL_ENV, name), (SERVICE_NAME_ENV, "controller")])
                .unwrap()
                .unwrap()
        };
        let err = pod("controller-2")
            .own_bucket(2, "ns", "cluster.local")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "STATEFUL_CONTROLLER_ORDINAL=\"controller-2\" is not valid: ordinal 2 is out of range [0, 2), as \
             each pod of the StatefulSet owns the bucket of its ordinal; run 2 replicas (spec.replicas: 2) \
             or set buckets to 3 in the config-leader-election ConfigMap"
        );
        let err = pod("controller-10")
            .own_bucket(10, "ns", "cluster.local")
            .unwrap_err();
        assert!(
            err.to_string().ends_with("; there are at most 10 buckets"),
            "{err}"
        );
        let own = pod("controller-1").own_bucket(2, "ns", "cluster.local").unwrap();
        assert_eq!(
            own.name(),
            "http://controller-1.controller.ns.svc.cluster.local:80"
        );
        assert_eq!(own.set().names().len(), 2);
    }

    /// The pods of one StatefulSet build the same set, and each owns the
    /// keys the set assigns to its ordinal's name.
    #[test]
    fn each_pod_owns_its_ordinals_share_of_the_keys() {
        let buckets = 3;
        let owned: Vec<HashBucket> = (0..buckets)
            .map(|i| {
                read(&[
                    (ORDINAL_ENV, &format!("controller-{i}")),
                    (SERVICE_NAME_ENV, "controller"),
                ])
                .unwrap()
                .unwrap()
                .own_bucket(buckets, "ns", "cluster.local")
                .unwrap()
            })
            .collect();
        for i in 0..100 {
            let key = ObjectKey::new("ns", format!("obj-{i}"));
            let owners: Vec<usize> = (0..owned.len()).filter(|&p| owned[p].has(&key)).collect();
            assert_eq!(owners.len(), 1, "{key} is owned by {owners:?}");
            assert_eq!(
                owned[owners[0]].set().owner_of(&key),
                Some(owned[owners[0]].name())
            );
        }
    }
}
