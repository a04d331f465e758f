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
use kinject_types::registry::{self, CustomKind};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::check::{Outcome, check, check_events};
use crate::row::{RowOutcome, TableRow};
use crate::seed::seed;

/// Builds the controller under test from the row's context.
pub type Constructor<'a> = dyn Fn(&Context) -> Impl + 'a;

/// Rows plus what every row needs: the CRDs of the kinds involved, and the
/// application's kinds, whose conversions the API server makes.
#[derive(Default)]
pub struct Table {
    /// CRDs to install before each row.
    pub crds: Vec<CustomResourceDefinition>,
    /// The application's kinds (`generated::registry::custom_kinds()`). A
    /// kind with a second version converts through its hub as the webhook
    /// would, so a row may store an object in any version the reconciler
    /// reads in another. Empty when no kind has two versions.
    pub kinds: Vec<CustomKind>,
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
            if let Err(problems) = self.run_one(row, constructor).await {
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

    /// Runs one row with the table's CRDs and kinds; `Err` lists what
    /// differed, for a test about a row that must fail.
    ///
    /// # Errors
    ///
    /// What the row expected and the reconcile did not do, one line each.
    pub async fn run_one(&self, row: &TableRow, constructor: &Constructor<'_>) -> Result<(), Vec<String>> {
        run_row_converting(&self.crds, &self.kinds, row, constructor).await
    }
}

/// The CRDs as the cluster has them: a kind with a hub converts through the
/// webhook (the strategy `hack/update-codegen.sh` writes into `config/`),
/// which the row's API server answers with the kinds' own conversions.
fn converting_through_hubs(
    crds: &[CustomResourceDefinition],
    kinds: &[CustomKind],
) -> Vec<CustomResourceDefinition> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, ServiceReference, WebhookClientConfig, WebhookConversion,
    };
    crds.iter()
        .cloned()
        .map(|mut crd| {
            let has_hub = kinds
                .iter()
                .any(|k| k.hub && k.group == crd.spec.group && k.plural == crd.spec.names.plural);
            if has_hub {
                crd.spec.conversion = Some(CustomResourceConversion {
                    strategy: "Webhook".to_owned(),
                    webhook: Some(WebhookConversion {
                        client_config: Some(WebhookClientConfig {
                            service: Some(ServiceReference {
                                name: "webhook".to_owned(),
                                namespace: "default".to_owned(),
                                path: Some(kinject_types::conversion::WEBHOOK_PATH.to_owned()),
                                port: None,
                            }),
                            ..WebhookClientConfig::default()
                        }),
                        conversion_review_versions: vec!["v1".to_owned()],
                    }),
                });
            }
            crd
        })
        .collect()
}

/// The conversions of an application's kinds, as its webhook answers them:
/// any version to any other through the kind's hub.
#[derive(Debug)]
struct KindsConverter(Vec<CustomKind>);

impl kinject_testenv::Converter for KindsConverter {
    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String> {
        registry::convert(&self.0, object, api_version).map_err(|e| e.to_string())
    }
}

/// Runs one row; `Err` lists what differed. No kind converts between
/// versions here: a table of kinds with two versions runs a row with
/// [`Table::run_one`].
pub async fn run_row(
    crds: &[CustomResourceDefinition],
    row: &TableRow,
    constructor: &Constructor<'_>,
) -> Result<(), Vec<String>> {
    run_row_converting(crds, &[], row, constructor).await
}

async fn run_row_converting(
    crds: &[CustomResourceDefinition],
    kinds: &[CustomKind],
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
    let converter: Arc<dyn kinject_testenv::Converter> = Arc::new(KindsConverter(kinds.to_vec()));
    let env = kinds
        .iter()
        .filter(|kind| kind.hub)
        .fold(TestEnv::builder(), |builder, hub| {
            builder.converter(&format!("{}.{}", hub.plural, hub.group), Arc::clone(&converter))
        })
        .name_generator(NameGenerator::Sequential(Arc::default()))
        .uid_generator(UidGenerator::deterministic())
        .build();
    let key_namespace = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
    let crds = converting_through_hubs(crds, kinds);
    seed(&env, &crds, &row.objects, key_namespace)
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
