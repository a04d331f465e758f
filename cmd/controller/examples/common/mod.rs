//! What the controller's benchmark examples share: a process's CPU time and
//! memory from `/proc`, a free port, and the parts of `config/` a controller
//! needs on testenv.
#![allow(
    dead_code,
    reason = "each example that includes this module uses a part of it"
)]

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kinject_testenv::TestEnv;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The manifests of `config/` a controller needs: its namespace, the CRDs and
/// the three ConfigMaps.
pub(crate) fn apply_config(env: &TestEnv) -> Result<(), BoxError> {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let mut files = vec!["100-namespace.yaml".to_owned()];
    files.extend(
        kinject_runtime::apis::registry::custom_resource_definitions(&generated::registry::custom_kinds())?
            .iter()
            .map(|definition| format!("300-{}.yaml", definition.kind.to_lowercase())),
    );
    files.extend(
        [
            "config-logging.yaml",
            "config-leader-election.yaml",
            "config-observability.yaml",
        ]
        .map(String::from),
    );
    for file in files {
        let path = config.join(&file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        env.create_from_yaml(&file, &text)
            .map_err(|e| format!("applying {file}: {e}"))?;
    }
    Ok(())
}

/// A port nobody listens on now, for the controller's metrics and probes.
pub(crate) fn free_port() -> Result<u16, BoxError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// CPU time and memory of a process, from `/proc`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ProcStats {
    pub(crate) cpu: Duration,
    /// Peak resident set (`VmHWM`), bytes.
    pub(crate) peak_rss: u64,
    /// Resident set now (`VmRSS`), bytes.
    pub(crate) rss: u64,
    /// Of that, pages mapped from files (`RssFile`): the binary's code,
    /// which a smaller binary would not hold.
    pub(crate) file_rss: u64,
}

impl ProcStats {
    pub(crate) fn of(pid: u32) -> Result<ProcStats, BoxError> {
        Self::read(&format!("/proc/{pid}"))
    }

    pub(crate) fn own() -> Result<ProcStats, BoxError> {
        Self::read("/proc/self")
    }

    fn read(proc: &str) -> Result<ProcStats, BoxError> {
        let stat = std::fs::read_to_string(format!("{proc}/stat"))?;
        // Fields after the command name, which may hold spaces and ends at the last ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // utime and stime are fields 14 and 15 of stat(5); index 0 here is field 3.
        let ticks = |i: usize| -> Result<u64, BoxError> {
            Ok(fields
                .get(i)
                .ok_or_else(|| format!("{proc}/stat has no field {}", i + 3))?
                .parse()?)
        };
        let cpu_ticks = ticks(11)? + ticks(12)?;
        let status = std::fs::read_to_string(format!("{proc}/status"))?;
        let kib = |key: &str| -> Result<u64, BoxError> {
            let line = status
                .lines()
                .find(|l| l.starts_with(key))
                .ok_or_else(|| format!("{proc}/status has no {key}"))?;
            let value = line.trim_start_matches(key).trim().trim_end_matches("kB").trim();
            Ok(value.parse::<u64>()? * 1024)
        };
        Ok(ProcStats {
            cpu: Duration::from_secs_f64(cpu_ticks as f64 / clock_ticks_per_second()),
            peak_rss: kib("VmHWM:")?,
            rss: kib("VmRSS:")?,
            file_rss: kib("RssFile:")?,
        })
    }
}

/// `sysconf(_SC_CLK_TCK)`, through `getconf` (no libc binding here); Linux's
/// 100 if that fails.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}
