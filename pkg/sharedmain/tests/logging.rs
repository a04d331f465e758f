//! One process, two components that each follow their own `config-logging`
//! (the local job runs the controller and the webhook together): a change
//! either makes takes effect at once, and libraries stay at warn unless named.
//! Its own test binary, because the logger is the process's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use kinject_sharedmain::logging::{self, Encoding};
use tracing::Level;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::TestWriter;

fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn each_component_changes_its_level_live_in_a_shared_process() {
    // Its lines (one of them the refusal of a bad level below) go through
    // libtest's capture, shown only if the test fails.
    let controller = logging::init_writing_to(
        "controller",
        LevelFilter::INFO,
        None,
        Encoding::Json,
        TestWriter::new,
    );
    let webhook = logging::init("webhook", LevelFilter::INFO, None, Encoding::Json);
    assert!(tracing::enabled!(Level::INFO));
    assert!(!tracing::enabled!(Level::DEBUG));

    // The second component's change works: no "subscriber no longer exists".
    webhook.apply(&config(&[("loglevel.webhook", "debug")]));
    assert_eq!(webhook.level(), Some(LevelFilter::DEBUG));
    assert!(tracing::enabled!(Level::DEBUG));
    // Libraries stay at warn while the components debug.
    assert!(!tracing::enabled!(target: "hyper::proto::h1", Level::DEBUG));
    assert!(!tracing::enabled!(target: "kube_client::client", Level::INFO));
    assert!(tracing::enabled!(target: "kube_client::client", Level::WARN));

    // Named, a library follows its own key.
    controller.apply(&config(&[("loglevel.kube_client", "debug")]));
    assert!(tracing::enabled!(target: "kube_client::client", Level::DEBUG));
    assert!(!tracing::enabled!(target: "hyper::proto::h1", Level::DEBUG));

    // Back to the defaults: the most verbose ask is gone.
    webhook.apply(&BTreeMap::new());
    controller.apply(&BTreeMap::new());
    assert!(!tracing::enabled!(Level::DEBUG));
    assert!(!tracing::enabled!(target: "kube_client::client", Level::INFO));

    // A bad value keeps the level in force.
    controller.apply(&config(&[("loglevel.controller", "loud")]));
    assert_eq!(controller.level(), Some(LevelFilter::INFO));
}
