//! What a served testenv holds while large objects change, over loopback HTTP:
//!
//! * `puts`: 300 PUTs of a ConfigMap of about 1.4 MB;
//! * `stalled`: 5 clients open a watch of ConfigMaps and stop reading, then
//!   100 PUTs of the same ConfigMap.
//!
//! For each, the bytes held by the action log, the watch buffers and the
//! watch history (`TestEnv::held_bytes`), at the end and the most seen after
//! any PUT, and the process's RSS at the start and at its peak
//! (`/proc/self/status`; the client runs in the same process).
//!
//! ```sh
//! cargo run --release -p kinject-testenv --example bounded-memory            # both, one process each
//! cargo run --release -p kinject-testenv --example bounded-memory -- stalled --action-log-bytes 0
//! ```
//!
//! `--action-log-bytes`, `--watch-buffer-bytes` and `--history-bytes` take a
//! number or `max` (no bound); the defaults are the library's. `testenv
//! serve` runs with `--action-log-bytes 0`.

use std::process::Command;

use k8s_openapi::api::core::v1::ConfigMap;
use kinject_testenv::{HeldBytes, TestEnv};
use kube::api::{Api, PostParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Error = Box<dyn std::error::Error>;

const SIZE: usize = 1_400_000;

/// A `/proc/self/status` figure (`VmRSS`, `VmHWM`) in bytes.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with(field))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or_default()
}

fn mib(bytes: impl Into<u64>) -> String {
    format!("{:.1} MiB", bytes.into() as f64 / f64::from(1 << 20))
}

fn usize_mib(bytes: usize) -> String {
    mib(u64::try_from(bytes).unwrap_or(u64::MAX))
}

fn bound(bytes: Option<usize>, default: usize) -> String {
    match bytes.unwrap_or(default) {
        usize::MAX => "unbounded".to_owned(),
        b => usize_mib(b),
    }
}

#[derive(Clone, Copy, Default)]
struct Budgets {
    action_log: Option<usize>,
    watch_buffer: Option<usize>,
    history: Option<usize>,
}

impl Budgets {
    fn env(self) -> TestEnv {
        let mut builder = TestEnv::builder();
        if let Some(b) = self.action_log {
            builder = builder.action_log_bytes(b);
        }
        if let Some(b) = self.watch_buffer {
            builder = builder.watch_buffer_bytes(b);
        }
        if let Some(b) = self.history {
            builder = builder.watch_history_bytes(b);
        }
        builder.build()
    }

    fn describe(self) -> String {
        format!(
            "action log {}, watch buffers {} each, history {}",
            bound(self.action_log, kinject_testenv::DEFAULT_ACTION_LOG_BYTES),
            bound(self.watch_buffer, kinject_testenv::DEFAULT_WATCH_BUFFER_BYTES),
            bound(self.history, kinject_testenv::DEFAULT_WATCH_HISTORY_BYTES),
        )
    }
}

fn parse_bytes(value: Option<String>) -> Result<usize, Error> {
    match value.as_deref() {
        Some("max") => Ok(usize::MAX),
        Some(n) => Ok(n.parse()?),
        None => Err("a byte flag needs a value (a number or max)".into()),
    }
}

fn big(generation: usize) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("big".into());
    cm.data = Some(
        [
            ("blob".to_owned(), "x".repeat(SIZE)),
            ("generation".to_owned(), generation.to_string()),
        ]
        .into(),
    );
    cm
}

/// The most of each part seen so far.
fn most(a: HeldBytes, b: HeldBytes) -> HeldBytes {
    let mut m = a;
    m.action_log = a.action_log.max(b.action_log);
    m.watch_buffers = a.watch_buffers.max(b.watch_buffers);
    m.watch_history = a.watch_history.max(b.watch_history);
    m
}

fn held(h: HeldBytes) -> String {
    format!(
        "action log {}, watch buffers {}, watch history {}",
        usize_mib(h.action_log),
        usize_mib(h.watch_buffers),
        usize_mib(h.watch_history)
    )
}

/// A client that asks for a watch, reads the response head, and then reads nothing.
async fn stalled_watch(addr: std::net::SocketAddr, rv: &str) -> Result<tokio::net::TcpStream, Error> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let path = format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}");
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut head = [0_u8; 512];
    let n = s.read(&mut head).await?;
    if !head[..n].starts_with(b"HTTP/1.1 200") {
        return Err(format!("the watch was refused: {}", String::from_utf8_lossy(&head[..n])).into());
    }
    Ok(s)
}

async fn run(case: &str, budgets: Budgets) -> Result<(), Error> {
    let (puts, watches) = match case {
        "puts" => (300, 0),
        "stalled" => (100, 5),
        other => return Err(format!("unknown case {other:?}: puts or stalled").into()),
    };
    let env = budgets.env();
    let server = env.serve().await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.client()?, "default");
    let created = cms.create(&PostParams::default(), &big(0)).await?;
    let rv = created.metadata.resource_version.unwrap_or_default();
    let mut stalled = Vec::new();
    for _ in 0..watches {
        stalled.push(stalled_watch(server.addr(), &rv).await?);
    }
    let start = status_bytes("VmRSS:");
    let mut peak = env.held_bytes();
    for generation in 1..=puts {
        // An empty resourceVersion replaces whatever is current.
        cms.replace("big", &PostParams::default(), &big(generation))
            .await?;
        peak = most(peak, env.held_bytes());
    }
    // Longer than a watch waits for a client that makes no room.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let end = env.held_bytes();
    let hwm = status_bytes("VmHWM:");
    println!(
        "{case}: {puts} PUTs of a {SIZE}-byte ConfigMap over HTTP, {watches} stalled watches ({})",
        budgets.describe()
    );
    println!("  held at the end: {}", held(end));
    println!("  most after a PUT: {}", held(peak));
    println!(
        "  RSS {} at the start, peak {} (+{}); actions kept {}, left out {}",
        mib(start),
        mib(hwm),
        mib(hwm.saturating_sub(start)),
        env.actions().len(),
        env.dropped_actions()
    );
    drop(stalled);
    server.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut case = None;
    let mut budgets = Budgets::default();
    let mut passed = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--action-log-bytes" | "--watch-buffer-bytes" | "--history-bytes" => {
                let value = args.next();
                passed.extend([arg.clone(), value.clone().unwrap_or_default()]);
                let bytes = Some(parse_bytes(value)?);
                match arg.as_str() {
                    "--action-log-bytes" => budgets.action_log = bytes,
                    "--watch-buffer-bytes" => budgets.watch_buffer = bytes,
                    _ => budgets.history = bytes,
                }
            }
            _ => case = Some(arg),
        }
    }
    if let Some(case) = case {
        return run(&case, budgets).await;
    }
    // One process per case, so each peak RSS is its own.
    for case in ["puts", "stalled"] {
        let status = Command::new(std::env::current_exe()?)
            .arg(case)
            .args(&passed)
            .status()?;
        if !status.success() {
            return Err(format!("{case} failed: {status}").into());
        }
    }
    Ok(())
}
