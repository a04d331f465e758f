//! Greeting: writes `spec.message` into the ConfigMap named after the
//! Greeting, owned by it, and reports Ready.

use std::collections::BTreeMap;

use greeting_api::v1alpha1::Greeting;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_runtime::apis::{HasStatus, Validatable};
use kinject_runtime::controller::{Impl, ResultExt};
use kinject_runtime::injection::Context;
use kinject_runtime::lister::Lister;
use kinject_runtime::owner::set_controller_ref;
use kinject_runtime::rbac::Verb;
use kinject_runtime::reconciler::{
    Event, NoFinalizer, ReconcileContext, ReconcileKind, ReconcileResult, Reconciled,
};
use kube::ResourceExt;

use crate::generated::core::v1::configmap;
use crate::generated::hello::v1alpha1::greeting;

/// The ConfigMap key holding the message.
pub const MESSAGE_KEY: &str = "message";

/// Reconciles Greetings.
#[derive(Debug)]
pub struct Reconciler {
    ctx: Context,
    config_maps: Lister<ConfigMap>,
}

#[kinject_runtime::async_trait]
impl ReconcileKind<Greeting> for Reconciler {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(&self, _ctx: &ReconcileContext, g: &mut Greeting) -> ReconcileResult {
        if let Err(problem) = g.validate() {
            g.status_mut().mark_invalid_spec(&problem);
            return Ok(Reconciled::event(Event::warning("InvalidSpec", problem.to_string())));
        }
        let namespace = g.namespace().unwrap_or_default();
        let name = g.name_any();
        let data = BTreeMap::from([(MESSAGE_KEY.to_owned(), g.spec.message.clone())]);
        let client = configmap::Client::new(&self.ctx, &namespace);
        let existing = self
            .config_maps
            .namespaced(&namespace)
            .get(&name)
            .context("failed to read the ConfigMap")?;
        match existing {
            None => {
                let mut cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                set_controller_ref(&mut cm, g).context("failed to own the ConfigMap")?;
                client.create(&cm).await.context("failed to create the ConfigMap")?;
            }
            Some(cm) if cm.data.as_ref() != Some(&data) => {
                let mut cm = (*cm).clone();
                cm.data = Some(data);
                client.update(&cm).await.context("failed to update the ConfigMap")?;
            }
            Some(_) => {}
        }
        g.status_mut().mark_published(&name);
        Ok(Reconciled::done())
    }
}

/// The Greeting controller: reconciles on every Greeting change and on every
/// change to a ConfigMap a Greeting owns.
pub fn new_controller(ctx: &Context) -> Impl {
    let greetings = greeting::get(ctx);
    let config_maps = configmap::get(ctx);
    // What reconcile_kind writes itself.
    ctx.needs::<ConfigMap>(&[Verb::Create, Verb::Update]);
    let reconciler = Reconciler {
        ctx: ctx.clone(),
        config_maps: config_maps.lister(),
    };
    let controller = greeting::reconciler::new_impl(ctx, reconciler, greeting::reconciler::Options::default());
    greetings.add_event_handler(controller.enqueue_handler());
    config_maps.add_event_handler(controller.enqueue_controller_handler::<Greeting, ConfigMap>());
    controller
}
