//! SimpleDeployment: keeps `spec.replicas` pods of `spec.image` running and
//! reports how many are ready.

use std::sync::Arc;
use std::time::Duration;

use apis::v1alpha1::{SIMPLE_DEPLOYMENT_CONDITION_READY, SimpleDeployment};
use generated::core::v1::pod;
use generated::samples::v1alpha1::simpledeployment;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_runtime::apis::{HasStatus, Validatable};
use kinject_runtime::reconciler::{Batched, slow_start};
use kinject_runtime::controller::{Error, Impl, ResultExt};
use kinject_runtime::expectations::Expectations;
use kinject_runtime::injection::Context;
use kinject_runtime::key::ObjectKey;
use kinject_runtime::lister::Lister;
use kinject_runtime::owner::{OwnerRefError, controller_key, set_controller_ref};
use kinject_runtime::rbac::Verb;
use kinject_runtime::reconciler::{Event, NoFinalizer, ReconcileContext, ReconcileKind, ReconcileResult, Reconciled};
use kube::ResourceExt;
use kube::api::DeleteParams;
use kube::core::Selector;

/// The most pods one reconcile creates; a larger gap is closed over several
/// reconciles, so a shutdown or a changed spec is noticed in between.
pub const BURST_REPLICAS: usize = 500;

/// The label tying a pod to its SimpleDeployment.
pub const POD_OWNER_LABEL: &str = "samples.knative.dev/podOwner";

/// Reconciles SimpleDeployments.
#[derive(Debug)]
pub struct Reconciler {
    ctx: Context,
    pod_lister: Lister<Pod>,
    /// Pod creates and deletes made and not yet seen by `pod_lister`, per
    /// SimpleDeployment: counting pods before they show would create them twice.
    expectations: Arc<Expectations>,
}

#[kinject_runtime::async_trait]
impl ReconcileKind<SimpleDeployment> for Reconciler {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(&self, ctx: &ReconcileContext, d: &mut SimpleDeployment) -> ReconcileResult {
        // Knative's sample crashes on a negative replica count; an invalid spec
        // stored without the webhook ends in a clear status and event instead.
        if let Err(invalid) = d.validate() {
            let message = invalid.to_string();
            // The status update below brings the object back through the
            // informer; the event is for the change of spec, not each pass.
            let said_already = d
                .status
                .as_ref()
                .and_then(|s| s.status.get_condition(&SIMPLE_DEPLOYMENT_CONDITION_READY))
                .is_some_and(|ready| ready.is_false() && ready.reason == "InvalidSpec" && ready.message == message);
            d.status_mut().mark_invalid_spec(&message);
            if said_already {
                return Ok(Reconciled::done());
            }
            return Ok(Reconciled::event(Event::warning("InvalidSpec", message)));
        }
        let namespace = d.namespace().unwrap_or_default();
        let name = d.name_any();
        let key = ObjectKey::new(&namespace, &name);
        if let Some(wait) = self.expectations.remaining(&key) {
            // The pods this key created or deleted are still on their way to
            // the cache; each one enqueues the key when it arrives.
            tracing::debug!("waiting for the cache to show the pods created and deleted before");
            return Ok(Reconciled::requeue_after(wait));
        }
        let selector = Selector::from_iter([(POD_OWNER_LABEL.to_owned(), name.clone())]);
        let existing = self
            .pod_lister
            .namespaced(&namespace)
            .list(&selector)
            .context("failed to list existing pods")?;
        tracing::debug!("Found {} pods in total", existing.len());

        let (current, outdated): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
            existing.into_iter().partition(|p| runs_image(p, &d.spec.image));
        let pods = pod::Client::new(&self.ctx, &namespace);
        // Many pods go in slow-start batches (1, 2, 4, …): a refused request
        // stops the rest, and a shutdown stops between batches.
        let stop = ctx.cancellation();
        let replicas = usize::try_from(d.spec.replicas).unwrap_or_default();
        let surplus: Vec<&Arc<Pod>> = if current.len() > replicas {
            // Listers return pods sorted by name, so which pods go is
            // deterministic (Knative's order depends on a map).
            current.iter().take(current.len() - replicas).collect()
        } else {
            Vec::new()
        };
        let doomed: Vec<String> = outdated.iter().chain(surplus).map(|p| p.name_any()).collect();
        // At most BURST_REPLICAS creates per reconcile (client-go's ReplicaSet
        // controller uses 500 too); the rest come with the requeue.
        let missing = replicas.saturating_sub(current.len());
        let more_later = missing > BURST_REPLICAS;
        let missing = missing.min(BURST_REPLICAS);
        // Before anything is expected or written: a SimpleDeployment that
        // cannot own pods (one never stored has no uid) will not learn to by
        // retrying.
        let template = make_pod(d).map_err(Error::permanent)?;
        self.expectations
            .expect(&key, count(missing), count(doomed.len()));
        let deleted = slow_start(doomed.len(), stop, |i| {
            let (pods, name) = (&pods, &doomed[i]);
            async move { pods.delete(name, &DeleteParams::default()).await.map(drop) }
        })
        .await;
        if !matches!(deleted, Batched::Done) {
            // Deletes that did not happen will not be observed, and no create
            // is tried after a failed delete.
            let unfinished = doomed.len() - deleted.succeeded_of(doomed.len());
            self.expectations.lower(&key, count(missing), count(unfinished));
        }
        if let Some(requeue) = finished(deleted, "failed to delete pod")? {
            return Ok(requeue);
        }
        // A fresh pod per create: Knative reuses one object, which a
        // generate-name reactor mutates under it.
        let created = slow_start(missing, stop, |_| {
            let (pods, pod) = (&pods, template.clone());
            async move { pods.create(&pod).await.map(drop) }
        })
        .await;
        self.expectations
            .lower(&key, count(missing - created.succeeded_of(missing)), 0);
        if let Some(requeue) = finished(created, "failed to create pod")? {
            return Ok(requeue);
        }
        if more_later {
            return Ok(Reconciled::requeue_after(Duration::ZERO));
        }

