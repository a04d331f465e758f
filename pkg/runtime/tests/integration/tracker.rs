#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The tracker: exact and selector references, leases, observer deletion and
//! Knative's validation messages.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kinject_runtime::controller::ObjectKey;
use kinject_runtime::tracker::{Reference, Tracker};
use kube::api::ObjectMeta;
use tokio::time::advance;

const LEASE: Duration = Duration::from_secs(60);

fn meta(namespace: &str, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
        name: Some(name.to_owned()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

fn service(namespace: &str, name: &str) -> Service {
    Service {
        metadata: meta(namespace, name, &[]),
        ..Service::default()
    }
}

fn pod(namespace: &str, name: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: meta(namespace, name, labels),
        ..Pod::default()
    }
}

/// A tracker whose callback records the keys it is called with.
fn tracker() -> (Tracker, Arc<Mutex<Vec<ObjectKey>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let tracker = Tracker::new(
        {
            let calls = calls.clone();
            move |key| calls.lock().unwrap().push(key)
        },
        LEASE,
    );
    (tracker, calls)
}

fn take(calls: &Mutex<Vec<ObjectKey>>) -> Vec<ObjectKey> {
    let mut calls = calls.lock().unwrap();
    let mut out = std::mem::take(&mut *calls);
    out.sort();
    out
}

fn key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey::new(namespace, name)
}

fn app_selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
        match_expressions: None,
    }
}

#[tokio::test(start_paused = true)]
async fn exact_references_notify_their_observers() {
    let (t, calls) = tracker();
    let web = Reference::named("v1", "Service", "default", "web");
    t.track_reference(&web, &service("default", "asvc-1")).unwrap();
    t.track_reference(&web, &service("default", "asvc-2")).unwrap();
    assert_eq!(
        take(&calls),
        [key("default", "asvc-1"), key("default", "asvc-2")],
        "new registrations"
    );

    t.on_changed(&service("default", "web"));
    assert_eq!(take(&calls), [key("default", "asvc-1"), key("default", "asvc-2")]);

    t.on_changed(&service("default", "other"));
    t.on_changed(&service("elsewhere", "web"));
    t.on_changed(&pod("default", "web", &[]));
    assert!(
        take(&calls).is_empty(),
        "other names, namespaces and kinds are not tracked"
    );

    assert_eq!(
        t.get_observers(&service("default", "web")),
        [key("default", "asvc-1"), key("default", "asvc-2")]
    );
}

#[tokio::test(start_paused = true)]
async fn selector_references_notify_observers_of_matching_objects() {
    let (t, calls) = tracker();
    let selected = Reference::selected("v1", "Pod", "default", app_selector("web"));
    t.track_reference(&selected, &service("default", "web")).unwrap();
    assert_eq!(take(&calls), [key("default", "web")]);

    t.on_changed(&pod("default", "web-1", &[("app", "web"), ("tier", "front")]));
    assert_eq!(take(&calls), [key("default", "web")]);
    t.on_changed(&pod("default", "db-1", &[("app", "db")]));
    t.on_changed(&pod("default", "bare", &[]));
    t.on_changed(&pod("other", "web-1", &[("app", "web")]));
    assert!(take(&calls).is_empty());

    // Expressions work too.
    let expr = Reference::selected(
        "v1",
        "Pod",
        "default",
        LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["front".into(), "edge".into()]),
            }]),
        },
    );
    t.track_reference(&expr, &service("default", "lb")).unwrap();
    take(&calls);
    assert_eq!(
        t.get_observers(&pod("default", "web-1", &[("app", "web"), ("tier", "front")])),
        [key("default", "lb"), key("default", "web")]
    );
}

#[tokio::test(start_paused = true)]
async fn cluster_scoped_referents_have_no_namespace() {
    let (t, calls) = tracker();
    let ns = Reference::named("v1", "Namespace", "", "prod");
    t.track_reference(&ns, &service("default", "asvc")).unwrap();
    take(&calls);
    t.on_changed(&Namespace {
        metadata: meta("", "prod", &[]),
        ..Namespace::default()
    });
    assert_eq!(take(&calls), [key("default", "asvc")]);
}

