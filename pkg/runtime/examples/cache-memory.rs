//! Bytes per cached object in an informer, measured with a counting allocator,
//! for each form the cache can hold objects in.
//!
//! ```sh
//! cargo run --release -p kinject-runtime --example cache-memory
//! cargo run --release -p kinject-runtime --example cache-memory -- json   # one form only
//! cargo run --release -p kinject-runtime --example cache-memory -- metadata
//! cargo run --release -p kinject-runtime --example cache-memory -- kube-runtime
//! ```
//!
//! Loads 10,000 copies of the reference Pod (1 container, a projected
//! service-account volume, full status, two managedFields entries; names and pod
//! IPs vary per copy) and 10,000 Widgets (the runtime's fixture kind, shaped as a ready Knative
//! addressable resource) into informer caches,
//! through the same code path a running watch uses, and prints
//! `pod bytes/object: N` and `widget bytes/object: N`. Bytes are the
//! requested sizes of live heap blocks (dhat), so allocator overhead is not
//! counted, as in the client-go and kube-runtime figures this is compared with:
//! client-go's indexer holds the same pod in 6,158 B, a kube-runtime `Store` in
//! 20,567 B. Then the pods are relisted once and the peak is reported.
//!
//! Each [`CacheFormat`], and the metadata alone (`PartialObjectMeta`, what a
//! metadata informer holds), is measured in a process of its own (the example runs
//! itself once per form), since a heap's peak cannot be reset; the last
//! process loads the same pods into kube-runtime's reflector `Store`, as it
//! holds them by default (whole objects, managedFields included), for the
//! anchor measured on this machine.

use k8s_openapi::api::core::v1::Pod;
use kinject_runtime::informer::{CacheFormat, Informer, InformerSettings};
use kinject_runtime::injection::Context;
use kinject_types::Object;
use kinject_types::Url;
use kinject_types::duck::v1::Addressable;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::Event;

mod common;
use common::{offline_client, pod};
#[path = "../tests/fixtures/mod.rs"]
mod fixtures;
use fixtures::{Widget, WidgetSpec, WidgetStatus};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 10_000;

fn live_bytes() -> usize {
    dhat::HeapStats::get().curr_bytes
}

fn peak_bytes() -> usize {
    dhat::HeapStats::get().max_bytes
}

/// A ready Widget, as a controller leaves it.
fn widget(i: usize) -> Result<Widget, Box<dyn std::error::Error>> {
    let name = format!("asvc-{i:05}");
    let mut asvc = Widget::new(
        &name,
        WidgetSpec {
            service_name: format!("svc-{i:05}"),
        },
    );
    asvc.metadata.namespace = Some("default".into());
    asvc.metadata.uid = Some(format!("3f0c2a6e-1b2c-4d5e-9f00-{i:012}"));
    asvc.metadata.resource_version = Some((200_000 + i).to_string());
    asvc.metadata.generation = Some(1);
    let mut status = WidgetStatus::default();
    status.mark_service_available();
    status.status.observed_generation = 1;
    status.address = Some(Addressable {
        url: Some(Url::http(&format!("svc-{i:05}.default.svc.cluster.local"))?),
        ..Addressable::default()
    });
    asvc.status = Some(status);
    // From text, as the informer decodes what its watch delivers.
    Ok(serde_json::from_str(&serde_json::to_string(&asvc)?)?)
}

/// Lists `n` objects into the informer; returns the live bytes it added.
fn load<K: Object>(
    informer: &Informer<K>,
    n: usize,
    make: impl Fn(usize) -> Result<K, Box<dyn std::error::Error>>,
) -> Result<usize, Box<dyn std::error::Error>> {
    let before = live_bytes();
    informer.apply_event(Event::Init);
    for i in 0..n {
        informer.apply_event(Event::InitApply(make(i)?));
    }
    informer.apply_event(Event::InitDone);
    Ok(live_bytes().saturating_sub(before))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let format = match std::env::args().nth(1).as_deref() {
        None => {
            for form in ["decoded", "json", "metadata", "kube-runtime"] {
                let status = std::process::Command::new(std::env::current_exe()?)
                    .arg(form)
                    .status()?;
                if !status.success() {
                    return Err(format!("measuring the {form} cache failed: {status}").into());
                }
            }
            return Ok(());
        }
        Some("decoded") => CacheFormat::Decoded,
        Some("json") => CacheFormat::Json,
        Some("kube-runtime") => return measure_kube_runtime(),
        Some("metadata") => {
            return tokio::runtime::Builder::new_current_thread()
                .build()?
                .block_on(async { measure_metadata() });
        }
        Some(other) => {
            return Err(format!(
                "unknown cache format {other:?}; use decoded, json, metadata or kube-runtime"
            )
            .into());
        }
    };
    tokio::runtime::Builder::new_current_thread()
        .build()?
        .block_on(measure(format))
}

