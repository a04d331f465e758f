//! `controllers!`: one declaration per reconciler module gives the module and
//! its entry in `controllers()`.

use kinject_runtime::injection::Context;

kinject_runtime::controllers! {
    /// Attributes and visibility are kept.
    pub mod greeter;
    mod janitor;
}

fn offline_context() -> Context {
    let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
        Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
    });
    Context::new(kube::Client::new(service, "default"))
}

#[tokio::test]
async fn every_declared_module_is_a_controller_named_after_it() {
    let constructors = controllers();
    let names: Vec<&str> = constructors.iter().map(|c| c.name()).collect();
    assert_eq!(names, ["greeter", "janitor"], "in declaration order");
    let ctx = offline_context();
    let built: Vec<String> = constructors
        .iter()
        .map(|c| c.construct(&ctx).name().to_owned())
        .collect();
    assert_eq!(built, ["greeter-controller", "janitor-controller"]);
    assert_eq!(format!("{:?}", constructors[0]), "Constructor(\"greeter\")");
}