#[tokio::test(start_paused = true)]
async fn leases_expire_unless_renewed() {
    let (t, calls) = tracker();
    let web = Reference::named("v1", "Service", "default", "web");
    let selected = Reference::selected("v1", "Pod", "default", app_selector("web"));
    t.track_reference(&web, &service("default", "asvc")).unwrap();
    t.track_reference(&selected, &service("default", "asvc")).unwrap();
    take(&calls);

    // Renewed halfway: alive until 90s.
    advance(LEASE / 2).await;
    t.track_reference(&web, &service("default", "asvc")).unwrap();
    assert!(take(&calls).is_empty(), "a renewal does not call back");

    advance(LEASE / 2 + Duration::from_secs(1)).await;
    assert_eq!(
        t.get_observers(&service("default", "web")),
        [key("default", "asvc")]
    );
    assert!(
        t.get_observers(&pod("default", "p", &[("app", "web")]))
            .is_empty(),
        "the selector lease lapsed"
    );

    advance(LEASE).await;
    t.on_changed(&service("default", "web"));
    assert!(take(&calls).is_empty(), "the exact lease lapsed");
}

#[tokio::test(start_paused = true)]
async fn the_callback_fires_for_new_and_expired_registrations_only() {
    let (t, calls) = tracker();
    let web = Reference::named("v1", "Service", "default", "web");
    let observer = service("default", "asvc");
    t.track_reference(&web, &observer).unwrap();
    t.track_reference(&web, &observer).unwrap();
    advance(LEASE).await;
    t.track_reference(&web, &observer).unwrap(); // exactly at expiry: still live
    assert_eq!(take(&calls), [key("default", "asvc")]);

    advance(LEASE + Duration::from_secs(1)).await;
    t.track_reference(&web, &observer).unwrap();
    assert_eq!(
        take(&calls),
        [key("default", "asvc")],
        "a lapsed lease counts as new"
    );

    let selected = Reference::selected("v1", "Pod", "default", app_selector("web"));
    t.track_reference(&selected, &observer).unwrap();
    t.track_reference(&selected, &observer).unwrap();
    assert_eq!(take(&calls), [key("default", "asvc")]);
    advance(LEASE + Duration::from_secs(1)).await;
    t.track_reference(&selected, &observer).unwrap();
    assert_eq!(take(&calls), [key("default", "asvc")]);
}

/// A registration made while its observer is reconciled calls back only when
/// a referent changed since the reconcile began: otherwise the reconcile read
/// the referents as they are, and reconciling it again would change nothing.
#[tokio::test(start_paused = true)]
async fn a_registration_during_the_observers_reconcile_calls_back_only_after_a_change() {
    let (t, calls) = tracker();
    let web = Reference::named("v1", "Service", "default", "web");
    let selected = Reference::selected("v1", "Pod", "default", app_selector("web"));

    let reconcile = t.reconciling(&key("default", "quiet"));
    t.track_reference(&web, &service("default", "quiet")).unwrap();
    t.track_reference(&selected, &service("default", "quiet"))
        .unwrap();
    drop(reconcile);
    assert!(take(&calls).is_empty(), "nothing changed while it ran");

    let reconcile = t.reconciling(&key("default", "raced"));
    // Another Service changes between the reconcile's read and its
    // registration: the tracker cannot tell which referent it was.
    t.on_changed(&service("default", "other"));
    t.track_reference(&web, &service("default", "raced")).unwrap();
    drop(reconcile);
    assert_eq!(take(&calls), [key("default", "raced")]);

    let reconcile = t.reconciling(&key("default", "elsewhere"));
    t.track_reference(&web, &service("default", "other-observer"))
        .unwrap();
    drop(reconcile);
    assert_eq!(
        take(&calls),
        [key("default", "other-observer")],
        "only the observer being reconciled is spared"
    );

    // The registrations made quietly are in place: a change reaches them.
    t.on_changed(&pod("default", "web-1", &[("app", "web")]));
    assert_eq!(take(&calls), [key("default", "quiet")]);

    // Outside a reconcile, a new registration calls back as before.
    advance(LEASE + Duration::from_secs(1)).await;
    t.track_reference(&web, &service("default", "quiet")).unwrap();
    assert_eq!(take(&calls), [key("default", "quiet")]);
}

