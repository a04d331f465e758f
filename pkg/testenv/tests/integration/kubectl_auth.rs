//! kubectl's `auth` commands against the loopback server, as an administrator and
//! as a service account: `can-i` (one question, and `--list`) and `whoami`. Skips
//! with a notice when kubectl is not installed, as the other kubectl tests do.

use std::path::PathBuf;

use crate::kubectl::{Kubectl, kubectl_available, skip, uuid_like};
use crate::reviews::shop;

/// An administrator's kubectl. kubectl sends a kubeconfig's credentials only over
/// TLS, so it cannot present a service account's token to the loopback server;
/// `--as` (impersonation) is how it acts as another user here.
fn admin_kubectl(server: &kinject_testenv::Server, dir: &PathBuf) -> Kubectl {
    std::fs::create_dir_all(dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    Kubectl {
        kubeconfig,
        cache: dir.join("cache"),
    }
}

/// `kubectl auth can-i ...`: what it prints, and whether it exited with 0 (yes) or 1 (no).
pub(crate) fn can_i(k: &Kubectl, args: &[&str]) -> (bool, String) {
    let mut full = vec!["auth", "can-i"];
    full.extend(args);
    let out = k.cmd(&full).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => (true, stdout),
        Some(1) => (false, stdout),
        _ => panic!("kubectl {full:?} failed ({}):\n{stdout}\n{stderr}", out.status),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_answers_for_the_kubeconfig_user() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = shop();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-auth-{}", uuid_like()));
    let admin = admin_kubectl(&server, &dir);
    tokio::task::spawn_blocking(move || {
        assert_eq!(
            can_i(&admin, &["create", "jobs.batch", "-n", "default"]),
            (true, "yes\n".into())
        );
        assert_eq!(can_i(&admin, &["delete", "/anything"]), (true, "yes\n".into()));
        let (_, everything) = can_i(&admin, &["--list", "-n", "shop"]);
        let rows: Vec<Vec<&str>> = everything
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows.get(..3),
            Some(
                &[
                    vec!["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"],
                    vec!["*.*", "[]", "[]", "[*]"],
                    vec!["[*]", "[]", "[*]"],
                ][..]
            ),
            "{everything}"
        );
        assert!(
            rows.contains(&vec![
                "selfsubjectaccessreviews.authorization.k8s.io",
                "[]",
                "[]",
                "[create]"
            ]),
            "{everything}"
        );
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_whoami_and_api_resources_show_the_review_kinds() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = shop();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-whoami-{}", uuid_like()));
    let admin = admin_kubectl(&server, &dir);
    tokio::task::spawn_blocking(move || {
        let me = admin.run(&["auth", "whoami"]);
        let rows: Vec<Vec<&str>> = me.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            rows,
            vec![
                vec!["ATTRIBUTE", "VALUE"],
                vec!["Username", "system:admin"],
                vec!["Groups", "[system:masters", "system:authenticated]"],
            ],
            "{me}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&admin.run(&["auth", "whoami", "-o", "json"])).unwrap();
        assert_eq!(json["status"]["userInfo"]["username"], "system:admin");

        let resources = admin.run(&["api-resources", "-o", "wide", "--api-group=authorization.k8s.io"]);
        let rows: Vec<Vec<&str>> = resources
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            vec![
                vec![
                    "localsubjectaccessreviews",
                    "authorization.k8s.io/v1",
                    "true",
                    "LocalSubjectAccessReview",
                    "create"
                ],
                vec![
                    "selfsubjectaccessreviews",
                    "authorization.k8s.io/v1",
                    "false",
                    "SelfSubjectAccessReview",
                    "create"
                ],
                vec![
                    "selfsubjectrulesreviews",
                    "authorization.k8s.io/v1",
                    "false",
                    "SelfSubjectRulesReview",
                    "create"
                ],
                vec![
                    "subjectaccessreviews",
                    "authorization.k8s.io/v1",
                    "false",
                    "SubjectAccessReview",
                    "create"
                ],
            ],
            "{resources}"
        );
        let err = admin.fail(&["get", "selfsubjectaccessreviews"]);
        assert!(
            err.contains("the server does not allow this method on the requested resource"),
            "{err}"
        );
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_mints_a_token_for_the_account() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = shop();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-token-{}", uuid_like()));
    let admin = admin_kubectl(&server, &dir);
    let minted = tokio::task::spawn_blocking(move || {
        admin.run(&["create", "serviceaccount", "bot", "-n", "shop"]);
        let token = admin.run(&["create", "token", "bot", "-n", "shop"]);
        let json: serde_json::Value = serde_json::from_str(&admin.run(&[
            "create",
            "token",
            "bot",
            "-n",
            "shop",
            "--duration=2h",
            "--audience=vault",
            "-o",
            "json",
        ]))
        .unwrap();
        assert_eq!(json["spec"]["expirationSeconds"], 7200);
        assert_eq!(json["spec"]["audiences"], serde_json::json!(["vault"]));
        let err = admin.fail(&["create", "token", "ghost", "-n", "shop"]);
        assert!(err.contains("serviceaccounts \"ghost\" not found"), "{err}");
        let err = admin.fail(&["create", "token", "bot", "-n", "shop", "--duration=5m"]);
        assert!(
            err.contains(
                "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"
            ),
            "{err}"
        );
        token.trim().to_owned()
    })
    .await
    .unwrap();
    assert_eq!(minted, env.service_account_token("shop", "bot"));
    // kubectl presents tokens over TLS only; a kube client takes it over HTTP.
    let bot = crate::common::client_with_kubeconfig(&server.kubeconfig_with_token(&minted)).await;
    let jobs = kube::Api::<k8s_openapi::api::batch::v1::Job>::namespaced(bot, "shop");
    let err = crate::common::api_err(jobs.list(&Default::default()).await.unwrap_err());
    assert!(
        err.message
            .starts_with("jobs.batch is forbidden: User \"system:serviceaccount:shop:bot\""),
        "{}",
        err.message
    );
    let _ = std::fs::remove_dir_all(dir);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_as_a_service_account_answers_for_that_account() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = shop();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-as-{}", uuid_like()));
    let admin = admin_kubectl(&server, &dir);
    tokio::task::spawn_blocking(move || {
        let bot = "--as=system:serviceaccount:shop:bot";
        assert_eq!(
            can_i(&admin, &["create", "jobs", bot, "-n", "shop"]),
            (true, "yes\n".into())
        );
        assert_eq!(
            can_i(&admin, &["create", "jobs", bot, "-n", "default"]),
            (false, "no\n".into())
        );
        assert_eq!(
            can_i(&admin, &["delete", "jobs", bot, "-n", "shop"]),
            (false, "no\n".into())
        );
        assert_eq!(can_i(&admin, &["get", "/healthz", bot]), (true, "yes\n".into()));
        assert_eq!(can_i(&admin, &["post", "/healthz", bot]), (false, "no\n".into()));
        assert_eq!(
            can_i(
                &admin,
                &["list", "pods", "--as=jane", "--as-group=devs", "-n", "shop"]
            ),
            (true, "yes\n".into())
        );
        assert_eq!(
            can_i(&admin, &["list", "pods", "--as=jane", "-n", "shop"]),
            (false, "no\n".into())
        );

        let (_, listed) = can_i(&admin, &["--list", bot, "-n", "shop"]);
        let rows: Vec<Vec<&str>> = listed.lines().map(|l| l.split_whitespace().collect()).collect();
        assert!(
            rows.contains(&vec!["jobs.batch", "[]", "[]", "[create", "get]"]),
            "{listed}"
        );
        assert!(rows.contains(&vec!["[/healthz]", "[]", "[get]"]), "{listed}");
        assert!(!rows.iter().any(|r| r.first() == Some(&"*.*")), "{listed}");
        let (_, elsewhere) = can_i(&admin, &["--list", bot, "-n", "default"]);
        assert!(!elsewhere.contains("jobs.batch"), "{elsewhere}");

        let me = admin.run(&["auth", "whoami", bot]);
        let rows: Vec<Vec<&str>> = me.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            rows,
            vec![
                vec!["ATTRIBUTE", "VALUE"],
                vec!["Username", "system:serviceaccount:shop:bot"],
                vec![
                    "Groups",
                    "[system:serviceaccounts",
                    "system:serviceaccounts:shop",
                    "system:authenticated]"
                ],
            ],
            "{me}"
        );
        let err = admin.fail(&["get", "pods", "-n", "shop", bot]);
        assert!(
            err.contains(
                "pods is forbidden: User \"system:serviceaccount:shop:bot\" cannot list resource \"pods\""
            ),
            "{err}"
        );
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    server.shutdown().await;
}