/// kube-runtime's reflector `Store` of the same pods.
fn measure_kube_runtime() -> Result<(), Box<dyn std::error::Error>> {
    let _profiler = dhat::Profiler::builder().testing().build();
    let (store, mut writer) = kube::runtime::reflector::store::<Pod>();
    let before = live_bytes();
    writer.apply_watcher_event(&Event::Init);
    for i in 0..N {
        writer.apply_watcher_event(&Event::InitApply(pod(i)?));
    }
    writer.apply_watcher_event(&Event::InitDone);
    let bytes = live_bytes().saturating_sub(before);
    if store.state().len() != N {
        return Err(format!("the store holds {} of {N} pods", store.state().len()).into());
    }
    println!("kube-runtime Store:");
    println!("  pod bytes/object: {}", bytes / N);
    println!("    ({N} pods, {bytes} bytes; whole objects, managedFields included)");
    Ok(())
}

/// A metadata informer's cache of the same pods and Widgets: what
/// kube-apiserver's `PartialObjectMetadata` answers carry, decoded.
fn measure_metadata() -> Result<(), Box<dyn std::error::Error>> {
    fn metadata_of<K: Object>(obj: K) -> Result<PartialObjectMeta<K>, Box<dyn std::error::Error>> {
        Ok(serde_json::from_str(&serde_json::to_string(&obj)?)?)
    }
    let _profiler = dhat::Profiler::builder().testing().build();
    let ctx = Context::new(offline_client());
    println!("Metadata (PartialObjectMeta):");
    let pods = ctx.informer::<PartialObjectMeta<Pod>>();
    let pod_bytes = load(&pods, N, |i| metadata_of(pod(i)?))?;
    println!("  pod bytes/object: {}", pod_bytes / N);
    println!("    ({N} pods, {pod_bytes} bytes; managedFields stripped as by default)");
    let widgets = ctx.informer::<PartialObjectMeta<Widget>>();
    let widget_bytes = load(&widgets, N, |i| metadata_of(widget(i)?))?;
    println!("  widget bytes/object: {}", widget_bytes / N);
    if pods.lister().len() != N || widgets.lister().len() != N {
        return Err("the metadata caches do not hold every object".into());
    }
    Ok(())
}

async fn measure(format: CacheFormat) -> Result<(), Box<dyn std::error::Error>> {
    let _profiler = dhat::Profiler::builder().testing().build();
    let ctx = Context::builder(offline_client())
        .informer_settings(InformerSettings::<Pod> {
            cache: format,
            ..Default::default()
        })
        .informer_settings(InformerSettings::<Widget> {
            cache: format,
            ..Default::default()
        })
        .build();
    println!("{format:?}:");
    let pods = ctx.informer::<Pod>();
    let asvcs = ctx.informer::<Widget>();

    let json_len = serde_json::to_vec(&pod(0)?)?.len();
    let pod_bytes = load(&pods, N, |i| Ok(pod(i)?))?;
    println!("  pod json bytes (with managedFields): {json_len}");
    println!("  pod bytes/object: {}", pod_bytes / N);
    println!("    ({N} pods, {pod_bytes} bytes; managedFields stripped as by default)");

    let steady = live_bytes();
    let peak_before = peak_bytes();
    let relist_bytes = load(&pods, N, |i| Ok(pod(i)?))?;
    let relist_peak = peak_bytes().max(peak_before).saturating_sub(steady - pod_bytes);
    println!(
        "  pod relist: steady {pod_bytes} bytes, peak {relist_peak} bytes ({:.2}x), {relist_bytes} bytes added",
        relist_peak as f64 / pod_bytes.max(1) as f64
    );

    let asvc_json = serde_json::to_vec(&widget(0)?)?.len();
    let asvc_bytes = load(&asvcs, N, widget)?;
    println!("  widget json bytes: {asvc_json}");
    println!("  widget bytes/object: {}", asvc_bytes / N);

    let lister = pods.lister();
    for i in (0..N).step_by(97) {
        let name = format!("web-7d4f4bd8dc-{i:05}");
        if lister.get_by_key("default", &name)?.is_none() {
            return Err(format!("pod {name} missing from the cache").into());
        }
    }
    let ready = asvcs
        .lister()
        .list_all()?
        .iter()
        .filter(|a| a.status.as_ref().is_some_and(WidgetStatus::is_ready))
        .count();
    if ready != N {
        return Err(format!("{ready} of {N} Widgets read back as ready").into());
    }
    Ok(())
}
