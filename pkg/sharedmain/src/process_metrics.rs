//! The `process_*` metrics every Prometheus client exports (CPU time, memory,
//! file descriptors, start time), read from `/proc` at scrape time, so a
//! dashboard for any Go or Knative component shows this process too.
//! prometheus-client has no process collector; procfs reads the numbers.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Registers the process collector in `registry`.
pub(crate) fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

#[derive(Debug)]
struct ProcessCollector;

/// One scrape's readings; a reading `/proc` cannot give is left out.
#[derive(Debug, Default)]
struct Readings {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<i64>,
    virtual_bytes: Option<i64>,
    open_fds: Option<i64>,
    max_fds: Option<i64>,
    start_time_seconds: Option<f64>,
}

#[cfg(target_os = "linux")]
fn read() -> Readings {
    let Ok(me) = procfs::process::Process::myself() else {
        return Readings::default();
    };
    let ticks = procfs::ticks_per_second() as f64;
    let page = procfs::page_size();
    let stat = me.stat().ok();
    let boot = procfs::boot_time_secs().ok();
    let max_fds = me
        .limits()
        .ok()
        .and_then(|limits| match limits.max_open_files.soft_limit {
            procfs::process::LimitValue::Value(n) => i64::try_from(n).ok(),
            procfs::process::LimitValue::Unlimited => None,
        });
    Readings {
        cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / ticks),
        resident_bytes: stat.as_ref().and_then(|s| i64::try_from(s.rss * page).ok()),
        virtual_bytes: stat.as_ref().and_then(|s| i64::try_from(s.vsize).ok()),
        open_fds: me.fd_count().ok().and_then(|n| i64::try_from(n).ok()),
        max_fds,
        start_time_seconds: stat
            .as_ref()
            .zip(boot)
            .map(|(s, boot)| boot as f64 + s.starttime as f64 / ticks),
    }
}

#[cfg(not(target_os = "linux"))]
fn read() -> Readings {
    Readings::default()
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let readings = read();
        if let Some(cpu) = readings.cpu_seconds {
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(cpu).encode(metric)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                readings.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                readings.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                readings.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                readings.max_fds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(value).encode(metric)?;
            }
        }
        if let Some(start) = readings.start_time_seconds {
            let metric = encoder.encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(start).encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn every_process_metric_is_read_on_linux() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap_or_default();
        for family in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(text.contains(family), "{family} missing:\n{text}");
        }
    }
}
