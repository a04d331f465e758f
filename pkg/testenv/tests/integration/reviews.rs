//! The review kinds (SelfSubjectAccessReview, SubjectAccessReview,
//! LocalSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview) through
//! kube's typed API, in-process and over HTTP, as kubectl's `auth` commands and
//! controllers checking their own permissions use them.

use crate::common;

use common::{api_err, client_with_kubeconfig};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview,
    SelfSubjectAccessReviewSpec, SelfSubjectRulesReview, SelfSubjectRulesReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kinject_testenv::TestEnv;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// A server with namespace `shop`, where service account `shop/bot` may create Jobs
/// (a Role), and group `devs` may read Pods everywhere (a ClusterRole).
pub(crate) fn shop() -> TestEnv {
    let env = TestEnv::builder().namespace("shop").build();
    for obj in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "jobs", "namespace": "shop"},
            "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "bot-jobs", "namespace": "shop"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jobs"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "devs-read-pods"},
            "subjects": [{"kind": "Group", "name": "devs"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"}}),
    ] {
        env.create_object(obj).unwrap();
    }
    env
}

fn resource(verb: &str, group: &str, resource: &str, namespace: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some(verb.into()),
        group: Some(group.into()),
        resource: Some(resource.into()),
        namespace: Some(namespace.into()),
        ..Default::default()
    }
}

fn self_review(attributes: ResourceAttributes) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(attributes),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn ask(client: &kube::Client, review: &SelfSubjectAccessReview) -> SubjectAccessReviewStatus {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), review).await.unwrap();
    answer.status.unwrap()
}

async fn bot_client(env: &TestEnv, server: &kinject_testenv::Server) -> kube::Client {
    let token = env.service_account_token("shop", "bot");
    client_with_kubeconfig(&server.kubeconfig_with_token(&token)).await
}

#[tokio::test]
async fn a_self_subject_access_review_answers_for_whoever_asks() {
    let env = shop();
    let admin = ask(&env.client(), &self_review(resource("delete", "", "nodes", ""))).await;
    assert_eq!(
        (admin.allowed, admin.reason),
        (true, None),
        "system:masters needs no rule"
    );

    let server = env.serve().await.unwrap();
    let bot = bot_client(&env, &server).await;
    let jobs = ask(&bot, &self_review(resource("create", "batch", "jobs", "shop"))).await;
    assert!(jobs.allowed);
    assert_eq!(
        jobs.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"bot-jobs/shop\" of Role \"jobs\" to ServiceAccount \"bot/shop\""
        )
    );
    let elsewhere = ask(&bot, &self_review(resource("create", "batch", "jobs", "default"))).await;
    assert_eq!(
        (elsewhere.allowed, elsewhere.denied, elsewhere.reason),
        (false, None, None),
        "RBAC has no opinion where nothing grants"
    );
    let deletes = ask(&bot, &self_review(resource("delete", "batch", "jobs", "shop"))).await;
    assert!(!deletes.allowed);

    let health = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/healthz".into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        ask(&bot, &health).await.reason.as_deref(),
        Some(
            "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""
        )
    );
    let mut post = health.clone();
    post.spec.non_resource_attributes.as_mut().unwrap().verb = Some("post".into());
    assert!(!ask(&bot, &post).await.allowed);
    server.shutdown().await;
}

