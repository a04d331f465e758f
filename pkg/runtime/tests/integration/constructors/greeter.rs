use kinject_runtime::controller::{Error, Impl, Reconciler};
use kinject_runtime::injection::Context;

struct Greeter;

impl Reconciler for Greeter {
    async fn reconcile(&self, _key: &kinject_runtime::controller::ObjectKey) -> Result<kinject_runtime::controller::Action, Error> {
        Ok(kinject_runtime::controller::Action::await_change())
    }
}

pub(crate) fn new_controller(_ctx: &Context) -> Impl {
    Impl::new("greeter-controller", Greeter, Default::default())
}
