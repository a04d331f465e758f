//! How fast the AddressableService controller converges, and what it writes.
//!
//! ```sh
//! cargo run --release -p controller --example converge [-- N]
//! ```
//!
//! N AddressableServices (default 2,000), each naming an existing Service, are
//! stored in testenv's API server; the controller (informers, work queue,
//! generic reconciler, two workers, a `kube::Client` over loopback HTTP) then
//! converges them all. Reported:
//! - the time until all are Ready;
//! - API writes per object (the goal is exactly one status update each);
//! - writes caused by a global resync after convergence (the goal is 0);
//! - the rate relative to a plain `kube::Client` loop that lists the objects and
//!   writes the same statuses with the same concurrency (the goal is ≥ 0.8).

use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::v1alpha1::{AddressableService, AddressableServiceStatus};
use futures::StreamExt;
use kinject_runtime::apis::Url;
use kinject_runtime::apis::duck::v1::Addressable;
use kinject_runtime::controller::ObjectKey;
use kinject_runtime::injection::Context;
use kinject_runtime::reconciler::UniversalBucket;
use kinject_testenv::TestEnv;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const NS: &str = "bench";
const WORKERS: usize = 2;

/// A server holding the CRDs, N Services and N AddressableServices.
async fn world(n: usize) -> Result<(TestEnv, kinject_testenv::Server), BoxError> {
    // The writes are counted from the whole log.
    let env = TestEnv::builder()
        .namespace(NS)
        .action_log_bytes(usize::MAX)
        .build();
    for crd in generated::testing::custom_resource_definitions()? {
        env.install_crd(crd)?;
    }
    for i in 0..n {
        env.create_object(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{i:05}"), "namespace": NS},
            "spec": {"ports": [{"port": 80}]}}))?;
        env.create_object(
            json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
            "metadata": {"name": format!("asvc-{i:05}"), "namespace": NS},
            "spec": {"serviceName": format!("svc-{i:05}")}}),
        )?;
    }
    let server = env.serve().await?;
    Ok((env, server))
}

fn writes(env: &TestEnv) -> usize {
    env.actions()
        .iter()
        .filter(|a| {
            a.resource == "addressableservices"
                && ["create", "update", "patch", "delete"].contains(&a.verb.as_str())
        })
        .count()
}

fn ready_count(env: &TestEnv) -> usize {
    env.list_objects("samples.knative.dev", "v1alpha1", "addressableservices", Some(NS))
        .iter()
        .filter(|o| o.pointer("/status/conditions/0/status") == Some(&Value::String("True".into())))
        .count()
}

async fn settle(queue: &kinject_runtime::controller::WorkQueue) {
    loop {
        let s = queue.snapshot();
        if s.fast.is_empty() && s.slow.is_empty() && s.processing.is_empty() && s.waiting.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The controller converging the world; returns (time, writes, resync writes).
async fn controller_run(n: usize) -> Result<(Duration, usize, usize), BoxError> {
    let (env, server) = world(n).await?;
    let ctx = Context::new(server.client()?);
    let controller = reconcilers::addressableservice::new_controller(&ctx);
    let shutdown = CancellationToken::new();
    env.clear_actions();

    let started = Instant::now();
    ctx.start_informers(&shutdown);
    ctx.wait_for_cache_sync(Duration::from_secs(120)).await?;
    controller.promote_initial(Arc::new(UniversalBucket));
    let run = tokio::spawn({
        let controller = controller.clone();
        let shutdown = shutdown.clone();
        async move { controller.run(shutdown).await }
    });
    // Polling a counter, not the objects: listing 2,000 objects every few
    // milliseconds would take CPU from the controller being measured.
    while env.request_count("update", "addressableservices") < n as u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let took = started.elapsed();
    let ready = ready_count(&env);
    if ready != n {
        return Err(format!("{ready} of {n} AddressableServices are Ready after their status writes").into());
    }
    settle(controller.work_queue()).await;
    let converged_writes = writes(&env);

    // A global resync after convergence: every key again, nothing to write.
    env.clear_actions();
    let keys = reconcilers_keys(&ctx)?;
    controller.global_resync(keys);
    tokio::time::sleep(Duration::from_millis(50)).await;
    settle(controller.work_queue()).await;
    let resync_writes = writes(&env);

    shutdown.cancel();
    run.await?;
    server.shutdown().await;
    Ok((took, converged_writes, resync_writes))
}

fn reconcilers_keys(ctx: &Context) -> Result<Vec<ObjectKey>, BoxError> {
    Ok(generated::samples::v1alpha1::addressableservice::lister(ctx)
        .keys()
        .into_iter()
        .map(|(ns, name)| ObjectKey::new(ns, name))
        .collect())
}

/// The same statuses written by a plain client loop: list, then replace each
/// status, `WORKERS` at a time.
async fn plain_run(n: usize) -> Result<Duration, BoxError> {
    let (_env, server) = world(n).await?;
    let api: Api<AddressableService> = Api::namespaced(server.client()?, NS);
    let started = Instant::now();
    let list = api.list(&ListParams::default()).await?;
    let results: Vec<Result<AddressableService, kube::Error>> = futures::stream::iter(list.items)
        .map(|mut asvc| {
            let api = api.clone();
            async move {
                let host = format!("{}.{NS}.svc.cluster.local", asvc.spec.service_name);
                let mut status = AddressableServiceStatus::default();
                status.mark_service_available();
                status.status.observed_generation = asvc.metadata.generation.unwrap_or_default();
                status.address = Url::http(&host).ok().map(|url| Addressable {
                    url: Some(url),
                    ..Addressable::default()
                });
                asvc.status = Some(status);
                let name = asvc.metadata.name.clone().unwrap_or_default();
                api.replace_status(&name, &PostParams::default(), &asvc).await
            }
        })
        .buffer_unordered(WORKERS)
        .collect()
        .await;
    let took = started.elapsed();
    if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
        return Err(e.into());
    }
    server.shutdown().await;
    Ok(took)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2000);
    let (took, converged_writes, resync_writes) = controller_run(n).await?;
    let plain = plain_run(n).await?;
    println!(
        "objects: {n} AddressableServices (each naming an existing Service), {WORKERS} workers, loopback HTTP"
    );
    println!(
        "controller: all Ready in {:.2?} ({:.0} objects/s)",
        took,
        n as f64 / took.as_secs_f64()
    );
    println!(
        "writes per object: {:.2} ({converged_writes} writes)",
        converged_writes as f64 / n as f64
    );
    println!("writes caused by a global resync after convergence: {resync_writes}");
    println!(
        "plain kube::Client loop (list + status updates): {:.2?} ({:.0} objects/s)",
        plain,
        n as f64 / plain.as_secs_f64()
    );
    println!(
        "controller rate / plain rate: {:.2}",
        plain.as_secs_f64() / took.as_secs_f64()
    );
    Ok(())
}