/// The answer is the request with its status, and the field manager's record of it;
/// nothing is stored, and there is nothing to get, list or watch.
#[tokio::test]
async fn a_review_comes_back_whole_and_is_not_stored() {
    let env = shop();
    let client = env.client();
    let rv = env.resource_version();
    let (code, body) = common::send_bytes(
        &client,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews?fieldManager=checker",
        &[("content-type", "application/json")],
        // What a protobuf body reads as: Go writes the empty metadata and status too.
        json!({"metadata": {"creationTimestamp": null}, "status": {"allowed": false},
            "spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "shop"}}})
        .to_string()
        .into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "SelfSubjectAccessReview");
    assert_eq!(body["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(body["spec"]["resourceAttributes"]["resource"], "pods");
    assert_eq!(body["status"], json!({"allowed": true}));
    assert_eq!(body["metadata"]["creationTimestamp"], Value::Null);
    let managed = &body["metadata"]["managedFields"][0];
    assert_eq!(
        (&managed["manager"], &managed["operation"]),
        (&json!("checker"), &json!("Update"))
    );
    assert_eq!(
        managed["fieldsV1"],
        json!({"f:spec": {"f:resourceAttributes": {"f:namespace": {}, "f:resource": {}, "f:verb": {}}}})
    );
    assert_eq!(env.resource_version(), rv, "a review writes nothing");

    let collection = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, body) = common::send_bytes(&client, "GET", collection, &[], Vec::new()).await;
    assert_eq!(
        (code, &body["reason"]),
        (405, &json!("MethodNotAllowed")),
        "{body}"
    );
    let (code, body) = common::send_bytes(&client, "GET", &format!("{collection}/x"), &[], Vec::new()).await;
    assert_eq!(
        (code, &body["message"]),
        (404, &json!("the server could not find the requested resource"))
    );
    let (code, _) = common::send_bytes(
        &client,
        "GET",
        "/apis/authorization.k8s.io/v1/localsubjectaccessreviews",
        &[],
        Vec::new(),
    )
    .await;
    assert_eq!(code, 404, "a namespaced review has no route across namespaces");
}

#[tokio::test]
async fn an_access_review_asks_one_question_about_a_subject() {
    let env = shop();
    let client = env.client();
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let err = api_err(
        api.create(&PostParams::default(), &SelfSubjectAccessReview::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
    );
    let mut both = self_review(resource("get", "", "pods", "shop"));
    both.spec.non_resource_attributes = Some(NonResourceAttributes {
        path: Some("/api".into()),
        verb: Some("get".into()),
    });
    both.metadata.name = Some("named".into());
    let err = api_err(api.create(&PostParams::default(), &both).await.unwrap_err());
    assert!(
        err.message.starts_with(
            ".authorization.k8s.io \"\" is invalid: [spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:\"/api\", Verb:\"get\"}: cannot be specified in combination with resourceAttributes, metadata: Invalid value: v1.ObjectMeta{Name:\"named\", "
        ),
        "{}",
        err.message
    );
    assert!(err.message.ends_with(": must be empty]"), "{}", err.message);

    let sars: Api<SubjectAccessReview> = Api::all(client.clone());
    let nobody = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            resource_attributes: Some(resource("get", "", "pods", "shop")),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = api_err(sars.create(&PostParams::default(), &nobody).await.unwrap_err());
    assert_eq!(
        err.message,
        ".authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );
}

#[tokio::test]
async fn a_subject_access_review_answers_for_the_user_and_groups_it_names() {
    let env = shop();
    let sars: Api<SubjectAccessReview> = Api::all(env.client());
    let about = |user: &str, groups: &[&str], attributes: ResourceAttributes| SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            uid: Some("ignored".into()),
            resource_attributes: Some(attributes),
            ..Default::default()
        },
        ..Default::default()
    };
    let jane = sars
        .create(
            &PostParams::default(),
            &about("jane", &["devs"], resource("list", "", "pods", "")),
        )
        .await
        .unwrap();
    assert_eq!(
        jane.status.unwrap().reason.as_deref(),
        Some(
            "RBAC: allowed by ClusterRoleBinding \"devs-read-pods\" of ClusterRole \"pod-reader\" to Group \"devs\""
        )
    );
    assert_eq!(jane.spec.user.as_deref(), Some("jane"), "the question comes back");
    // The spec's groups are all the subject has: a service account named without
    // its groups is not in system:authenticated.
    let bare = sars
        .create(
            &PostParams::default(),
            &about(
                "system:serviceaccount:shop:bot",
                &[],
                resource("create", "authorization.k8s.io", "selfsubjectaccessreviews", ""),
            ),
        )
        .await
        .unwrap();
    assert!(!bare.status.unwrap().allowed);
    let bot = sars
        .create(
            &PostParams::default(),
            &about(
                "system:serviceaccount:shop:bot",
                &[],
                resource("create", "batch", "jobs", "shop"),
            ),
        )
        .await
        .unwrap();
    assert!(bot.status.unwrap().allowed);

    let locals: Api<LocalSubjectAccessReview> = Api::namespaced(env.client(), "shop");
    let local = |namespace: &str| LocalSubjectAccessReview {
        spec: about(
            "system:serviceaccount:shop:bot",
            &[],
            resource("get", "batch", "jobs", namespace),
        )
        .spec,
        ..Default::default()
    };
    let answer = locals
        .create(&PostParams::default(), &local("shop"))
        .await
        .unwrap();
    assert_eq!(answer.metadata.namespace.as_deref(), Some("shop"));
    assert!(answer.status.unwrap().allowed);
    let err = api_err(
        locals
            .create(&PostParams::default(), &local("default"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"default\": must match metadata.namespace"
    );
}

#[tokio::test]
async fn only_who_may_create_subject_access_reviews_asks_about_others() {
    let env = shop();
    let server = env.serve().await.unwrap();
    let bot = bot_client(&env, &server).await;
    let question = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("jane".into()),
            resource_attributes: Some(resource("get", "", "pods", "")),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = api_err(
        Api::<SubjectAccessReview>::all(bot.clone())
            .create(&PostParams::default(), &question)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:shop:bot\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
        )
    );
    let local = LocalSubjectAccessReview {
        spec: question.spec.clone(),
        ..Default::default()
    };
    let err = api_err(
        Api::<LocalSubjectAccessReview>::namespaced(bot.clone(), "shop")
            .create(&PostParams::default(), &local)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 403, "{}", err.message);

    env.create_object(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "bot-delegates"},
        "subjects": [{"kind": "ServiceAccount", "namespace": "shop", "name": "bot"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "delegator"}}),
    )
    .unwrap();
    env.create_object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "delegator"},
        "rules": [{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]}))
    .unwrap();
    let answer = Api::<SubjectAccessReview>::all(bot)
        .create(&PostParams::default(), &question)
        .await
        .unwrap();
    assert!(!answer.status.unwrap().allowed, "jane has no grant");
    server.shutdown().await;
}

