//! Knative's status pre- and post-processing around `reconcile_kind`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::fixtures::{Widget, WidgetSpec, WidgetStatus};

use kinject_runtime::reconciler::{StatusHooks, post_process, pre_process};
use kinject_types::{ConditionStatus, ConditionType, KRShaped, VolatileTime};

fn asvc(generation: i64, status: Option<WidgetStatus>) -> Widget {
    let mut a = Widget::new(
        "rut",
        WidgetSpec {
            service_name: "webhook".into(),
        },
    );
    a.metadata.generation = Some(generation);
    a.status = status;
    a
}

#[test]
fn pre_process_initialises_and_flags_a_new_generation() {
    let mut a = asvc(2, None);
    pre_process(&mut a);
    let ready = a
        .duck_status()
        .unwrap()
        .get_condition(&ConditionType::READY)
        .unwrap();
    assert_eq!(ready.status, ConditionStatus::Unknown);
    assert_eq!(ready.reason, "NewObservedGenFailure");
    assert_eq!(ready.message, "unsuccessfully observed a new generation");
}

#[test]
fn pre_process_leaves_an_observed_generation_alone() {
    let mut status = WidgetStatus::default();
    status.mark_service_available();
    status.status.observed_generation = 3;
    let mut a = asvc(3, Some(status));
    pre_process(&mut a);
    assert!(a.status.as_ref().unwrap().is_ready());
}

#[test]
fn post_process_records_generation_and_grooms_transition_times() {
    let old_time = VolatileTime(Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2020-01-01T00:00:00Z".parse().unwrap(),
    )));
    let mut old_status = WidgetStatus::default();
    old_status.mark_service_available();
    old_status.status.conditions[0].last_transition_time = old_time.clone();
    let old = asvc(4, Some(old_status));

    let mut unchanged = old.clone();
    unchanged.status.as_mut().unwrap().status.conditions[0].last_transition_time = VolatileTime::now();
    post_process(&mut unchanged, &old);
    let status = unchanged.status.as_ref().unwrap();
    assert_eq!(status.status.observed_generation, 4);
    assert_eq!(
        status.status.conditions[0].last_transition_time.time(),
        old_time.time()
    );

    let mut changed = old.clone();
    changed
        .status
        .as_mut()
        .unwrap()
        .mark_service_unavailable("webhook");
    post_process(&mut changed, &old);
    let time = changed.status.as_ref().unwrap().status.conditions[0]
        .last_transition_time
        .time();
    assert!(
        time > old_time.time(),
        "a changed condition gets a new transition time"
    );
}

#[test]
fn status_hooks_treat_missing_and_empty_alike() {
    let hooks = StatusHooks::<Widget>::new();
    let none = asvc(1, None);
    let empty = asvc(1, Some(WidgetStatus::default()));
    assert!(hooks.equal(&none, &empty));
    let mut ready = WidgetStatus::default();
    ready.mark_service_available();
    let ready = asvc(1, Some(ready));
    assert!(!hooks.equal(&none, &ready));
    let mut copy = none.clone();
    hooks.copy(&ready, &mut copy);
    assert!(hooks.equal(&copy, &ready));
}
