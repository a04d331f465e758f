//! Greeting table rows: what one reconcile of a stored Greeting must write.

use std::collections::BTreeMap;

use greeter::greeting::{MESSAGE_KEY, new_controller};
use greeting_api::v1alpha1::{Greeting, GreetingSpec, GreetingStatus, MAX_MESSAGE_CHARS};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_runtime::owner::set_controller_ref;
use kinject_testing::{Table, TableRow, obj, uid_for};

async fn run(rows: Vec<TableRow>) {
    let crds = match greeter::generated::testing::custom_resource_definitions() {
        Ok(crds) => crds,
        Err(e) => panic!("the Greeting CRD does not build: {e}"),
    };
    Table {
        crds,
        kinds: greeter::generated::registry::custom_kinds(),
        rows,
    }
    .run(&new_controller)
    .await;
}

fn greeting(message: &str) -> Greeting {
    let mut g = Greeting::new(
        "hi",
        GreetingSpec {
            message: message.into(),
        },
    );
    g.metadata.namespace = Some("ns".into());
    g.metadata.generation = Some(1);
    g
}

fn with_status(mut g: Greeting, edit: impl FnOnce(&mut GreetingStatus)) -> Greeting {
    edit(g.status.get_or_insert_with(Default::default));
    g
}

fn config_map(owner: &Greeting, message: &str) -> ConfigMap {
    let mut cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("hi".into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(MESSAGE_KEY.to_owned(), message.to_owned())])),
        ..ConfigMap::default()
    };
    // The server gives the seeded Greeting this uid.
    let mut owner = owner.clone();
    owner.metadata.uid = Some(uid_for::<Greeting>("ns", "hi"));
    if let Err(e) = set_controller_ref(&mut cm, &owner) {
        panic!("{e}");
    }
    cm
}

#[tokio::test]
async fn a_new_greeting_gets_its_config_map_and_becomes_ready() {
    let stored = greeting("");
    // Defaults apply to what the reconciler sees; a status update writes only the status.
    let want = with_status(stored.clone(), |s| {
        s.status.observed_generation = 1;
        s.mark_published("hi");
    });
    run(vec![TableRow {
        name: "defaulted message published",
        objects: vec![obj(&stored)],
        key: "ns/hi",
        want_creates: vec![obj(&config_map(&stored, "Hello, world!"))],
        want_status_updates: vec![obj(&want)],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a_changed_message_updates_the_config_map() {
    let stored = greeting("Bonjour");
    let want = with_status(stored.clone(), |s| {
        s.status.observed_generation = 1;
        s.mark_published("hi");
    });
    run(vec![TableRow {
        name: "message changed",
        objects: vec![obj(&stored), obj(&config_map(&stored, "Hello"))],
        key: "ns/hi",
        want_updates: vec![obj(&config_map(&stored, "Bonjour"))],
        want_status_updates: vec![obj(&want)],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a_too_long_message_is_reported_not_published() {
    let stored = greeting(&"x".repeat(MAX_MESSAGE_CHARS + 1));
    let problem = match kinject_runtime::apis::Validatable::validate(&stored) {
        Err(problem) => problem,
        Ok(()) => panic!("a message over the limit must be invalid"),
    };
    let want = with_status(stored.clone(), |s| {
        s.status.observed_generation = 1;
        s.mark_invalid_spec(&problem);
    });
    run(vec![TableRow {
        name: "invalid spec",
        objects: vec![obj(&stored)],
        key: "ns/hi",
        want_status_updates: vec![obj(&want)],
        want_events: vec![format!("Warning InvalidSpec {problem}")],
        ..TableRow::default()
    }])
    .await;
}
