//! What a served testenv holds as requests and watches go by: each part that
//! grows with traffic stays within its byte budget.

use k8s_openapi::api::core::v1::ConfigMap;
use kinject_testenv::TestEnv;
use kube::api::{Api, PostParams};

/// A ConfigMap of about `size` bytes, `generation` telling its versions apart.
fn big(size: usize, generation: usize) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("big".into());
    cm.data = Some(
        [
            ("blob".to_owned(), "x".repeat(size)),
            ("generation".to_owned(), generation.to_string()),
        ]
        .into(),
    );
    cm
}

#[tokio::test]
async fn a_served_testenv_keeps_the_newest_requests_within_the_log_budget() {
    const BUDGET: usize = 1 << 20;
    const PUTS: usize = 20;
    let env = TestEnv::builder().action_log_bytes(BUDGET).build();
    let server = env.serve().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
    cms.create(&PostParams::default(), &big(200_000, 0))
        .await
        .unwrap();
    for generation in 1..=PUTS {
        // An empty resourceVersion replaces whatever is current.
        cms.replace("big", &PostParams::default(), &big(200_000, generation))
            .await
            .unwrap();
        let held = env.held_bytes().action_log;
        assert!(
            held <= BUDGET,
            "the log holds {held} bytes after {generation} PUTs"
        );
    }

    let actions = env.actions();
    let bodies: usize = actions
        .iter()
        .filter_map(|a| a.body.as_ref())
        .map(|b| b.len())
        .sum();
    assert!(bodies <= BUDGET, "{bodies} bytes of bodies kept");
    let last = actions.last().unwrap();
    assert_eq!(last.verb, "update");
    assert_eq!(
        last.body_json().unwrap()["data"]["generation"],
        PUTS.to_string(),
        "the newest request is kept"
    );
    assert_eq!(
        env.dropped_actions() + actions.len() as u64,
        1 + PUTS as u64,
        "what left the log is counted"
    );
    assert_eq!(
        env.request_count("update", "configmaps"),
        PUTS as u64,
        "counters see every request"
    );

    env.clear_actions();
    assert_eq!((env.dropped_actions(), env.held_bytes().action_log), (0, 0));
}

#[tokio::test]
async fn a_server_without_an_action_log_still_counts_and_reacts() {
    let env = TestEnv::builder().action_log_bytes(0).build();
    env.react(kinject_testenv::Reactor::on("create", "configmaps").times(1));
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let refused = cms.create(&PostParams::default(), &big(10, 0)).await;
    assert!(matches!(refused, Err(kube::Error::Api(s)) if s.code == 500));
    cms.create(&PostParams::default(), &big(10, 0)).await.unwrap();
    assert!(env.actions().is_empty());
    assert_eq!(env.dropped_actions(), 2);
    assert_eq!(env.request_count("create", "configmaps"), 2);
}
