//! The `config-leader-election` ConfigMap: bucket count, lease timings and
//! lease-name prefixes, with Knative's keys, defaults and error messages.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;

use super::hash::BucketSet;
use crate::apis::go_quote;
use crate::duration::{parse_go_duration, signed_go_duration};

/// The default name of the leader-election ConfigMap in the system namespace.
pub const CONFIG_MAP_NAME: &str = "config-leader-election";

/// Environment variable that overrides [`CONFIG_MAP_NAME`].
pub const CONFIG_MAP_NAME_ENV: &str = "CONFIG_LEADERELECTION_NAME";

/// The most buckets a reconciler's keys may be split into.
pub const MAX_BUCKETS: u32 = 10;

/// Buckets when the ConfigMap does not say.
pub const DEFAULT_BUCKETS: u32 = 1;

/// How long a lease stays valid after its holder last renewed it, when the
/// ConfigMap does not say.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(60);

/// How long a leader keeps retrying a renewal before it gives up leading, when
/// the ConfigMap does not say.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(40);

/// How long electors wait between attempts, when the ConfigMap does not say.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(10);

/// client-go's `JitterFactor`: a candidate waits between `retryPeriod` and
/// `retryPeriod × (1 + JITTER_FACTOR)` between acquisition attempts, and the
/// renew deadline must exceed `retryPeriod × JITTER_FACTOR`.
pub const JITTER_FACTOR: f64 = 1.2;

/// Prefix of the keys that rename lease-name prefixes
/// (`map-lease-prefix.<component>.<queue>: <new prefix>`).
const MAP_LEASE_PREFIX: &str = "map-lease-prefix";

/// Leader-election settings for the components of one system namespace
/// (Knative's `leaderelection.Config`), read from the `config-leader-election`
/// ConfigMap with [`Config::from_map`].
///
/// ```
/// use std::collections::BTreeMap;
/// use std::time::Duration;
/// use kinject_runtime::leaderelection::Config;
///
/// let data = BTreeMap::from([
///     ("buckets".to_owned(), "3".to_owned()),
///     ("lease-duration".to_owned(), "15s".to_owned()),
///     ("renew-deadline".to_owned(), "10s".to_owned()),
///     ("retry-period".to_owned(), "2s".to_owned()),
/// ]);
/// let config = Config::from_map(&data).unwrap();
/// assert_eq!(config.buckets, 3);
/// assert_eq!(config.lease_duration, Duration::from_secs(15));
///
/// let err = Config::from_map(&BTreeMap::from([("buckets".to_owned(), "11".to_owned())])).unwrap_err();
/// assert_eq!(err.to_string(), "buckets: value must be between 1 and 10, got 11");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// How many buckets (and leases) each reconciler's keys are split into.
    pub buckets: u32,
    /// How long a lease stays valid after its last renewal; candidates wait
    /// this long, measured from when they last saw the lease change, before
    /// taking it over.
    pub lease_duration: Duration,
    /// How long a leader keeps retrying a failing renewal before it stops
    /// leading.
    pub renew_deadline: Duration,
    /// How long electors wait between attempts.
    pub retry_period: Duration,
    /// Lease-name prefixes to replace: `<component>.<queue>` → new prefix.
    pub lease_names_prefix_mapping: BTreeMap<String, String>,
}

impl Default for Config {
    /// Knative's defaults: 1 bucket, 60s lease, 40s renew deadline, 10s retry
    /// period, no prefix mapping.
    fn default() -> Self {
        Config {
            buckets: DEFAULT_BUCKETS,
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            lease_names_prefix_mapping: BTreeMap::new(),
        }
    }
}

