//! The `process_*` metrics every Prometheus client exports (CPU time, memory,
//! file descriptors, start time), read from `/proc` at scrape time, so a
//! dashboard for any Go or Knative component shows this process too.
//!
//! prometheus-client has no process collector, and the procfs crate, which
//! reads these, turns on `std` in bitflags through rustix: every build of a
//! project that leaves the runtime's process metrics out (a code generator,
//! a schema command) would then compile tower-http and kube a second time.
//! The four files read here are simple enough to read by hand.

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

/// Linux reports CPU times and start times in clock ticks of USER_HZ, which
/// is 100 on every architecture Linux supports for user space (it is part of
/// the ABI, whatever the kernel's own tick rate).
#[cfg(target_os = "linux")]
const TICKS_PER_SECOND: f64 = 100.0;

#[cfg(target_os = "linux")]
fn read() -> Readings {
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15, starttime 22.
    let fields: Vec<&str> = stat
        .as_deref()
        .and_then(|s| s.rsplit_once(')'))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    // Sizes are in kB in /proc/self/status, so no page size is needed.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    Readings {
        cpu_seconds: field(14)
            .zip(field(15))
            .map(|(user, system)| (user + system) as f64 / TICKS_PER_SECOND),
        resident_bytes: number_after(&status, "VmRSS:").map(|kb| kb * 1024),
        virtual_bytes: number_after(&status, "VmSize:").map(|kb| kb * 1024),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .and_then(|entries| i64::try_from(entries.count()).ok()),
        // The soft limit; "unlimited" does not parse and is left out.
        max_fds: number_after(&limits, "Max open files"),
        start_time_seconds: start_time(field(22)),
    }
}

/// When the process started: boot time plus its start in ticks. It never
/// changes, so `/proc/stat` is read at the first scrape only.
#[cfg(target_os = "linux")]
fn start_time(ticks_after_boot: Option<u64>) -> Option<f64> {
    static STARTED: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();
    *STARTED.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("btime "))
                .and_then(|value| value.trim().parse::<u64>().ok())
        })?;
        Some(boot as f64 + ticks_after_boot? as f64 / TICKS_PER_SECOND)
    })
}

/// The first number after `key` on the line of `text` that starts with it
/// (`VmRSS:   12345 kB`, `Max open files  1024  4096  files`).
#[cfg(target_os = "linux")]
fn number_after(text: &str, key: &str) -> Option<i64> {
    let line = text.lines().find(|line| line.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
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
        // Plausible values: a test process holds megabytes, has its three
        // standard descriptors open, and started within the last day.
        let readings = read();
        assert!(
            readings.resident_bytes.unwrap_or_default() > 1 << 20,
            "{readings:?}"
        );
        assert!(readings.open_fds.unwrap_or_default() >= 3, "{readings:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        let started = readings.start_time_seconds.unwrap_or_default();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{readings:?} at {now}"
        );
    }
}