/// A controller whose reconciler tracks what it reads reconciles a key once
/// when nothing it tracks changes, and again when its referent changes
/// between the read and the registration, the window the callback closes.
#[tokio::test(start_paused = true)]
async fn a_controller_reconciles_an_observer_once_unless_its_referent_changed_meanwhile() {
    use kinject_runtime::controller::{Action, ControllerOptions, Error, Impl, Reconciler};
    use tokio_util::sync::CancellationToken;

    /// Tracks the Service of its own name; the first time `raced` is
    /// reconciled, that Service changes (as its informer would report)
    /// between the read and the registration.
    struct Observer {
        tracker: Tracker,
        reconciles: Arc<Mutex<Vec<ObjectKey>>>,
    }

    impl Reconciler for Observer {
        async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
            let first = {
                let mut reconciles = self.reconciles.lock().unwrap();
                reconciles.push(key.clone());
                reconciles.iter().filter(|k| *k == key).count() == 1
            };
            // A reconciler reads, then awaits something, then registers.
            tokio::task::yield_now().await;
            if first && key.name == "raced" {
                self.tracker.on_changed(&service("default", &key.name));
            }
            let own = Reference::named("v1", "Service", "default", key.name.as_str());
            self.tracker
                .track_reference(&own, &service(&key.namespace, &key.name))
                .unwrap();
            Ok(Action::await_change())
        }
    }

    let reconciles = Arc::new(Mutex::new(Vec::new()));
    // One worker, so one reconcile's change cannot fall into another's.
    let options = ControllerOptions::default().concurrency(1);
    let controller = Impl::with_tracker("observers", options, |tracker| Observer {
        tracker,
        reconciles: reconciles.clone(),
    });
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });
    for name in ["quiet", "raced"] {
        controller.enqueue_key(key("default", name));
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    shutdown.cancel();
    run.await.unwrap();
    assert_eq!(
        take(&reconciles),
        [
            key("default", "quiet"),
            key("default", "raced"),
            key("default", "raced")
        ]
    );
}

/// A referent many objects track (a shared ConfigMap, say) keeps every
/// registration, renewal and removal exact however many observers it has:
/// the first few and the rest are held differently.
#[tokio::test(start_paused = true)]
async fn a_referent_with_many_observers_keeps_each_registration() {
    let (t, calls) = tracker();
    let shared = Reference::named("v1", "Service", "default", "shared");
    let observers: Vec<String> = (0..40).map(|i| format!("asvc-{i:02}")).collect();
    for name in &observers {
        t.track_reference(&shared, &service("default", name)).unwrap();
    }
    let all: Vec<ObjectKey> = observers.iter().map(|n| key("default", n)).collect();
    assert_eq!(take(&calls), all, "each registration is new once");
    // Renewing is not a new registration, before and after the 8th.
    for name in [&observers[3], &observers[30]] {
        t.track_reference(&shared, &service("default", name)).unwrap();
    }
    assert!(take(&calls).is_empty(), "renewals call nobody");
    t.on_deleted_observer(&service("default", &observers[0]));
    t.on_deleted_observer(&service("default", &observers[39]));
    assert_eq!(t.get_observers(&service("default", "shared")), all[1..39]);
    // The leases lapse together.
    tokio::time::advance(LEASE + Duration::from_secs(1)).await;
    assert!(t.get_observers(&service("default", "shared")).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_deleted_observer_is_forgotten() {
    let (t, calls) = tracker();
    let web = Reference::named("v1", "Service", "default", "web");
    let selected = Reference::selected("v1", "Pod", "default", app_selector("web"));
    for observer in ["gone", "stays"] {
        t.track_reference(&web, &service("default", observer)).unwrap();
        t.track_reference(&selected, &service("default", observer))
            .unwrap();
    }
    take(&calls);

    t.on_deleted_observer(&service("default", "gone"));
    t.on_changed(&service("default", "web"));
    t.on_changed(&pod("default", "p", &[("app", "web")]));
    assert_eq!(take(&calls), [key("default", "stays"), key("default", "stays")]);

    // Tracking again after deletion is a new registration.
    t.track_reference(&web, &service("default", "gone")).unwrap();
    assert_eq!(take(&calls), [key("default", "gone")]);
}

#[test]
fn validate_uses_knatives_rules_and_messages() {
    let ok = Reference::named(
        "samples.knative.dev/v1alpha1",
        "AddressableService",
        "default",
        "web",
    );
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(
        Reference::selected("apps/v1", "Deployment", "default", app_selector("web")).validate(),
        Ok(())
    );

    let missing = Reference::default().validate().unwrap_err();
    assert_eq!(
        missing.to_string(),
        "expected exactly one, got neither: name, selector\n\
         missing field(s): apiVersion, kind, namespace"
    );

    let both = Reference {
        selector: Some(app_selector("web")),
        ..ok.clone()
    };
    assert_eq!(
        both.validate().unwrap_err().to_string(),
        "expected exactly one, got both: name, selector"
    );

    // Sorted by message, as Knative's FieldError is.
    let bad = Reference::named("a/b/c", "Not-A-Kind", "Bad_NS", "a.b");
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "invalid value: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
         '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex \
         used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'): namespace\n\
         invalid value: a valid C identifier must start with alphabetic character or '_', followed by a \
         string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex \
         used for validation is '[A-Za-z_][A-Za-z0-9_]*'): kind\n\
         invalid value: a valid label key must consist of alphanumeric characters, '-', '_' or '.', and \
         must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
         regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS \
         subdomain prefix and '/' (e.g. 'example.com/MyName'): apiVersion\n\
         invalid value: must not contain dots: name"
    );

    let bad_selector = Reference::selected(
        "v1",
        "Pod",
        "default",
        LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "Near".into(),
                values: None,
            }]),
        },
    );
    assert_eq!(
        bad_selector.validate().unwrap_err().to_string(),
        "invalid value: \"Near\" is not a valid label selector operator: selector"
    );
}