        // Readiness counts the pods that existed before this reconcile, as
        // Knative does; new pods are counted once they report.
        let ready = current.iter().filter(|p| is_ready(p)).count();
        let status = d.status_mut();
        status.ready_replicas = i32::try_from(ready).unwrap_or(i32::MAX);
        if ready >= replicas {
            status.mark_pods_ready();
        } else {
            status.mark_pods_not_ready(i32::try_from(replicas - ready).unwrap_or(i32::MAX));
        }
        Ok(Reconciled::done())
    }
}

/// `Ok(None)` when every call of a batch run succeeded; a failure is the
/// error (with `context`), and a run cut short by shutdown asks to come back
/// at once, for the next leader.
fn finished(outcome: Batched<kube::Error>, context: &'static str) -> Result<Option<Reconciled>, Error> {
    match outcome {
        Batched::Done => Ok(None),
        Batched::Cancelled { .. } => Ok(Some(Reconciled::requeue_after(Duration::ZERO))),
        Batched::Failed { error, .. } => Err(Error::from(error).context(context)),
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// True when the pod's first container runs `image`; a pod without containers
/// runs nothing (Knative's sample panics on it) and is replaced.
fn runs_image(pod: &Pod, image: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .is_some_and(|i| i == image)
}

/// Running, not being deleted, and with a Ready=True condition.
fn is_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    pod.metadata.deletion_timestamp.is_none()
        && status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod a SimpleDeployment runs, controlled by it; an error when `d` has
/// no uid, as only an object never stored can.
pub fn make_pod(d: &SimpleDeployment) -> Result<Pod, OwnerRefError> {
    let name = d.name_any();
    let mut pod = Pod {
        metadata: ObjectMeta {
            namespace: d.namespace(),
            generate_name: Some(format!("{name}-")),
            labels: Some([(POD_OWNER_LABEL.to_owned(), name)].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "user-container".to_owned(),
                image: Some(d.spec.image.clone()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    };
    set_controller_ref(&mut pod, d)?;
    Ok(pod)
}

/// The SimpleDeployment controller: reconciles on every SimpleDeployment
/// change, and on changes of the pods a SimpleDeployment controls.
pub fn new_controller(ctx: &Context) -> Impl {
    let sd_informer = simpledeployment::get(ctx);
    // Compact: a reconcile reads the few pods of one SimpleDeployment, while
    // the cache holds every pod the controller owns; decoded, a pod costs
    // several times its JSON.
    let pod_informer = pod::compact::get(ctx);
    // What `reconcile_kind` writes itself; config/'s RBAC is generated from it.
    ctx.needs::<Pod>(&[Verb::Create, Verb::Delete]);
    let expectations = Arc::new(Expectations::new());
    let reconciler = Reconciler {
        ctx: ctx.clone(),
        pod_lister: pod_informer.lister(),
        expectations: expectations.clone(),
    };
    let controller = simpledeployment::reconciler::new_impl(
        ctx,
        reconciler,
        simpledeployment::reconciler::Options::default(),
    );

    let (forget, deleted) = (expectations.clone(), controller.clone());
    sd_informer.add_event_handler(controller.enqueue_handler().on_delete(move |d: &SimpleDeployment| {
        forget.forget(&ObjectKey::of(d));
        deleted.enqueue(d);
    }));
    // The runtime's owner handler filters and enqueues; adds and deletes also
    // count down the expectations of the SimpleDeployment that made them.
    let enqueue = controller.clone();
    pod_informer.add_event_handler(expectations.counting(
        controller.enqueue_controller_handler::<SimpleDeployment, Pod>(),
        controller_key::<SimpleDeployment, Pod>,
        move |key| enqueue.enqueue_key(key),
    ));
    controller
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::v1alpha1::SimpleDeploymentSpec;
    use kinject_runtime::owner::controller_of;

    fn sd(uid: Option<&str>) -> SimpleDeployment {
        let mut d = SimpleDeployment::new(
            "sd",
            SimpleDeploymentSpec {
                image: "busybox".into(),
                replicas: 1,
            },
        );
        d.metadata.namespace = Some("ns".into());
        d.metadata.uid = uid.map(Into::into);
        d
    }

    #[test]
    fn pods_are_controlled_by_their_simple_deployment() {
        let pod = make_pod(&sd(Some("u-1"))).unwrap();
        let owner = controller_of(&pod).unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("SimpleDeployment", "sd", "u-1")
        );
        assert_eq!(
            controller_key::<SimpleDeployment, _>(&pod),
            Some(ObjectKey::new("ns", "sd"))
        );
    }

    /// Knative's sample would send a pod whose owner reference has an empty
    /// uid, which the API server refuses on every create.
    #[test]
    fn a_simple_deployment_without_uid_makes_no_pod() {
        assert!(matches!(
            make_pod(&sd(None)),
            Err(OwnerRefError::MissingUid { .. })
        ));
    }
}
