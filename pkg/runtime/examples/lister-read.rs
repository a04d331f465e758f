//! What reading from the informer cache costs, in each form the cache can hold
//! objects in.
//!
//! ```sh
//! cargo run --release -p kinject-runtime --example lister-read
//! ```
//!
//! Loads 10,000 reference Pods into an informer (as the watch would), once per
//! [`CacheFormat`] and once as their metadata alone (`PartialObjectMeta<Pod>`,
//! what a metadata informer holds), and times `get` of each one, `list` of
//! the 1,000 that carry one label value (`shard=3`, out of ten), and `list`
//! of all of them. Then the same reads from kube-runtime's reflector `Store`,
//! fed the same pods, as the anchor they compare with.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinject_runtime::informer::{CacheFormat, Informer, InformerSettings};
use kinject_runtime::injection::Context;
use kinject_types::Object;
use kube::core::{PartialObjectMeta, Selector};
use kube::runtime::watcher::Event;

mod common;
use common::{offline_client, pod};

const N: usize = 10_000;
const SHARDS: usize = 10;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    for format in [CacheFormat::Decoded, CacheFormat::Json] {
        measure(format)?;
    }
    measure_metadata()?;
    measure_kube_runtime()
}

/// A reference Pod with its `shard` label.
fn labelled_pod(i: usize) -> Result<Pod, Box<dyn std::error::Error>> {
    let mut pod = pod(i)?;
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert("shard".into(), (i % SHARDS).to_string());
    Ok(pod)
}

/// kube-runtime's `Store` (`Arc<Pod>` per object, no index): `get` by
/// `ObjectRef`, and a label selection as a filter over `state()`, which is
/// what a kube-runtime controller does without an index of its own.
fn measure_kube_runtime() -> Result<(), Box<dyn std::error::Error>> {
    use kube::ResourceExt;
    use kube::runtime::reflector::{self, ObjectRef};

    let (store, mut writer) = reflector::store::<Pod>();
    writer.apply_watcher_event(&Event::Init);
    for i in 0..N {
        writer.apply_watcher_event(&Event::InitApply(labelled_pod(i)?));
    }
    writer.apply_watcher_event(&Event::InitDone);
    let refs: Vec<ObjectRef<Pod>> = (0..N)
        .map(|i| ObjectRef::new(&format!("web-7d4f4bd8dc-{i:05}")).within("default"))
        .collect();
    let started = Instant::now();
    for r in &refs {
        if store.get(r).is_none() {
            return Err(format!("pod {} missing from the store", r.name).into());
        }
    }
    let get = started.elapsed() / N as u32;
    let mut by_label = Duration::MAX;
    let mut selected = 0;
    for _ in 0..5 {
        let started = Instant::now();
        selected = store
            .state()
            .iter()
            .filter(|p| p.labels().get("shard").is_some_and(|v| v == "3"))
            .count();
        by_label = by_label.min(started.elapsed());
    }
    if selected != N / SHARDS {
        return Err(format!("selected {selected} pods by label").into());
    }
    println!("kube-runtime Store:");
    println!("  get: {get:.2?} per pod");
    println!("  list by label: {by_label:.2?} for {selected} of {N} pods");
    Ok(())
}

fn measure(format: CacheFormat) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::builder(offline_client())
        .informer_settings(InformerSettings::<Pod> {
            cache: format,
            ..Default::default()
        })
        .build();
    time_reads(&format!("{format:?}"), &ctx.informer::<Pod>(), labelled_pod)
}

/// The pods' metadata alone, as a metadata informer lists it.
fn measure_metadata() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new(offline_client());
    time_reads(
        "Metadata (PartialObjectMeta)",
        &ctx.informer::<PartialObjectMeta<Pod>>(),
        |i| Ok(serde_json::from_str(&serde_json::to_string(&labelled_pod(i)?)?)?),
    )
}

/// Loads N objects into `pods` and times the reads.
fn time_reads<K: Object<Scope = k8s_openapi::NamespaceResourceScope>>(
    form: &str,
    pods: &Informer<K>,
    make: impl Fn(usize) -> Result<K, Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    pods.apply_event(Event::Init);
    for i in 0..N {
        pods.apply_event(Event::InitApply(make(i)?));
    }
    pods.apply_event(Event::InitDone);
    let lister = pods.lister();

    let names: Vec<String> = (0..N).map(|i| format!("web-7d4f4bd8dc-{i:05}")).collect();
    let started = Instant::now();
    for name in &names {
        if lister.get_by_key("default", name)?.is_none() {
            return Err(format!("pod {name} missing from the cache").into());
        }
    }
    let get = started.elapsed() / N as u32;

    // The best of a few rounds, so one preemption on a busy machine does not
    // stand for the cache.
    let shard = Selector::from_iter([("shard", "3")]);
    let mut by_label = Duration::MAX;
    let mut all = Duration::MAX;
    let (mut selected, mut listed) = (0, 0);
    for _ in 0..5 {
        let started = Instant::now();
        selected = lister.namespaced("default").list(&shard)?.len();
        by_label = by_label.min(started.elapsed());
        let started = Instant::now();
        listed = lister.list_all()?.len();
        all = all.min(started.elapsed());
    }
    if selected != N / SHARDS || listed != N {
        return Err(format!("listed {selected} pods by label and {listed} in all").into());
    }
    println!("{form}:");
    println!("  get: {get:.2?} per pod");
    println!("  list by label: {by_label:.2?} for {selected} of {N} pods");
    println!(
        "  list all: {all:.2?} for {listed} pods ({:.2?} per 1,000)",
        all / (listed as u32 / 1000).max(1)
    );
    Ok(())
}
