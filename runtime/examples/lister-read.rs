//! What reading from the informer cache costs, since it decodes on every read.
//!
//! ```sh
//! cargo run --release -p kinject-runtime --example lister-read
//! ```
//!
//! Loads 10,000 reference Pods into an informer (as the watch would) and times
//! `get` of each one and `list` of all of them.

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kinject_runtime::injection::Context;
use kube::runtime::watcher::Event;

mod common;
use common::pod;

const N: usize = 10_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Informers are fed directly below; the client is never called.
    let offline = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
        Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
    });
    let ctx = Context::new(kube::Client::new(offline, "default"));
    let pods = ctx.informer::<Pod>();
    pods.apply_event(Event::Init);
    for i in 0..N {
        pods.apply_event(Event::InitApply(pod(i)?));
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
    let started = Instant::now();
    let all = lister.list_all()?;
    let list = started.elapsed();
    println!("get: {get:.1?} per pod");
    println!(
        "list: {list:.1?} for {} pods ({:.1?} per 1,000)",
        all.len(),
        list / (all.len() as u32 / 1000).max(1)
    );
    Ok(())
}
