//! Bucketed leader election (Knative's `knative.dev/pkg/leaderelection`).
//!
//! Each reconciler's keys are split into [`buckets`](Config::buckets) by
//! consistent hashing ([`BucketSet`]); each bucket is led by one replica at a
//! time. This part reads the `config-leader-election` ConfigMap ([`Config`])
//! and names and fills the buckets.

mod config;
mod hash;

pub use config::{
    CONFIG_MAP_NAME, CONFIG_MAP_NAME_ENV, ComponentConfig, Config, ConfigError, DEFAULT_BUCKETS,
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR, MAX_BUCKETS,
    config_map_name,
};
pub use hash::{BucketSet, HashBucket, choose_subset};