#[tokio::test]
async fn a_rules_review_lists_what_the_user_may_do_in_a_namespace() {
    let env = shop();
    let server = env.serve().await.unwrap();
    let bot = bot_client(&env, &server).await;
    let review = |namespace: &str| SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(namespace.into()),
        },
        ..Default::default()
    };
    let rules = |client: kube::Client, namespace: &str| {
        let review = review(namespace);
        async move {
            let api: Api<SelfSubjectRulesReview> = Api::all(client);
            serde_json::to_value(api.create(&PostParams::default(), &review).await.unwrap()).unwrap()
        }
    };
    let in_shop = rules(bot.clone(), "shop").await;
    assert_eq!(
        in_shop["spec"],
        json!({}),
        "the answer does not repeat the question"
    );
    let status = &in_shop["status"];
    assert_eq!(status["incomplete"], false);
    assert_eq!(
        status["resourceRules"],
        json!([
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
             "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
            {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]},
            {"verbs": ["create", "get"], "apiGroups": ["batch"], "resources": ["jobs"]},
        ])
    );
    assert_eq!(
        status["nonResourceRules"][0],
        json!({"verbs": ["get"], "nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
            "/readyz", "/version", "/version/"]})
    );
    let in_default = rules(bot.clone(), "default").await;
    assert_eq!(in_default["status"]["resourceRules"].as_array().unwrap().len(), 2);
    let admin = rules(env.client(), "shop").await;
    assert_eq!(
        admin["status"]["resourceRules"][0],
        json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
    );
    let err = api_err(
        Api::<SelfSubjectRulesReview>::all(bot)
            .create(&PostParams::default(), &SelfSubjectRulesReview::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.message.as_str()), (400, "no namespace on request"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_self_subject_review_says_who_is_asking() {
    let env = shop();
    let whoami = |client: kube::Client| async move {
        let api: Api<SelfSubjectReview> = Api::all(client);
        let review = api
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .unwrap();
        assert!(review.metadata.creation_timestamp.is_some());
        review.status.unwrap().user_info.unwrap()
    };
    let admin = whoami(env.client()).await;
    assert_eq!(admin.username.as_deref(), Some("system:admin"));
    assert_eq!(
        admin.groups,
        Some(vec![
            "system:masters".to_owned(),
            "system:authenticated".to_owned()
        ])
    );
    let server = env.serve().await.unwrap();
    let bot = whoami(bot_client(&env, &server).await).await;
    assert_eq!(bot.username.as_deref(), Some("system:serviceaccount:shop:bot"));
    assert_eq!(
        bot.groups,
        Some(vec![
            "system:serviceaccounts".to_owned(),
            "system:serviceaccounts:shop".to_owned(),
            "system:authenticated".to_owned(),
        ])
    );
    server.shutdown().await;
}

#[tokio::test]
async fn discovery_serves_the_review_kinds_for_create_alone() {
    let env = TestEnv::new();
    let (_, list) = common::send_bytes(
        &env.client(),
        "GET",
        "/apis/authorization.k8s.io/v1",
        &[],
        Vec::new(),
    )
    .await;
    let names: Vec<(&str, bool, &Value)> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["namespaced"].as_bool().unwrap(),
                &r["verbs"],
            )
        })
        .collect();
    let create = json!(["create"]);
    assert_eq!(
        names,
        vec![
            ("localsubjectaccessreviews", true, &create),
            ("selfsubjectaccessreviews", false, &create),
            ("selfsubjectrulesreviews", false, &create),
            ("subjectaccessreviews", false, &create),
        ]
    );
    let (_, list) = common::send_bytes(
        &env.client(),
        "GET",
        "/apis/authentication.k8s.io/v1",
        &[],
        Vec::new(),
    )
    .await;
    assert_eq!(list["resources"][0]["kind"], "SelfSubjectReview");
    let discovery = kube::Discovery::new(env.client()).run_aggregated().await.unwrap();
    let (_, caps) = discovery
        .resolve_gvk(&kube::core::GroupVersionKind::gvk(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
        ))
        .unwrap();
    assert_eq!(caps.operations, vec!["create".to_owned()]);
}
