//! What conversion costs a list: 10,000 objects of a CRD that converts
//! through a webhook, listed through the in-process `kube::Client` in the
//! storage version and in the other version, whose every object testenv
//! converts with the CRD's registered `Converter` (here a count that one
//! version keeps as a number and the other as text, as a webhook converts a
//! field of another shape). With `--webhook`, testenv asks the CRD's webhook
//! instead, over HTTPS, as kube-apiserver does: one `ConversionReview` of the
//! whole list, answered with the same conversion by a server in this
//! process. Rounds alternate, and the best of each is shown.
//!
//! `cargo run --release -p kinject-testenv --example converted-list -- --objects 10000 --rounds 5 [--webhook]`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark stops at the first surprise"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use kinject_testenv::TestEnv;
use kube::api::ListParams;
use serde_json::json;

/// The time to list every object in the storage version and in the other.
#[derive(Debug, Parser)]
struct Args {
    /// Objects stored.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Lists per version, alternating.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Convert through the CRD's webhook over HTTPS, not in process.
    #[arg(long)]
    webhook: bool,
}

// The HTTPS review server and the conversion of testenv's own tests.
#[path = "../tests/integration/common/conversion_webhook.rs"]
#[allow(unreachable_pub, reason = "shared with the tests")]
mod conversion_webhook;
#[path = "../tests/integration/common/review_server.rs"]
#[allow(
    dead_code,
    unreachable_pub,
    reason = "shared with the tests, which use all of it"
)]
mod review_server;

use conversion_webhook::{ReplicasAsText, conversion_answer, widgets};

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (env, ca_bundle) = if args.webhook {
        let server = review_server::ReviewServer::start("webhook.default.svc", |review| {
            conversion_answer(review, &ReplicasAsText)
        })
        .await;
        let env = TestEnv::new();
        env.route_service("default", "webhook", 443, server.addr);
        let ca_bundle = server.ca_bundle();
        // The server answers as long as the process lives.
        std::mem::forget(server);
        (env, ca_bundle)
    } else {
        let env = TestEnv::builder()
            .converter("widgets.tutorial.example.com", Arc::new(ReplicasAsText))
            .build();
        (env, String::new())
    };
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"replicas": {"x-kubernetes-int-or-string": true}, "zone": {"type": "string"},
                       "image": {"type": "string"}}}}}});
    env.create_object(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.tutorial.example.com"},
        "spec": {
            "group": "tutorial.example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"caBundle": ca_bundle, "service": {"name": "webhook", "namespace": "default"}}}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
            ],
        },
    }))
    .unwrap();
    for i in 0..args.objects {
        env.create_object(json!({
            "apiVersion": "tutorial.example.com/v1", "kind": "Widget",
            "metadata": {"name": format!("widget-{i}"), "namespace": "default", "labels": {"app": "shop"}},
            "spec": {"replicas": i % 7, "zone": "eu-west-1a", "image": "registry.example.com/shop:1.2.3"},
        }))
        .unwrap();
    }
    let (stored, other) = (widgets(&env, "v1"), widgets(&env, "v1alpha1"));
    let mut best = [Duration::MAX; 2];
    for _ in 0..args.rounds {
        for (slot, api) in [&stored, &other].into_iter().enumerate() {
            let started = Instant::now();
            let listed = api.list(&ListParams::default()).await.unwrap();
            let took = started.elapsed();
            assert_eq!(listed.items.len(), args.objects);
            // v1 keeps the count as a number, v1alpha1 as text.
            assert_eq!(listed.items[0].data["spec"]["replicas"].is_string(), slot == 1);
            best[slot] = best[slot].min(took);
        }
    }
    println!(
        "{} objects listed, best of {}: in the storage version (v1) {:.1?}, in v1alpha1 (each converted {}) {:.1?}: \
         {:.2}x, {:.2} µs more per object",
        args.objects,
        args.rounds,
        best[0],
        if args.webhook {
            "by the webhook, in one review"
        } else {
            "in process"
        },
        best[1],
        best[1].as_secs_f64() / best[0].as_secs_f64(),
        (best[1].as_secs_f64() - best[0].as_secs_f64()) * 1e6 / args.objects as f64,
    );
}
