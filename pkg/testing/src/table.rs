//! Running rows: a fresh API server per row, the controller built over it,
//! one reconcile, and what it did checked against the row.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinject_runtime::controller::{Impl, ObjectKey};
use kinject_runtime::events::FakeRecorder;
use kinject_runtime::injection::Clock;
use kinject_runtime::injection::Context;
use kinject_runtime::leader::UniversalBucket;
use kinject_runtime::network::DEFAULT_CLUSTER_DOMAIN;
use kinject_runtime::reconciler::SharedRecorder;
use kinject_testenv::{NameGenerator, TestEnv, UidGenerator};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::check::{Outcome, check, check_events};
use crate::row::{RowOutcome, TableRow};
use crate::seed::seed;

/// Builds the controller under test from the row's context.
pub type Constructor<'a> = dyn Fn(&Context) -> Impl + 'a;

/// Rows plus what every row needs: the CRDs of the kinds involved.
pub struct Table {
    /// CRDs to install before each row.
    pub crds: Vec<CustomResourceDefinition>,
    /// The rows.
    pub rows: Vec<TableRow>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Runs every row and fails the test listing every row that did not hold.
    pub async fn run(self, constructor: &Constructor<'_>) {
        let mut failures = Vec::new();
        for row in &self.rows {
            if let Err(problems) = run_row(&self.crds, row, constructor).await {
                failures.push(format!("row {:?}:\n  {}", row.name, problems.join("\n  ")));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} rows failed:\n{}",
            failures.len(),
            self.rows.len(),
            failures.join("\n")
        );
    }
}

/// Runs one row; `Err` lists what differed.
pub async fn run_row(
    crds: &[CustomResourceDefinition],
    row: &TableRow,
    constructor: &Constructor<'_>,
) -> Result<(), Vec<String>> {
    // The queue holds typed keys, so a malformed one never reaches a
    // reconciler: a row that names one is a mistake in the row.
    let key: ObjectKey = row.key.parse().map_err(|e| {
        vec![format!(
            "the row's key: {e}; a malformed key never reaches a reconciler, so no row can test one"
        )]
    })?;
    let env = TestEnv::builder()
        .name_generator(NameGenerator::Sequential(Arc::default()))
        .uid_generator(UidGenerator::deterministic())
        .build();
    let key_namespace = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
    seed(&env, crds, &row.objects, key_namespace)
        .map_err(|e| vec![format!("setting up the row failed: {e}")])?;

    let recorder = Arc::new(FakeRecorder::new());
    let clock = row.now.map_or_else(Clock::system, Clock::fixed);
    let ctx = Context::builder(env.client())
        .extension(SharedRecorder(recorder.clone()))
        .cluster_domain(row.cluster_domain.unwrap_or(DEFAULT_CLUSTER_DOMAIN))
        .clock(clock)
        .build();
    let controller = constructor(&ctx);
    let shutdown = CancellationToken::new();
    ctx.start_informers(&shutdown);
    let synced = ctx.wait_for_cache_sync(Duration::from_secs(10)).await;
    let result = match synced {
        Err(e) => Err(vec![format!("informers did not sync: {e}")]),
        Ok(()) => {
            if !row.not_leader {
                controller.promote_initial(Arc::new(UniversalBucket));
            }
            for reactor in &row.reactors {
                env.react(reactor.clone());
            }
            let seeded_version = key_resource_version(&env, row);
            env.clear_actions();
            let outcome = controller.reconcile_once(&key).await;
            let actions = env.actions();
            let outcome = match outcome {
                Ok(action) => action.requeue_delay().map_or(Outcome::Done, Outcome::Requeue),
                Err(e) => Outcome::Failed(e.to_string()),
            };
            let mut problems = check(row, &outcome, &actions, &seeded_version);
            check_events(row, recorder.take(), &mut problems);
            if let Some(post) = &row.post_conditions {
                let outcome = RowOutcome {
                    env: &env,
                    ctx: &ctx,
                    controller: &controller,
                };
                if let Err(p) = post(&outcome).await {
                    problems.push(format!("post-condition: {p}"));
                }
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems)
            }
        }
    };
    shutdown.cancel();
    result
}

/// The resourceVersion of the row's object named by its key, if it has one.
fn key_resource_version(env: &TestEnv, row: &TableRow) -> String {
    let (namespace, name) = row.key.split_once('/').unwrap_or(("", row.key));
    row.objects
        .iter()
        .find(|o| {
            o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                && o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    == namespace
        })
        .and_then(|o| {
            let api_version = o.get("apiVersion").and_then(Value::as_str)?;
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let kind = o.get("kind").and_then(Value::as_str)?;
            let plural = env.resource_for_kind(api_version, kind)?;
            env.get_object(
                group,
                version,
                &plural,
                (!namespace.is_empty()).then_some(namespace),
                name,
            )
        })
        .and_then(|stored| {
            stored
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}
