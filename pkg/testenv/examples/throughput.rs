//! Throughput of testenv's loopback HTTP server with a real `kube::Client`:
//! creates/s, status updates/s and watch events delivered/s.
//!
//! `cargo run --release -p kinject-testenv --example throughput [-- N [CONCURRENCY]]`

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use serde_json::json;

type Error = Box<dyn std::error::Error>;

/// A custom resource kind with a status subresource, for the status updates.
fn crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]
        }
    })
}

fn rate(n: usize, d: Duration) -> String {
    format!(
        "{:>10.0}/s  ({n} in {:.2} s)",
        n as f64 / d.as_secs_f64(),
        d.as_secs_f64()
    )
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let n = args.first().copied().unwrap_or(5000);
    let conc = args.get(1).copied().unwrap_or(16);

    let env = kinject_testenv::TestEnv::builder()
        .watch_history(4 * n + 100)
        .build();
    env.install_crd(crd())?;
    let server = env.serve().await?;
    let client = server.client()?;
    println!(
        "testenv throughput over {} (N = {n}, concurrency = {conc})",
        server.url()
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    println!("creates            {}", creates(&cms, n, conc).await?);
    println!(
        "status updates     {}",
        status_updates(&env, client, n, conc).await?
    );
    println!("watch events       {}", watch_events(&env, &cms, n).await?);
    server.shutdown().await;
    Ok(())
}

/// `n` ConfigMaps created, `conc` at a time.
async fn creates(cms: &Api<ConfigMap>, n: usize, conc: usize) -> Result<String, Error> {
    let t = Instant::now();
    stream::iter(0..n)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(
                    json!({"metadata": {"name": format!("cm-{i}")}, "data": {"k": "v"}}),
                )?;
                cms.create(&PostParams::default(), &cm).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(conc)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(rate(n, t.elapsed()))
}

/// `n` merge patches on the status subresource of `conc` custom resources.
async fn status_updates(
    env: &kinject_testenv::TestEnv,
    client: kube::Client,
    n: usize,
    conc: usize,
) -> Result<String, Error> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets");
    let objs: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let names: Vec<String> = (0..conc.max(1)).map(|i| format!("widget-{i}")).collect();
    for name in &names {
        env.create_object(json!({"apiVersion": "example.com/v1",
            "kind": "Widget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"size": 1}}))?;
    }
    let t = Instant::now();
    stream::iter(0..n)
        .map(|i| {
            let objs = objs.clone();
            let name = names[i % names.len()].clone();
            async move {
                let p = json!({"status": {"observedGeneration": i}});
                objs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&p))
                    .await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(conc)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(rate(n, t.elapsed()))
}

/// `n` ConfigMap updates written directly into the store, as one HTTP watch receives
/// them: the watch stream is what is measured.
async fn watch_events(
    env: &kinject_testenv::TestEnv,
    cms: &Api<ConfigMap>,
    n: usize,
) -> Result<String, Error> {
    let from = env.resource_version().to_string();
    let watch = cms
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await?;
    let writer = env.clone();
    let t = Instant::now();
    let producer = tokio::task::spawn_blocking(move || {
        for i in 0..n {
            let _ = writer.update_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "default"},
                "data": {"k": "w"}}));
        }
    });
    let mut seen = 0;
    let mut watch = std::pin::pin!(watch);
    while let Some(ev) = watch.try_next().await? {
        if matches!(ev, WatchEvent::Modified(_)) {
            seen += 1;
            if seen == n {
                break;
            }
        }
    }
    let elapsed = t.elapsed();
    producer.await?;
    Ok(rate(seen, elapsed))
}
