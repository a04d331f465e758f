//! Impersonation headers (`kubectl --as`, `--as-group`; kube's kubeconfig `as`):
//! the request becomes the impersonated user's once the requestor may impersonate
//! each part of it, as kube-apiserver's impersonation filter decides.

use crate::common;

use common::{api_err, client_with_kubeconfig};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::reviews::shop;

const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// POSTs an empty SelfSubjectReview with `headers`: the status code and the body as
/// text.
async fn whoami(client: &kube::Client, headers: &[(&str, &str)]) -> (u16, String) {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(WHOAMI)
        .header("content-type", "application/json");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let res = client
        .send(req.body(kube::client::Body::from(b"{}".to_vec())).unwrap())
        .await
        .unwrap();
    let code = res.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

fn user_info(body: &str) -> Value {
    serde_json::from_str::<Value>(body).unwrap()["status"]["userInfo"].clone()
}

#[tokio::test]
async fn an_administrator_acts_as_whoever_the_headers_name() {
    let env = shop();
    let client = env.client();
    let (code, body) = whoami(&client, &[("Impersonate-User", "system:serviceaccount:shop:bot")]).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        user_info(&body),
        json!({"username": "system:serviceaccount:shop:bot",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"]})
    );
    let (_, body) = whoami(
        &client,
        &[
            ("Impersonate-User", "jane"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Uid", "1234"),
            ("Impersonate-Extra-Scopes", "read"),
            ("Impersonate-Extra-Scopes", "write"),
        ],
    )
    .await;
    assert_eq!(
        user_info(&body),
        json!({"username": "jane", "uid": "1234", "groups": ["devs", "ops", "system:authenticated"],
            "extra": {"scopes": ["read", "write"]}})
    );
    let (code, body) = whoami(&client, &[("Impersonate-Group", "devs")]).await;
    assert_eq!(
        (code, body.as_str()),
        (
            500,
            "Internal Server Error: \"/apis/authentication.k8s.io/v1/selfsubjectreviews\": requested [{Group  devs    }] without impersonating a user\n"
        )
    );
}

/// kube's kubeconfig `as` sends the headers too; the impersonated account is then
/// authorized for everything the request does, discovery included.
#[tokio::test]
async fn the_impersonated_user_is_authorized_for_the_request() {
    let env = shop();
    let server = env.serve().await.unwrap();
    let mut kubeconfig: Value = serde_json::from_str(&server.kubeconfig()).unwrap();
    kubeconfig["users"][0]["user"] = json!({"as": "system:serviceaccount:shop:bot"});
    let as_bot = client_with_kubeconfig(&kubeconfig.to_string()).await;
    as_bot.apiserver_version().await.unwrap();
    let err = api_err(
        Api::<Pod>::namespaced(as_bot.clone(), "shop")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "pods is forbidden: User \"system:serviceaccount:shop:bot\" cannot list resource \"pods\" in API group \"\" in the namespace \"shop\""
    );
    kubeconfig["users"][0]["user"] = json!({"as": "jane", "as-groups": ["devs"]});
    let as_jane = client_with_kubeconfig(&kubeconfig.to_string()).await;
    Api::<Pod>::namespaced(as_jane, "shop")
        .list(&ListParams::default())
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn impersonating_needs_the_impersonate_verb_on_each_part() {
    let env = shop();
    let client = env.client();
    let bearer = format!("Bearer {}", env.service_account_token("shop", "bot"));
    let as_bot = |extra: &[(&'static str, &'static str)]| {
        let mut headers = vec![("authorization", bearer.clone())];
        headers.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        headers
    };
    let ask = |headers: Vec<(&'static str, String)>| {
        let client = client.clone();
        async move {
            let borrowed: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            whoami(&client, &borrowed).await
        }
    };
    let message = |body: &str| serde_json::from_str::<Value>(body).unwrap()["message"].clone();
    let (code, body) = ask(as_bot(&[("Impersonate-User", "jane")])).await;
    assert_eq!(code, 403);
    assert_eq!(
        message(&body),
        "users \"jane\" is forbidden: User \"system:serviceaccount:shop:bot\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let (_, body) = ask(as_bot(&[(
        "Impersonate-User",
        "system:serviceaccount:shop:controller",
    )]))
    .await;
    assert_eq!(
        message(&body),
        "serviceaccounts \"controller\" is forbidden: User \"system:serviceaccount:shop:bot\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"shop\""
    );
    assert_eq!(env.denied_requests().len(), 2);

    for obj in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "impersonator"},
            "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]},
                      {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["devs"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "bot-impersonates"},
            "subjects": [{"kind": "ServiceAccount", "namespace": "shop", "name": "bot"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "impersonator"}}),
    ] {
        env.create_object(obj).unwrap();
    }
    let (code, body) = ask(as_bot(&[
        ("Impersonate-User", "jane"),
        ("Impersonate-Group", "devs"),
    ]))
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        user_info(&body)["groups"],
        json!(["devs", "system:authenticated"])
    );
    let (code, body) = ask(as_bot(&[
        ("Impersonate-User", "jane"),
        ("Impersonate-Group", "system:masters"),
    ]))
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        message(&body),
        "groups \"system:masters\" is forbidden: User \"system:serviceaccount:shop:bot\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
    );
    // Every user may review itself, so the answer shows whom the request was made as.
    let api: Api<SelfSubjectReview> = Api::all(client);
    let admin = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    assert_eq!(
        admin.status.unwrap().user_info.unwrap().username.as_deref(),
        Some("system:admin"),
        "headers last for their request only"
    );
}