impl Config {
    /// Reads the ConfigMap's data. Absent keys keep their defaults.
    ///
    /// Keys: `lease-duration`, `renew-deadline`, `retry-period` (Go durations
    /// such as `15s`, `1m30s`, `500ms`; the camel-case `leaseDuration`,
    /// `renewDeadline`, `retryPeriod` are read too, and the dashed key wins
    /// when both are set), `buckets` (1 to [`MAX_BUCKETS`]) and
    /// `map-lease-prefix.<component>.<queue>` (a replacement for that lease-name
    /// prefix). Other keys are ignored.
    ///
    /// Besides Knative's own checks, the timings must satisfy the rules
    /// client-go's `NewLeaderElector` enforces (Knative applies them only when
    /// a controller starts electing), plus `lease-duration` ≥ 1s: the Lease
    /// records its duration in whole seconds, so a shorter one would read as
    /// already expired and the buckets would change hands on every attempt.
    pub fn from_map(data: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        // Signed nanoseconds, as Go's time.Duration: negative values parse and
        // are rejected by the timing rules below, with client-go's messages.
        let mut lease = nanos(DEFAULT_LEASE_DURATION);
        let mut renew = nanos(DEFAULT_RENEW_DEADLINE);
        let mut retry = nanos(DEFAULT_RETRY_PERIOD);
        // Legacy keys first, so the dashed ones win.
        for (key, target) in [
            ("leaseDuration", &mut lease),
            ("renewDeadline", &mut renew),
            ("retryPeriod", &mut retry),
        ] {
            parse_duration_key(data, key, target)?;
        }
        for (key, target) in [
            ("lease-duration", &mut lease),
            ("renew-deadline", &mut renew),
            ("retry-period", &mut retry),
        ] {
            parse_duration_key(data, key, target)?;
        }

        let mut buckets = DEFAULT_BUCKETS;
        if let Some(raw) = data.get("buckets") {
            buckets = parse_uint32(raw).map_err(|reason| ConfigError::parse("buckets", raw, reason))?;
        }

        let lease_names_prefix_mapping = data
            .iter()
            .filter_map(|(key, value)| {
                let rest = key.strip_prefix(MAP_LEASE_PREFIX)?.strip_prefix('.')?;
                (!rest.is_empty()).then(|| (rest.to_owned(), value.clone()))
            })
            .collect();

        check_buckets(buckets)?;
        // Errors name each key as the ConfigMap spells it.
        let spelled = |dashed: &'static str, camel: &'static str| {
            if !data.contains_key(dashed) && data.contains_key(camel) {
                camel
            } else {
                dashed
            }
        };
        let keys = TimingKeys {
            lease: spelled("lease-duration", "leaseDuration"),
            renew: spelled("renew-deadline", "renewDeadline"),
            retry: spelled("retry-period", "retryPeriod"),
        };
        check_timings(lease, renew, retry, &keys)?;
        Ok(Config {
            buckets,
            lease_duration: from_nanos(lease),
            renew_deadline: from_nanos(renew),
            retry_period: from_nanos(retry),
            lease_names_prefix_mapping,
        })
    }

    /// Reads a fetched ConfigMap; `None` (it does not exist) gives the defaults,
    /// as does a ConfigMap without data.
    pub fn from_config_map(config_map: Option<&ConfigMap>) -> Result<Self, ConfigError> {
        match config_map.and_then(|cm| cm.data.as_ref()) {
            Some(data) => Self::from_map(data),
            None => Ok(Self::default()),
        }
    }

    /// The settings for one component (the process's name, e.g. `controller`),
    /// whose leases are named after it.
    pub fn component_config(&self, component: impl Into<String>) -> ComponentConfig {
        ComponentConfig {
            component: component.into(),
            buckets: self.buckets,
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            lease_names_prefix_mapping: self.lease_names_prefix_mapping.clone(),
        }
    }
}

/// Leader-election settings for one component (Knative's
/// `leaderelection.ComponentConfig`): what [`spawn_electors`] runs with.
///
/// [`spawn_electors`]: super::spawn_electors
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentConfig {
    /// The component (process) name: the first part of every lease name.
    pub component: String,
    /// See [`Config::buckets`].
    pub buckets: u32,
    /// See [`Config::lease_duration`].
    pub lease_duration: Duration,
    /// See [`Config::renew_deadline`].
    pub renew_deadline: Duration,
    /// See [`Config::retry_period`].
    pub retry_period: Duration,
    /// See [`Config::lease_names_prefix_mapping`].
    pub lease_names_prefix_mapping: BTreeMap<String, String>,
}

impl ComponentConfig {
    /// The default [`Config`] for `component`.
    pub fn new(component: impl Into<String>) -> Self {
        Config::default().component_config(component)
    }

