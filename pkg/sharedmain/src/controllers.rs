//! The controllers a process runs, built from their constructors.

use kinject_runtime::controller::Impl;
use kinject_runtime::injection::{Constructor, Context, InformerSet};

use crate::error::MainError;

/// A [`Constructor`] named after the constructor's module:
/// `controller!(addressableservice::new_controller)` is the controller
/// `addressableservice`.
#[macro_export]
macro_rules! controller {
    ($($path:tt)+) => {
        $crate::Constructor::from_path(stringify!($($path)+), $($path)+)
    };
}

/// A built controller and the informers its constructor asked for: it starts
/// working once those have synced.
#[derive(Debug)]
pub struct Built {
    /// The controller.
    pub controller: Impl,
    /// The informers its constructor asked for, shared or not.
    pub informers: InformerSet,
}

/// Builds the controllers of `constructors` whose names `disabled` does not
/// list. A disabled controller is never built, so it registers no informer and
/// nothing of it starts; a name in `disabled` that no constructor has is an
/// error listing the names there are.
pub fn construct(
    ctx: &Context,
    constructors: &[Constructor],
    disabled: &[String],
) -> Result<Vec<Built>, MainError> {
    if let Some(unknown) = disabled
        .iter()
        .find(|d| !constructors.iter().any(|c| c.name() == d.as_str()))
    {
        let known: Vec<&str> = constructors.iter().map(Constructor::name).collect();
        return Err(MainError::BadFlag(format!(
            "--disable-controllers names {unknown:?}, which is not a controller of this process; \
             the controllers are: {}",
            known.join(", ")
        )));
    }
    let mut controllers = Vec::new();
    for constructor in constructors {
        if disabled.iter().any(|d| d == constructor.name()) {
            tracing::info!("Disabling controller {}", constructor.name());
            continue;
        }
        let (controller, informers) = ctx.recording(|ctx| constructor.construct(ctx));
        controllers.push(Built {
            controller,
            informers,
        });
    }
    tracing::info!("Registered {} controllers", controllers.len());
    Ok(controllers)
}

#[cfg(test)]
mod tests {
    use super::*;

    mod reconcilers {
        pub(super) mod addressableservice {
            use kinject_runtime::controller::{Error, Impl, Reconciler};
            use kinject_runtime::injection::Context;

            struct Noop;

            impl Reconciler for Noop {
                async fn reconcile(
                    &self,
                    _key: &kinject_runtime::controller::ObjectKey,
                ) -> Result<kinject_runtime::controller::Action, Error> {
                    Ok(kinject_runtime::controller::Action::await_change())
                }
            }

            pub(crate) fn new_controller(ctx: &Context) -> Impl {
                // Registers an informer, as a real constructor does.
                let _ = ctx.informer::<k8s_openapi::api::core::v1::ConfigMap>();
                Impl::new("addressableservice", Noop, Default::default())
            }
        }
    }

    #[test]
    fn constructors_are_named_after_their_module() {
        use reconcilers::addressableservice;
        assert_eq!(
            crate::controller!(reconcilers::addressableservice::new_controller).name(),
            "addressableservice"
        );
        assert_eq!(
            crate::controller!(addressableservice::new_controller).name(),
            "addressableservice"
        );
        assert_eq!(
            Constructor::new("greeter", addressableservice::new_controller).name(),
            "greeter"
        );
    }

    /// An offline context: building controllers makes no request.
    fn offline_context() -> Context {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
        });
        Context::new(kube::Client::new(service, "default"))
    }

    #[tokio::test]
    async fn a_disabled_controller_is_never_built() {
        let constructors = [crate::controller!(
            reconcilers::addressableservice::new_controller
        )];
        let ctx = offline_context();
        let built = construct(&ctx, &constructors, &["addressableservice".to_owned()]).unwrap();
        assert!(built.is_empty());
        assert!(
            ctx.informer_descriptions().is_empty(),
            "{:?}",
            ctx.informer_descriptions()
        );

        let built = construct(&ctx, &constructors, &[]).unwrap();
        assert_eq!(built.len(), 1);
        assert_eq!(ctx.informer_descriptions().len(), 1);
        assert_eq!(
            built[0].informers.unsynced().len(),
            1,
            "the controller waits for the informer its constructor asked for"
        );

        let err = construct(&ctx, &constructors, &["addressablesvc".to_owned()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--disable-controllers names \"addressablesvc\", which is not a controller of this process; \
             the controllers are: addressableservice"
        );
    }
}
