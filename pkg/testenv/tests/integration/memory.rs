//! What a served testenv holds as requests and watches go by: each part that
//! grows with traffic stays within its byte budget.

use k8s_openapi::api::core::v1::ConfigMap;
use kinject_testenv::{HeldBytes, TestEnv};
use kube::api::{Api, PostParams};
use tower_service::Service as _;

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

/// The scenario of `examples/bounded-memory.rs`, smaller: clients that open a
/// watch and stop reading, while large objects are PUT over HTTP.
#[tokio::test]
async fn stalled_watches_and_large_puts_stay_within_every_byte_budget() {
    const LOG: usize = 1 << 20;
    const BUFFER: usize = 256 << 10;
    const HISTORY: usize = 1 << 20;
    const WATCHES: usize = 3;
    const PUTS: usize = 30;
    let env = TestEnv::builder()
        .action_log_bytes(LOG)
        .watch_buffer_bytes(BUFFER)
        .watch_history_bytes(HISTORY)
        .build();
    let server = env.serve().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
    let created = cms
        .create(&PostParams::default(), &big(100_000, 0))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    // In-process, so no socket buffer takes what the clients do not read:
    // each watch's own buffer holds all of it.
    let mut stalled = Vec::new();
    for _ in 0..WATCHES {
        let req = http::Request::get(format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
        ))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
        stalled.push(env.service().call(req).await.unwrap());
    }

    let mut most = HeldBytes::default();
    for generation in 1..=PUTS {
        cms.replace("big", &PostParams::default(), &big(100_000, generation))
            .await
            .unwrap();
        let held = env.held_bytes();
        assert!(held.action_log <= LOG, "{held:?} after {generation} PUTs");
        assert!(
            held.watch_buffers <= WATCHES * BUFFER,
            "{held:?} after {generation} PUTs"
        );
        assert!(held.watch_history <= HISTORY, "{held:?} after {generation} PUTs");
        most.action_log = most.action_log.max(held.action_log);
        most.watch_buffers = most.watch_buffers.max(held.watch_buffers);
        most.watch_history = most.watch_history.max(held.watch_history);
    }
    // Three megabytes went by each part: every one of them was full at some point.
    assert!(most.action_log > LOG / 2, "{most:?}");
    assert!(most.watch_buffers > BUFFER, "{most:?}");
    assert!(most.watch_history > HISTORY / 2, "{most:?}");
    drop(stalled);
    assert_eq!(
        env.held_bytes().watch_buffers,
        0,
        "clients that leave free their buffers"
    );
}
