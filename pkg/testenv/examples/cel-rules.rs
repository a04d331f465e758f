//! What CEL validation rules cost a write: creates per second into testenv
//! for a kind whose schema carries 20 `x-kubernetes-validations` rules of
//! the shapes real CRDs use (`has()`, `size()`, `matches()`, `all()` and
//! `exists_one()` over bounded lists, string functions, cross-field
//! comparisons, a `messageExpression`, a transition rule), against the same
//! kind with none: straight into the registry (`TestEnv::create_object`,
//! where the rules run), and through the in-process `kube::Client` a table
//! test uses. Rounds alternate between the two kinds, and the best round of
//! each is compared.
//!
//! `cargo run --release -p kinject-testenv --example cel-rules -- --objects 5000 --rounds 3`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark stops at the first surprise"
)]

use std::time::{Duration, Instant};

use clap::Parser;
use kinject_testenv::TestEnv;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

/// Creates per second for a kind with 20 rules and for the same kind with none.
#[derive(Debug, Parser)]
struct Args {
    /// Objects created per kind in each round.
    #[arg(long, default_value_t = 5000)]
    objects: usize,
    /// Rounds per kind, alternating.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// The twenty rules, on the spec.
fn rules() -> Value {
    json!([
        {"rule": "self.minReplicas <= self.maxReplicas", "messageExpression": "'minReplicas (' + string(self.minReplicas) + ') must not be above maxReplicas'"},
        {"rule": "self.maxReplicas <= 100", "message": "at most 100 replicas"},
        {"rule": "self.minReplicas >= 0"},
        {"rule": "!has(self.zone) || self.zone.size() > 0"},
        {"rule": "!has(self.zone) || self.zone.matches('^[a-z]+-[a-z]+[0-9]*$')", "message": "a zone is region-name"},
        {"rule": "self.image.contains(':') || self.image.contains('@')", "message": "an image names its tag or digest"},
        {"rule": "!self.image.startsWith('http')"},
        {"rule": "self.image.size() <= 255"},
        {"rule": "self.ports.all(p, p.port > 0 && p.port < 65536)", "message": "ports are 1 to 65535"},
        {"rule": "self.ports.all(p, p.name.size() <= 15)"},
        {"rule": "self.ports.exists_one(p, p.name == 'http')", "message": "exactly one port is http"},
        {"rule": "self.ports.all(p, self.ports.exists_one(q, q.name == p.name))", "message": "port names are unique"},
        {"rule": "self.tags.all(t, t.lowerAscii() == t)"},
        {"rule": "size(self.tags) <= 8"},
        {"rule": "!('forbidden' in self.tags)"},
        {"rule": "has(self.mode) ? self.mode in ['fast', 'safe'] : true"},
        {"rule": "!has(self.ratio) || (self.ratio >= 0.0 && self.ratio <= 1.0)"},
        {"rule": "self.labels.all(k, k.size() <= 63)"},
        {"rule": "!has(self.paused) || !self.paused || self.minReplicas == 0", "message": "a paused widget runs no replicas"},
        {"rule": "!has(oldSelf.zone) || self.zone == oldSelf.zone", "message": "zone cannot change once set"},
    ])
}

fn crd(plural: &str, kind: &str, with_rules: bool) -> Value {
    let mut spec = json!({
        "type": "object",
        "required": ["minReplicas", "maxReplicas", "image", "ports", "tags", "labels"],
        "properties": {
            "minReplicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "zone": {"type": "string", "maxLength": 63},
            "image": {"type": "string", "maxLength": 255},
            "mode": {"type": "string", "maxLength": 8},
            "ratio": {"type": "number"},
            "paused": {"type": "boolean"},
            "ports": {"type": "array", "maxItems": 16, "items": {"type": "object",
                "required": ["name", "port"],
                "properties": {"name": {"type": "string", "maxLength": 15}, "port": {"type": "integer"}}}},
            "tags": {"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 63}},
            "labels": {"type": "object", "maxProperties": 16,
                "additionalProperties": {"type": "string", "maxLength": 63}},
        },
    });
    if with_rules {
        spec["x-kubernetes-validations"] = rules();
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.bench.example.com")},
        "spec": {
            "group": "bench.example.com", "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}],
        },
    })
}

fn object(kind: &str, name: &str) -> Value {
    json!({
        "apiVersion": "bench.example.com/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minReplicas": 1, "maxReplicas": 3, "zone": "eu-west1",
            "image": "registry.example.com/widget:1.2.3", "mode": "fast", "ratio": 0.5, "paused": false,
            "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9090}, {"name": "grpc", "port": 9000}],
            "tags": ["blue", "small", "beta"],
            "labels": {"team": "widgets", "tier": "backend"},
        },
    })
}

fn round(env: &TestEnv, kind: &str, round: usize, objects: usize) -> Duration {
    let start = Instant::now();
    for i in 0..objects {
        env.create_object(object(kind, &format!("w-{round}-{i}")))
            .unwrap();
    }
    start.elapsed()
}

async fn client_round(env: &TestEnv, kind: &str, plural: &str, round: usize, objects: usize) -> Duration {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("bench.example.com", "v1", kind), plural);
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    let bodies: Vec<DynamicObject> = (0..objects)
        .map(|i| serde_json::from_value(object(kind, &format!("c-{round}-{i}"))).unwrap())
        .collect();
    let start = Instant::now();
    for body in &bodies {
        api.create(&PostParams::default(), body).await.unwrap();
    }
    start.elapsed()
}

fn report(what: &str, objects: usize, best: [Duration; 2]) {
    let rate = |d: Duration| objects as f64 / d.as_secs_f64();
    let (plain, ruled) = (rate(best[0]), rate(best[1]));
    println!("{what}:");
    println!("  no rules   {plain:>9.0}/s");
    println!("  20 rules   {ruled:>9.0}/s");
    println!(
        "  the rules cost {:.1} % of the create rate ({:.1} µs per object)",
        (1.0 - ruled / plain) * 100.0,
        (best[1].as_secs_f64() - best[0].as_secs_f64()) * 1e6 / objects as f64
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let env = TestEnv::builder().watch_history(16).build();
    env.install_crd(crd("plainwidgets", "PlainWidget", false))
        .unwrap();
    env.install_crd(crd("ruledwidgets", "RuledWidget", true)).unwrap();
    // The object passes every rule; one that breaks them is refused.
    let mut broken = object("RuledWidget", "broken");
    broken["spec"]["minReplicas"] = json!(5);
    let refused = env.create_object(broken).unwrap_err().to_string();
    assert!(refused.contains("must not be above maxReplicas"), "{refused}");

    let kinds = [
        (0, "PlainWidget", "plainwidgets"),
        (1, "RuledWidget", "ruledwidgets"),
    ];
    let mut best = [Duration::MAX; 2];
    let mut best_client = [Duration::MAX; 2];
    for r in 0..args.rounds {
        for (slot, kind, plural) in kinds {
            best[slot] = best[slot].min(round(&env, kind, r, args.objects));
            let took = client_round(&env, kind, plural, r, args.objects).await;
            best_client[slot] = best_client[slot].min(took);
        }
    }
    println!(
        "creates into testenv, best of {} rounds of {}:",
        args.rounds, args.objects
    );
    report(
        "straight into the registry (TestEnv::create_object)",
        args.objects,
        best,
    );
    report("through the in-process kube::Client", args.objects, best_client);
}