#[test]
fn validate_object_reference_requires_a_name_and_forbids_a_selector() {
    let selected = Reference::selected("v1", "Pod", "default", app_selector("web"));
    assert_eq!(
        selected.validate_object_reference().unwrap_err().to_string(),
        "missing field(s): name\nmust not set the field(s): selector"
    );
    assert_eq!(
        Reference::named("v1", "Pod", "default", "web").validate_object_reference(),
        Ok(())
    );
}

#[tokio::test(start_paused = true)]
async fn track_reference_rejects_invalid_references_with_knatives_text() {
    let (t, calls) = tracker();
    let observer = service("default", "asvc");

    let err = t.track_reference(&Reference::default(), &observer).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid Reference:\n\
         APIVersion: name part must be non-empty\n\
         APIVersion: name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
         and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used \
         for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')\n\
         Kind: a valid C identifier must start with alphabetic character or '_', followed by a string of \
         alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for \
         validation is '[A-Za-z_][A-Za-z0-9_]*')\n\
         must provide either Name or Selector"
    );

    let both = Reference {
        selector: Some(app_selector("web")),
        ..Reference::named("v1", "Service", "default", "web")
    };
    assert_eq!(
        t.track_reference(&both, &observer).unwrap_err().problems(),
        ["cannot provide both Name and Selector"]
    );

    // The tracker accepts subdomain names (unlike validate) and no namespace.
    t.track_reference(&Reference::named("v1", "ConfigMap", "", "a.b"), &observer)
        .unwrap();
    let err = t
        .track_reference(&Reference::named("v1", "ConfigMap", "default", "A_B"), &observer)
        .unwrap_err();
    assert!(err.problems()[0].starts_with("Name: a lowercase RFC 1123 subdomain must consist of"));

    let empty_in = Reference::selected(
        "v1",
        "Pod",
        "default",
        LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "bad key".into(),
                operator: "In".into(),
                values: Some(Vec::new()),
            }]),
        },
    );
    assert_eq!(
        t.track_reference(&empty_in, &observer).unwrap_err().problems(),
        [
            "Selector: [key: Invalid value: \"bad key\": name part must consist of alphanumeric characters, \
          '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or \
          'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), \
          values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty]"
        ]
    );
    let exists_with_values = Reference::selected(
        "v1",
        "Pod",
        "default",
        LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "Exists".into(),
                values: Some(vec!["web".into()]),
            }]),
        },
    );
    assert_eq!(
        t.track_reference(&exists_with_values, &observer)
            .unwrap_err()
            .problems(),
        [
            "Selector: values: Invalid value: [\"web\"]: values set must be empty for exists and does not exist"
        ]
    );

    assert_eq!(
        take(&calls),
        [key("default", "asvc")],
        "only the valid reference registered"
    );
}
