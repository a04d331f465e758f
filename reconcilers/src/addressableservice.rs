//! AddressableService: exposes a Service as an Addressable by writing its URL
//! into `status.address`.

use apis::v1alpha1::AddressableService;
use generated::core::v1::service;
use generated::samples::v1alpha1::addressableservice;
use k8s_openapi::api::core::v1::Service;
use kinject_runtime::apis::HasStatus;
use kinject_runtime::apis::Url;
use kinject_runtime::apis::duck::v1::Addressable;
use kinject_runtime::controller::{Impl, ResultExt};
use kinject_runtime::injection::Context;
use kinject_runtime::lister::Lister;
use kinject_runtime::network;
use kinject_runtime::reconciler::{Event, NoFinalizer, ReconcileContext, ReconcileKind, ReconcileResult, Reconciled};
use kinject_runtime::tracker::Reference;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;

/// Reconciles AddressableServices.
#[derive(Debug)]
pub struct Reconciler {
    /// Services' metadata alone: their existence is all this reads.
    service_lister: Lister<PartialObjectMeta<Service>>,
    cluster_domain: String,
}

#[kinject_runtime::async_trait]
impl ReconcileKind<AddressableService> for Reconciler {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(&self, ctx: &ReconcileContext, asvc: &mut AddressableService) -> ReconcileResult {
        // Knative leaves an invalid reference to the tracker, whose error
        // surfaces only as NewObservedGenFailure and endless retries; here the
        // status says which field is wrong and why, and nothing is retried
        // until the spec changes.
        if let Err(problem) = asvc.spec.validate().map_err(|e| e.via_field("spec")) {
            asvc.status_mut().mark_invalid_service_name(&problem);
            return Ok(Reconciled::event(Event::warning("InvalidServiceName", problem.to_string())));
        }
        let namespace = asvc.namespace().unwrap_or_default();
        let service_name = asvc.spec.service_name.clone();
        // Re-enqueues this AddressableService when the Service it names changes.
        let reference = Reference::named("v1", "Service", namespace.as_str(), service_name.as_str());
        if let Err(err) = ctx.tracker().track_reference(&reference, asvc) {
            tracing::error!("Error tracking service {service_name}: {err}");
            return Err(err.into());
        }

        let status = asvc.status_mut();
        match self.service_lister.get_by_key(&namespace, &service_name)? {
            None => {
                tracing::info!("Service does not yet exist: {service_name}");
                // As in Knative, a previous address stays: clients may still
                // reach it once the Service is back.
                status.mark_service_unavailable(&service_name);
            }
            Some(_) => {
                let host = network::service_hostname(&service_name, &namespace, &self.cluster_domain);
                let url = Url::http(&host).context("the Service's host name is not a valid URL")?;
                status.mark_service_available();
                status.address = Some(Addressable {
                    url: Some(url),
                    ..Addressable::default()
                });
            }
        }
        Ok(Reconciled::done())
    }
}

/// The AddressableService controller: reconciles on every AddressableService
/// change, and on every change of a Service an AddressableService names.
pub fn new_controller(ctx: &Context) -> Impl {
    let asvc_informer = addressableservice::get(ctx);
    // Metadata alone: an AddressableService's URL needs only the Service's
    // name and namespace, and a cluster's Services cached whole would cost
    // several times the memory.
    let service_informer = service::metadata::get(ctx);
    let reconciler = Reconciler {
        service_lister: service_informer.lister(),
        cluster_domain: ctx.cluster_domain().to_owned(),
    };
    let controller = addressableservice::reconciler::new_impl(
        ctx,
        reconciler,
        addressableservice::reconciler::Options::default(),
    );
    asvc_informer.add_event_handler(controller.enqueue_handler());
    service_informer.add_event_handler(controller.tracker().handler());
    controller
}