    /// Checks the bucket count and timings as [`Config::from_map`] does, for a
    /// config built or changed by hand.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_buckets(self.buckets)?;
        check_timings(
            nanos(self.lease_duration),
            nanos(self.renew_deadline),
            nanos(self.retry_period),
            &TimingKeys::default(),
        )
    }

    /// The lease name of bucket `ordinal` of the reconciler whose queue is
    /// `queue`: `<component>.<queue>.NN-of-MM`, lowercased, with
    /// `<component>.<queue>` replaced when `map-lease-prefix` maps it to a
    /// non-empty prefix.
    ///
    /// ```
    /// use kinject_runtime::leaderelection::ComponentConfig;
    /// let mut config = ComponentConfig::new("controller");
    /// config.buckets = 3;
    /// assert_eq!(config.lease_name("AddressableService", 1), "controller.addressableservice.01-of-03");
    /// ```
    ///
    /// A derived prefix is made a valid lease name, as Knative's Go package
    /// paths always are and Rust paths are not: characters a DNS subdomain
    /// cannot hold (`_` of a module `pod_ips`, the `<>` of a generic
    /// reconciler) become `-`, and a name past 253 characters is cut and
    /// ends with a hash of the whole, so two long names stay apart. A prefix
    /// from `map-lease-prefix` is the operator's own and is used as given.
    ///
    /// ```
    /// use kinject_runtime::leaderelection::ComponentConfig;
    /// let config = ComponentConfig::new("controller");
    /// assert_eq!(
    ///     config.lease_name("reconcilers.pod_ips.Reconciler", 0),
    ///     "controller.reconcilers.pod-ips.reconciler.00-of-01"
    /// );
    /// ```
    pub fn lease_name(&self, queue: &str, ordinal: u32) -> String {
        let prefix = format!("{}.{}", self.component, queue);
        let suffix = format!(".{ordinal:02}-of-{:02}", self.buckets);
        match self
            .lease_names_prefix_mapping
            .get(&prefix)
            .filter(|p| !p.is_empty())
        {
            Some(mapped) => format!("{mapped}{suffix}").to_lowercase(),
            None => format!(
                "{}{suffix}",
                subdomain_prefix(&prefix, MAX_LEASE_NAME - suffix.len())
            ),
        }
    }

    /// The buckets of the reconciler whose queue is `queue`, one per lease name.
    pub fn bucket_set(&self, queue: &str) -> BucketSet {
        BucketSet::new((0..self.buckets).map(|i| self.lease_name(queue, i)))
    }
}

/// The longest name an object (a Lease among them) can have.
const MAX_LEASE_NAME: usize = 253;

