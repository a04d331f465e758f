//! The `token` subresource of ServiceAccounts (a TokenRequest, `kubectl create
//! token`): the token it mints authenticates as the account, and it is checked,
//! defaulted and authorized as kube-apiserver's token registry does.

use crate::common;

use common::{api_err, client_with_kubeconfig};
use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, SelfSubjectReview, TokenRequest, TokenRequestSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kinject_testenv::TestEnv;
use kube::api::{Api, PostParams};
use serde_json::json;

/// A server with service account `shop/bot`.
fn with_bot() -> TestEnv {
    let env = TestEnv::builder().namespace("shop").build();
    env.create_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "bot", "namespace": "shop"}}))
        .unwrap();
    env
}

fn request(expiration_seconds: Option<i64>) -> TokenRequest {
    TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn a_token_request_mints_a_token_that_authenticates_as_the_account() {
    let env = with_bot();
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "shop");
    let answer = accounts
        .create_token_request("bot", &PostParams::default(), &request(None))
        .await
        .unwrap();
    assert_eq!(answer.metadata.name.as_deref(), Some("bot"));
    assert_eq!(answer.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(
        answer.spec.expiration_seconds,
        Some(3600),
        "kube-apiserver's default"
    );
    assert_eq!(
        answer.spec.audiences,
        vec!["https://kubernetes.default.svc.cluster.local".to_owned()]
    );
    let status = answer.status.unwrap();
    assert_eq!(status.token, env.service_account_token("shop", "bot"));
    let created = answer.metadata.creation_timestamp.unwrap().0;
    assert_eq!(
        status.expiration_timestamp.0.duration_since(created).as_secs(),
        3600,
        "it expires when it says"
    );
    assert_eq!(
        env.request_count("create", "serviceaccounts"),
        1,
        "logged as its resource's create"
    );

    let server = env.serve().await.unwrap();
    let as_bot = client_with_kubeconfig(&server.kubeconfig_with_token(&status.token)).await;
    let me = Api::<SelfSubjectReview>::all(as_bot)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    assert_eq!(
        me.status.unwrap().user_info.unwrap().username.as_deref(),
        Some("system:serviceaccount:shop:bot")
    );
    let mut asked = request(Some(7200));
    asked.spec.audiences = vec!["vault".into()];
    let answer = accounts
        .create_token_request("bot", &PostParams::default(), &asked)
        .await
        .unwrap();
    assert_eq!(
        (answer.spec.audiences, answer.spec.expiration_seconds),
        (vec!["vault".to_owned()], Some(7200))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_token_request_needs_the_account_and_a_sane_lifetime() {
    let env = with_bot();
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "shop");
    let refused = |name: &'static str, req: TokenRequest| {
        let accounts = accounts.clone();
        async move {
            api_err(
                accounts
                    .create_token_request(name, &PostParams::default(), &req)
                    .await
                    .unwrap_err(),
            )
        }
    };
    let err = refused("ghost", request(None)).await;
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "serviceaccounts \"ghost\" not found")
    );
    let err = refused("bot", request(Some(599))).await;
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
        )
    );
    let err = refused("bot", request(Some((1 << 32) + 1))).await;
    assert!(
        err.message
            .ends_with("spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds"),
        "{}",
        err.message
    );
    accounts
        .create_token_request("bot", &PostParams::default(), &request(Some(600)))
        .await
        .unwrap();
    let mut renamed = request(None);
    renamed.metadata.name = Some("other".into());
    let err = refused("bot", renamed).await;
    assert_eq!(
        err.message,
        "TokenRequest.authentication.k8s.io \"bot\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified"
    );
}

