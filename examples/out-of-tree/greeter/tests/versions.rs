//! Both versions of Greeting are served from one CRD, stored as v1beta1.

use greeting_api::{v1alpha1, v1beta1};
use kube::api::{Api, PostParams};

#[tokio::test]
async fn a_greeting_written_in_one_version_reads_in_the_other() {
    let crds = match greeter::generated::testing::custom_resource_definitions() {
        Ok(crds) => crds,
        Err(e) => panic!("the Greeting CRD does not build: {e}"),
    };
    assert_eq!(crds.len(), 1, "one CRD serves both versions");
    let stored: Vec<(&str, bool)> = crds[0]
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.storage))
        .collect();
    assert_eq!(stored, [("v1beta1", true), ("v1alpha1", false)]);

    let (ctx, _env) = match kinject_testing::context(&crds, []) {
        Ok(started) => started,
        Err(e) => panic!("testenv did not start: {e}"),
    };
    let alpha: Api<v1alpha1::Greeting> = Api::namespaced(ctx.client(), "default");
    let beta: Api<v1beta1::Greeting> = Api::namespaced(ctx.client(), "default");
    let mut greeting = v1alpha1::Greeting::new(
        "hi",
        v1alpha1::GreetingSpec {
            message: "Hello, versions!".to_owned(),
        },
    );
    greeting.metadata.namespace = Some("default".to_owned());
    if let Err(e) = alpha.create(&PostParams::default(), &greeting).await {
        panic!("create as v1alpha1: {e}");
    }
    let read = match beta.get("hi").await {
        Ok(read) => read,
        Err(e) => panic!("get as v1beta1: {e}"),
    };
    assert_eq!(read.spec.message, "Hello, versions!");
}