/// `prefix` lowercased as a DNS subdomain of at most `max` characters: in each
/// dot-separated part, every character other than `a-z`, `0-9` and `-` becomes
/// `-`, a part neither starts nor ends with `-`, and empty parts go.
fn subdomain_prefix(prefix: &str, max: usize) -> String {
    let parts: Vec<String> = prefix
        .to_lowercase()
        .split('.')
        .map(|part| {
            let dashed: String = part
                .chars()
                .map(|c| {
                    if c.is_ascii_lowercase() || c.is_ascii_digit() {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            dashed.trim_matches('-').to_owned()
        })
        .filter(|part| !part.is_empty())
        .collect();
    let joined = parts.join(".");
    if joined.len() <= max {
        return joined;
    }
    // Cut, keep the cut's end valid, and tell long names apart by a hash of
    // the whole (FNV-1a: stable across builds, which std's hasher is not).
    let hash = prefix.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let tag = format!("-{hash:08x}");
    let cut = joined[..max - tag.len()].trim_end_matches(['-', '.']);
    format!("{cut}{tag}")
}

/// A leader-election setting that cannot be used.
///
/// Its `Display` is Knative's (or client-go's) message, word for word; the
/// alternate form (`{:#}`) appends [`hint`](Self::hint), how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    key: &'static str,
    message: String,
    hint: String,
}

impl ConfigError {
    fn new(key: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        ConfigError {
            key,
            message: message.into(),
            hint: hint.into(),
        }
    }

    fn parse(key: &'static str, raw: &str, reason: String) -> Self {
        let hint = if key == "buckets" {
            format!(
                "set buckets to a whole number from 1 to {MAX_BUCKETS} (it is {})",
                go_quote(raw)
            )
        } else {
            format!(
                "set {key} to a Go duration such as \"15s\", \"1m30s\" or \"500ms\" (units ns, us, ms, s, m, h; \
                 it is {})",
                go_quote(raw)
            )
        };
        Self::new(key, format!("failed to parse {}: {reason}", go_quote(key)), hint)
    }

    /// The ConfigMap key at fault (`buckets`, `leaseDuration`, `lease-duration`,
    /// …; `leaseDuration`, `renewDeadline` or `retryPeriod` for timing rules).
    pub fn key(&self) -> &str {
        self.key
    }

    /// How to fix it, in a sentence.
    pub fn hint(&self) -> &str {
        &self.hint
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if f.alternate() {
            write!(f, " ({})", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

fn check_buckets(buckets: u32) -> Result<(), ConfigError> {
    if (1..=MAX_BUCKETS).contains(&buckets) {
        return Ok(());
    }
    Err(ConfigError::new(
        "buckets",
        format!("buckets: value must be between 1 and {MAX_BUCKETS}, got {buckets}"),
        format!("set buckets in the {CONFIG_MAP_NAME} ConfigMap to a whole number from 1 to {MAX_BUCKETS}"),
    ))
}

/// The keys a ConfigMap gave the three timings under: dashed, or the
/// camel-case ones Knative reads too.
#[derive(Clone, Copy)]
struct TimingKeys {
    lease: &'static str,
    renew: &'static str,
    retry: &'static str,
}

impl Default for TimingKeys {
    fn default() -> Self {
        TimingKeys {
            lease: "lease-duration",
            renew: "renew-deadline",
            retry: "retry-period",
        }
    }
}

/// client-go's `NewLeaderElector` checks, in its order, then ours; each
/// error names the keys as the ConfigMap spells them.
fn check_timings(lease: i128, renew: i128, retry: i128, keys: &TimingKeys) -> Result<(), ConfigError> {
    let (l, r, p) = (
        signed_go_duration(lease),
        signed_go_duration(renew),
        signed_go_duration(retry),
    );
    let TimingKeys {
        lease: lease_key,
        renew: renew_key,
        retry: retry_key,
    } = *keys;
    if lease <= renew {
        return Err(ConfigError::new(
            lease_key,
            format!("{lease_key} ({l}) must be longer than {renew_key} ({r})"),
            format!(
                "make {lease_key} longer than {renew_key}, so that a leader that cannot renew stops \
                 leading before its lease expires for the others (defaults: 60s and 40s)"
            ),
        ));
    }
    // Go converts the product back to a Duration, truncating toward zero.
    let jittered = (JITTER_FACTOR * retry as f64) as i128;
    if renew <= jittered {
        return Err(ConfigError::new(
            renew_key,
            format!(
                "{renew_key} ({r}) must be longer than {JITTER_FACTOR} × {retry_key} ({p}) = {}",
                signed_go_duration(jittered)
            ),
            format!("make {renew_key} longer, or shorten {retry_key} (defaults: 40s and 10s)"),
        ));
    }
    for (key, value) in [(lease_key, lease), (renew_key, renew), (retry_key, retry)] {
        if value < 1 {
            return Err(ConfigError::new(
                key,
                format!(
                    "{key} must be greater than zero, got {}",
                    signed_go_duration(value)
                ),
                format!("set {key} to a positive duration such as \"10s\""),
            ));
        }
    }
    if lease < 1_000_000_000 {
        return Err(ConfigError::new(
            lease_key,
            format!("{lease_key} must be at least 1s, got {l}"),
            format!(
                "set {lease_key} to 1s or more: the Lease stores whole seconds, so a shorter lease would \
                 read as expired at once and buckets would change hands on every attempt"
            ),
        ));
    }
    Ok(())
}

fn parse_duration_key(
    data: &BTreeMap<String, String>,
    key: &'static str,
    target: &mut i128,
) -> Result<(), ConfigError> {
    if let Some(raw) = data.get(key) {
        *target = parse_go_duration(raw).map_err(|reason| ConfigError::parse(key, raw, reason))?;
    }
    Ok(())
}

fn nanos(d: Duration) -> i128 {
    i128::try_from(d.as_nanos()).unwrap_or(i128::MAX)
}

/// Only called after the timing checks, which reject values below one second.
fn from_nanos(n: i128) -> Duration {
    let n = u128::try_from(n).unwrap_or(0);
    Duration::new(
        u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX),
        u32::try_from(n % 1_000_000_000).unwrap_or(0),
    )
}

/// Go's `strconv.ParseUint(s, 10, 32)`, with its error text.
fn parse_uint32(s: &str) -> Result<u32, String> {
    let syntax = || format!("strconv.ParseUint: parsing {}: invalid syntax", go_quote(s));
    if s.is_empty() {
        return Err(syntax());
    }
    let mut n: u64 = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            return Err(syntax());
        }
        n = n * 10 + u64::from(b - b'0');
        if n > u64::from(u32::MAX) {
            return Err(format!(
                "strconv.ParseUint: parsing {}: value out of range",
                go_quote(s)
            ));
        }
    }
    u32::try_from(n).map_err(|_| syntax())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn err(pairs: &[(&str, &str)]) -> ConfigError {
        match Config::from_map(&map(pairs)) {
            Ok(config) => panic!("{pairs:?} parsed: {config:?}"),
            Err(err) => err,
        }
    }

    #[test]
    fn defaults_when_missing_or_empty() {
        let want = Config {
            buckets: 1,
            lease_duration: Duration::from_secs(60),
            renew_deadline: Duration::from_secs(40),
            retry_period: Duration::from_secs(10),
            lease_names_prefix_mapping: BTreeMap::new(),
        };
        assert_eq!(Config::default(), want);
        assert_eq!(Config::from_map(&BTreeMap::new()).unwrap(), want);
        assert_eq!(Config::from_config_map(None).unwrap(), want);
        assert_eq!(
            Config::from_config_map(Some(&ConfigMap::default())).unwrap(),
            want
        );
        assert_eq!(
            Config::from_map(&map(&[("unrelated", "x"), ("_example", "long text")])).unwrap(),
            want
        );
    }

    #[test]
    fn every_key() {
        let config = Config::from_map(&map(&[
            ("buckets", "5"),
            ("lease-duration", "2m"),
            ("renew-deadline", "1m30s"),
            ("retry-period", "500ms"),
            ("map-lease-prefix.controller.AddressableService", "ctl.as"),
            ("map-lease-prefix.controller.other", ""),
        ]))
        .unwrap();
        assert_eq!(config.buckets, 5);
        assert_eq!(config.lease_duration, Duration::from_secs(120));
        assert_eq!(config.renew_deadline, Duration::from_secs(90));
        assert_eq!(config.retry_period, Duration::from_millis(500));
        assert_eq!(
            config.lease_names_prefix_mapping,
            map(&[
                ("controller.AddressableService", "ctl.as"),
                ("controller.other", "")
            ])
        );
    }

    #[test]
    fn legacy_keys_and_the_dashed_ones_win() {
        let config = Config::from_map(&map(&[
            ("leaseDuration", "30s"),
            ("renewDeadline", "20s"),
            ("retryPeriod", "4s"),
        ]))
        .unwrap();
        assert_eq!(
            (config.lease_duration, config.renew_deadline, config.retry_period),
            (
                Duration::from_secs(30),
                Duration::from_secs(20),
                Duration::from_secs(4)
            )
        );
        let config = Config::from_map(&map(&[
            ("leaseDuration", "30s"),
            ("lease-duration", "45s"),
            ("renewDeadline", "20s"),
            ("renew-deadline", "25s"),
            ("retryPeriod", "4s"),
            ("retry-period", "5s"),
        ]))
        .unwrap();
        assert_eq!(
            (config.lease_duration, config.renew_deadline, config.retry_period),
            (
                Duration::from_secs(45),
                Duration::from_secs(25),
                Duration::from_secs(5)
            )
        );
        // A bad legacy value is an error even when the dashed key is set, as in Knative.
        assert_eq!(
            err(&[("leaseDuration", "soon"), ("lease-duration", "45s")]).to_string(),
            "failed to parse \"leaseDuration\": time: invalid duration \"soon\""
        );
    }

    #[test]
    fn map_lease_prefix_needs_the_dot_and_a_name() {
        let config = Config::from_map(&map(&[
            ("map-lease-prefix", "a"),
            ("map-lease-prefix.", "b"),
            ("map-lease-prefixes.x", "c"),
            ("map-lease-prefix.x", "d"),
        ]))
        .unwrap();
        assert_eq!(config.lease_names_prefix_mapping, map(&[("x", "d")]));
    }

    #[test]
    fn bucket_messages() {
        for (value, message) in [
            ("0", "buckets: value must be between 1 and 10, got 0"),
            ("11", "buckets: value must be between 1 and 10, got 11"),
            (
                "4294967295",
                "buckets: value must be between 1 and 10, got 4294967295",
            ),
            (
                "4294967296",
                "failed to parse \"buckets\": strconv.ParseUint: parsing \"4294967296\": value out of range",
            ),
            (
                "two",
                "failed to parse \"buckets\": strconv.ParseUint: parsing \"two\": invalid syntax",
            ),
            (
                "-1",
                "failed to parse \"buckets\": strconv.ParseUint: parsing \"-1\": invalid syntax",
            ),
            (
                "+1",
                "failed to parse \"buckets\": strconv.ParseUint: parsing \"+1\": invalid syntax",
            ),
            (
                " 2",
                "failed to parse \"buckets\": strconv.ParseUint: parsing \" 2\": invalid syntax",
            ),
            (
                "",
                "failed to parse \"buckets\": strconv.ParseUint: parsing \"\": invalid syntax",
            ),
        ] {
            let e = err(&[("buckets", value)]);
            assert_eq!(e.to_string(), message, "{value:?}");
            assert_eq!(e.key(), "buckets");
            assert!(e.hint().contains("from 1 to 10"), "{}", e.hint());
        }
        for ok in ["1", "10", "007"] {
            assert!(Config::from_map(&map(&[("buckets", ok)])).is_ok(), "{ok}");
        }
    }

    #[test]
    fn duration_messages_name_the_key() {
        for key in [
            "leaseDuration",
            "renewDeadline",
            "retryPeriod",
            "lease-duration",
            "renew-deadline",
            "retry-period",
        ] {
            let e = err(&[(key, "10")]);
            assert_eq!(
                e.to_string(),
                format!("failed to parse \"{key}\": time: missing unit in duration \"10\"")
            );
            assert_eq!(e.key(), key);
            assert!(
                e.hint().starts_with(&format!("set {key} to a Go duration")),
                "{}",
                e.hint()
            );
            assert_eq!(
                format!("{e:#}"),
                format!("{e} ({})", e.hint()),
                "the alternate form carries the hint"
            );
        }
    }

    #[test]
    fn timing_messages_name_the_keys_as_the_config_map_spells_them() {
        for (pairs, key, message) in [
            (
                &[("lease-duration", "15s")][..],
                "lease-duration",
                "lease-duration (15s) must be longer than renew-deadline (40s)",
            ),
            (
                &[("renew-deadline", "60s")][..],
                "lease-duration",
                "lease-duration (1m0s) must be longer than renew-deadline (1m0s)",
            ),
            (
                &[("leaseDuration", "15s"), ("renewDeadline", "20s")][..],
                "leaseDuration",
                "leaseDuration (15s) must be longer than renewDeadline (20s)",
            ),
            (
                &[("renew-deadline", "12s")][..],
                "renew-deadline",
                "renew-deadline (12s) must be longer than 1.2 × retry-period (10s) = 12s",
            ),
            (
                &[("retryPeriod", "34s")][..],
                "renew-deadline",
                "renew-deadline (40s) must be longer than 1.2 × retryPeriod (34s) = 40.8s",
            ),
            (
                &[
                    ("lease-duration", "-1s"),
                    ("renew-deadline", "-2s"),
                    ("retry-period", "-10s"),
                ][..],
                "lease-duration",
                "lease-duration must be greater than zero, got -1s",
            ),
            (
                &[("renew-deadline", "-1s")][..],
                "renew-deadline",
                "renew-deadline (-1s) must be longer than 1.2 × retry-period (10s) = 12s",
            ),
            (
                &[("renew-deadline", "0"), ("retry-period", "-1s")][..],
                "renew-deadline",
                "renew-deadline must be greater than zero, got 0s",
            ),
            (
                &[("retry-period", "0s")][..],
                "retry-period",
                "retry-period must be greater than zero, got 0s",
            ),
            (
                &[
                    ("lease-duration", "900ms"),
                    ("renew-deadline", "500ms"),
                    ("retry-period", "100ms"),
                ][..],
                "lease-duration",
                "lease-duration must be at least 1s, got 900ms",
            ),
        ] {
            let e = err(pairs);
            assert_eq!((e.key(), e.to_string().as_str()), (key, message), "{pairs:?}");
        }
        // renewDeadline must exceed 1.2 × retryPeriod strictly.
        assert!(Config::from_map(&map(&[("renew-deadline", "12001ms")])).is_ok());
        let e = err(&[("lease-duration", "15s")]);
        assert_eq!(
            e.hint(),
            "make lease-duration longer than renew-deadline, so that a leader that cannot renew \
             stops leading before its lease expires for the others (defaults: 60s and 40s)"
        );
        let e = err(&[("renew-deadline", "12s")]);
        assert!(e.hint().contains("shorten retry-period"), "{}", e.hint());
    }

    #[test]
    fn component_config_checks_hand_made_values() {
        let mut config = ComponentConfig::new("controller");
        assert_eq!(config.validate(), Ok(()));
        config.buckets = 0;
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "buckets: value must be between 1 and 10, got 0"
        );
        config.buckets = 2;
        config.retry_period = Duration::ZERO;
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "retry-period must be greater than zero, got 0s"
        );
    }

    #[test]
    fn lease_names_from_any_rust_path_are_valid() {
        let config = Config {
            buckets: 3,
            ..Config::default()
        }
        .component_config("my_controller");
        let long = format!("reconcilers.{}.Reconciler", "very_long_module".repeat(20));
        let longer = format!("{long}2");
        for queue in [
            "reconcilers.podtoip_pods.Reconciler",
            "reconcilers._private.Reconciler",
            "reconcilers.generic.Reconciler<apis::v1::Widget, '_>",
            "reconcilers..empty__.Reconciler",
            long.as_str(),
            longer.as_str(),
        ] {
            for ordinal in 0..3 {
                let name = config.lease_name(queue, ordinal);
                let problems = crate::apis::validation::is_dns1123_subdomain(&name);
                assert!(problems.is_empty(), "{queue} gave {name}: {problems:?}");
            }
        }
        assert_eq!(
            config.lease_name("reconcilers.podtoip_pods.Reconciler", 2),
            "my-controller.reconcilers.podtoip-pods.reconciler.02-of-03"
        );
        assert_ne!(config.lease_name(&long, 0), config.lease_name(&longer, 0));
        assert_eq!(config.lease_name(&long, 0).len(), MAX_LEASE_NAME);
    }

    #[test]
    fn lease_names() {
        let mut config = Config {
            buckets: 2,
            ..Config::default()
        }
        .component_config("Controller");
        assert_eq!(
            config.lease_name("knative.dev.Sample.Reconciler", 0),
            "controller.knative.dev.sample.reconciler.00-of-02"
        );
        assert_eq!(
            config.bucket_set("q").names(),
            ["controller.q.00-of-02", "controller.q.01-of-02"]
        );
        config
            .lease_names_prefix_mapping
            .insert("Controller.q".to_owned(), "Short".to_owned());
        config
            .lease_names_prefix_mapping
            .insert("Controller.empty".to_owned(), String::new());
        assert_eq!(config.lease_name("q", 1), "short.01-of-02");
        assert_eq!(config.lease_name("empty", 1), "controller.empty.01-of-02");
        config.buckets = 10;
        assert_eq!(config.lease_name("other", 9), "controller.other.09-of-10");
    }
}