#[tokio::test]
async fn a_bound_token_needs_its_object() {
    let env = with_bot();
    let pod = env
        .create_object(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "runner", "namespace": "shop"},
            "spec": {"serviceAccountName": "bot", "containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
    env.create_object(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stranger", "namespace": "shop"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "shop");
    let bound = |kind: &str, api_version: &str, name: &str, uid: Option<&str>| {
        let mut req = request(None);
        req.spec.bound_object_ref = Some(BoundObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(name.into()),
            uid: uid.map(str::to_owned),
        });
        req
    };
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let answer = accounts
        .create_token_request(
            "bot",
            &PostParams::default(),
            &bound("Pod", "v1", "runner", Some(uid)),
        )
        .await
        .unwrap();
    assert_eq!(
        answer.spec.bound_object_ref.and_then(|r| r.name).as_deref(),
        Some("runner")
    );
    for (req, code, message) in [
        (bound("Pod", "v1", "gone", None), 404, "pods \"gone\" not found".to_owned()),
        (
            bound("Pod", "v1", "stranger", None),
            400,
            "cannot bind token for serviceaccount \"bot\" to pod running with different serviceaccount name.".to_owned(),
        ),
        (
            bound("Pod", "v1", "runner", Some("0000")),
            409,
            "Operation cannot be fulfilled on Pod \"runner\": the UID in the bound object reference (0000) does not match the UID in record. The object might have been deleted and then recreated".to_owned(),
        ),
        (
            bound("Deployment", "apps/v1", "web", None),
            400,
            "cannot bind token to object of type apps/v1, Kind=Deployment".to_owned(),
        ),
    ] {
        let err = api_err(
            accounts
                .create_token_request("bot", &PostParams::default(), &req)
                .await
                .unwrap_err(),
        );
        assert_eq!((err.code, err.message), (code, message));
    }
}

#[tokio::test]
async fn a_token_request_is_the_create_verb_on_serviceaccounts_token() {
    let env = with_bot();
    let server = env.serve().await.unwrap();
    let token = env.service_account_token("shop", "bot");
    let bot = client_with_kubeconfig(&server.kubeconfig_with_token(&token)).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(bot, "shop");
    let err = api_err(
        accounts
            .create_token_request("bot", &PostParams::default(), &request(None))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            "serviceaccounts \"bot\" is forbidden: User \"system:serviceaccount:shop:bot\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"shop\""
        )
    );
    for obj in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "tokens", "namespace": "shop"},
            "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "bot-tokens", "namespace": "shop"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tokens"}}),
    ] {
        env.create_object(obj).unwrap();
    }
    let answer = accounts
        .create_token_request("bot", &PostParams::default(), &request(None))
        .await
        .unwrap();
    assert_eq!(answer.status.unwrap().token, token);
    server.shutdown().await;
}

#[tokio::test]
async fn the_token_subresource_is_discovered_and_only_created() {
    let env = with_bot();
    let client = env.client();
    let path = "/api/v1/namespaces/shop/serviceaccounts/bot/token";
    for method in ["GET", "PUT", "PATCH", "DELETE"] {
        let (code, body) = common::send_bytes(&client, method, path, &[], Vec::new()).await;
        assert_eq!(
            (code, &body["reason"]),
            (405, &json!("MethodNotAllowed")),
            "{method}"
        );
    }
    let (code, _) = common::send_bytes(
        &client,
        "POST",
        "/api/v1/namespaces/shop/configmaps/x/token",
        &[("content-type", "application/json")],
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 404, "only service accounts have tokens");
    let (_, list) = common::send_bytes(&client, "GET", "/api/v1", &[], Vec::new()).await;
    let token = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "serviceaccounts/token")
        .unwrap();
    assert_eq!(
        token,
        &json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true,
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]})
    );
    let (_, aggregated) = common::send_bytes(
        &client,
        "GET",
        "/api",
        &[(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        Vec::new(),
    )
    .await;
    let accounts = aggregated["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "serviceaccounts")
        .unwrap();
    assert_eq!(
        accounts["subresources"],
        json!([{"subresource": "token", "verbs": ["create"],
            "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}}])
    );
}
