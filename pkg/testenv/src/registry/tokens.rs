//! Service account tokens: their form, and the `token` subresource of
//! ServiceAccounts (a TokenRequest), which mints them as kube-apiserver's does.
//!
//! A token names its account, as a service-account JWT does, in a form no namespace
//! or name can be confused in (neither may hold a colon). It is not signed and does
//! not expire: every testenv accepts it, as every kube-apiserver sharing a signing
//! key accepts a service-account token, so a test that restarts its server keeps its
//! clients' kubeconfigs.

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::object_meta::meta_str;
use crate::registry::Registry;
use crate::registry::options::{WriteOpts, Written};
use crate::registry::resource::{ResourceDef, token_request_def};
use crate::timestamps::time;

const TOKEN_PREFIX: &str = "testenv:serviceaccount:";

/// The audience of tokens that ask for none: kube-apiserver's `--api-audiences`,
/// which defaults to its service-account issuer (kubeadm's and kind's is this URL).
const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// How long a token lasts when the request does not say (the v1 default).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The token of service account `namespace/name`.
pub(crate) fn token_for(namespace: &str, name: &str) -> String {
    format!("{TOKEN_PREFIX}{namespace}:{name}")
}

/// The service account (`namespace`, `name`) a token was minted for.
pub(crate) fn account_of(token: &str) -> Option<(&str, &str)> {
    token
        .strip_prefix(TOKEN_PREFIX)
        .and_then(|rest| rest.split_once(':'))
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains(':'))
}

impl Registry {
    /// `POST .../serviceaccounts/<name>/token`: a token for the service account,
    /// checked and defaulted as kube-apiserver's token registry does.
    pub(crate) fn token_request(
        &self,
        service_accounts: &ResourceDef,
        namespace: &str,
        name: &str,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        let def = token_request_def();
        self.check_type(&def, &body, true)?;
        // The registry clears whatever status was sent; Go's decoder takes a zero
        // (null) expirationTimestamp there, which k8s-openapi's type refuses.
        let mut body = body;
        if let Some(m) = body.as_object_mut() {
            m.remove("status");
        }
        let (mut req, warnings) = Self::normalize(&def, body, None, opts, name)?;
        let mismatch = |field: &str, url: &str, detail: &str| {
            let sent = meta_str(&req, field);
            (!sent.is_empty() && sent != url).then(|| {
                let err = FieldError::invalid(format!("metadata.{field}"), json!(sent), detail);
                ErrorStatus::invalid(&def.group, &def.kind, name, vec![err])
            })
        };
        if let Some(e) = mismatch("name", name, "must match the service account name if specified") {
            return Err(e);
        }
        if let Some(e) = mismatch(
            "namespace",
            namespace,
            "must match the service account namespace if specified",
        ) {
            return Err(e);
        }
        self.get(service_accounts, namespace, name)?;
        let spec = &mut req["spec"];
        if spec
            .get("audiences")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec["audiences"] = json!([DEFAULT_AUDIENCE]);
        }
        let seconds = spec
            .get("expirationSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        spec["expirationSeconds"] = json!(seconds);
        check_expiration(&def, seconds)?;
        if let Some(reference) = spec.get("boundObjectRef").filter(|r| !r.is_null()).cloned() {
            self.check_bound_object(namespace, name, &reference)?;
        }
        let now = jiff::Timestamp::now();
        let expires = now
            .checked_add(jiff::SignedDuration::from_secs(seconds))
            .unwrap_or(now);
        req["metadata"] = json!({"name": name, "namespace": namespace, "creationTimestamp": time(now)});
        req["status"] = json!({"token": token_for(namespace, name), "expirationTimestamp": time(expires)});
        Ok(Written {
            object: req,
            warnings,
            created: true,
        })
    }

    /// A token bound to a Pod, a Secret or a Node needs the object, with the uid
    /// the reference names (and a Pod running as the account).
    fn check_bound_object(
        &self,
        namespace: &str,
        account: &str,
        reference: &Value,
    ) -> Result<(), ErrorStatus> {
        let field = |k: &str| reference.get(k).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind, name) = (field("apiVersion"), field("kind"), field("name"));
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let (plural, in_namespace) = match (group, kind) {
            ("", "Pod") => ("pods", namespace),
            ("", "Secret") => ("secrets", namespace),
            ("", "Node") => ("nodes", ""),
            _ => {
                return Err(ErrorStatus::bad_request(format!(
                    "cannot bind token to object of type {group}/{version}, Kind={kind}"
                )));
            }
        };
        let Some(def) = self.find("", "v1", plural) else {
            return Err(ErrorStatus::not_found("", plural, name));
        };
        let object = self.get(&def, in_namespace, name)?;
        if kind == "Pod"
            && object
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                != account
        {
            return Err(ErrorStatus::bad_request(format!(
                "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
            )));
        }
        let uid = field("uid");
        if !uid.is_empty() && uid != meta_str(&object, "uid") {
            return Err(ErrorStatus::conflict_on(
                "",
                kind,
                name,
                &format!(
                    "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        Ok(())
    }
}

/// kube-apiserver's bounds on a token's life: ten minutes to 2^32 seconds.
fn check_expiration(def: &ResourceDef, seconds: i64) -> Result<(), ErrorStatus> {
    let detail = if seconds < 600 {
        "may not specify a duration less than 10 minutes"
    } else if seconds > 1 << 32 {
        "may not specify a duration larger than 2^32 seconds"
    } else {
        return Ok(());
    };
    let err = FieldError::invalid("spec.expirationSeconds", json!(seconds), detail);
    Err(ErrorStatus::invalid(&def.group, &def.kind, "", vec![err]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_account_and_nothing_else_passes_for_one() {
        let token = token_for("shop", "bot");
        assert_eq!(account_of(&token), Some(("shop", "bot")));
        for forged in [
            "",
            "testenv:serviceaccount:",
            "testenv:serviceaccount:shop",
            "testenv:serviceaccount::bot",
            "testenv:serviceaccount:shop:",
            "testenv:serviceaccount:shop:bot:x",
            "bearer",
        ] {
            assert_eq!(account_of(forged), None, "{forged}");
        }
    }
}
