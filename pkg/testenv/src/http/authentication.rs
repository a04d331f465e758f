//! Authentication by bearer token.
//!
//! A request without credentials is made by `system:admin` (in `system:masters`), so
//! tests and `kubectl` need no setup. A request bearing a token from
//! [`crate::TestEnv::service_account_token`] or a TokenRequest is made by that
//! service account (the token names it, so it holds across restarts, as a signed
//! one does) and is authorized by RBAC; any other token is `401 Unauthorized`. Every authenticated user
//! may read the discovery and health paths, which kube-apiserver's bootstrap
//! `system:discovery` and `system:public-info-viewer` roles grant.

use crate::errors::ErrorStatus;
use crate::registry::rbac::User;
use crate::registry::tokens::{account_of, token_for};
use crate::test_env::TestEnv;

/// The user a request's `Authorization` header names: `system:admin` without one.
pub(crate) fn authenticate(authorization: &str) -> Result<User, ErrorStatus> {
    if authorization.is_empty() {
        return Ok(User::admin());
    }
    let account = authorization
        .strip_prefix("Bearer ")
        .and_then(|token| account_of(token.trim()));
    match account {
        Some((namespace, name)) => Ok(User::service_account(namespace, name)),
        None => Err(ErrorStatus::new(401, "Unauthorized", "Unauthorized")),
    }
}

impl TestEnv {
    /// A bearer token for service account `namespace/name`: requests bearing it are
    /// made by `system:serviceaccount:<namespace>:<name>` and authorized against the
    /// stored RBAC objects, as kube-apiserver's RBAC authorizer does. Requests without
    /// a token are made by `system:admin`, who may do anything. The account itself
    /// need not exist. Every testenv accepts the token, as every kube-apiserver
    /// sharing a signing key accepts a service-account token: a test that restarts
    /// its server keeps its clients' kubeconfigs.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let env = kinject_testenv::TestEnv::new();
    /// let server = env.serve().await?;
    /// let token = env.service_account_token("knative-samples", "controller");
    /// let kubeconfig = server.kubeconfig_with_token(&token); // for the controller process
    /// # assert!(kubeconfig.contains(&token));
    /// # Ok(())
    /// # }
    /// ```
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        token_for(namespace, name)
    }
}
