//! Memory of testenv's watch history when one large object changes often:
//! a ConfigMap of about 1.4 MB updated 300 times, RSS before and after.
//!
//! `cargo run --release -p kinject-testenv --example history-memory [-- UPDATES [HISTORY_BYTES]]`
//!
//! Without a byte bound every update stays in the history until 10,000
//! events have passed; with the default bound (64 MiB of objects) the
//! oldest leave first and a watch from before them gets 410 Gone.

use kinject_testenv::TestEnv;
use serde_json::json;

type Error = Box<dyn std::error::Error>;

/// The process's resident set in bytes, from `/proc/self/status`.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or_default()
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let updates: usize = args.next().map_or(Ok(300), |a| a.parse())?;
    let bytes: Option<usize> = args.next().map(|a| a.parse()).transpose()?;
    let mut builder = TestEnv::builder();
    if let Some(bytes) = bytes {
        builder = builder.watch_history_bytes(bytes);
    }
    let env = builder.build();
    let before = rss();
    let blob = "x".repeat(1_400_000);
    env.create_object(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"},
        "data": {"blob": blob, "generation": "0"},
    }))?;
    for i in 1..=updates {
        env.update_object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "big", "namespace": "default"},
            "data": {"blob": blob, "generation": i.to_string()},
        }))?;
    }
    let after = rss();
    println!(
        "{updates} updates of a {} byte ConfigMap: RSS {} MiB before, {} MiB after (+{} MiB), history bound {}",
        blob.len(),
        before >> 20,
        after >> 20,
        after.saturating_sub(before) >> 20,
        bytes.map_or_else(|| "default (64 MiB)".to_owned(), |b| format!("{b} bytes")),
    );
    Ok(())
}
