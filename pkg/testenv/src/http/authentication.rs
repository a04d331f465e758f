//! Authentication by bearer token.
//!
//! A request without credentials is made by `system:admin` (in `system:masters`), so
//! tests and `kubectl` need no setup. A request bearing a token from
//! [`crate::TestEnv::service_account_token`] is made by that service account (the
//! token names it, so it holds across restarts, as a signed one does) and is
//! authorized by RBAC; any other token is `401 Unauthorized`. Every authenticated user
//! may read the discovery and health paths, which kube-apiserver's bootstrap
//! `system:discovery` and `system:public-info-viewer` roles grant.

use crate::errors::ErrorStatus;
use crate::registry::rbac::User;
use crate::test_env::TestEnv;

const TOKEN_PREFIX: &str = "testenv:serviceaccount:";

/// The token of service account `namespace/name`: it names the account, as a
/// service-account JWT does, in a form no namespace or name can be confused in
/// (neither may hold a colon).
pub(crate) fn token_for(namespace: &str, name: &str) -> String {
    format!("{TOKEN_PREFIX}{namespace}:{name}")
}

/// The user a request's `Authorization` header names: `system:admin` without one.
pub(crate) fn authenticate(authorization: &str) -> Result<User, ErrorStatus> {
    if authorization.is_empty() {
        return Ok(User::admin());
    }
    let account = authorization
        .strip_prefix("Bearer ")
        .and_then(|token| token.trim().strip_prefix(TOKEN_PREFIX))
        .and_then(|rest| rest.split_once(':'))
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains(':'));
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
