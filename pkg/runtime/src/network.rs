//! Cluster networking facts controllers need: the cluster's DNS domain.

/// The cluster domain when nothing says otherwise.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// The cluster's DNS domain (`cluster.local`) when the process was told none:
/// the domain of the first `search` entry of `/etc/resolv.conf` that starts
/// with `svc.`, else `cluster.local`. A [`Context`](crate::injection::Context)
/// built without [`cluster_domain`](crate::injection::ContextBuilder::cluster_domain)
/// reads it once (controllers ask `ctx.cluster_domain()`); sharedmain passes
/// `CLUSTER_DOMAIN` there, so the variable wins, also outside a cluster
/// (Knative honours it only when `/etc/resolv.conf` can be opened).
pub fn detect_cluster_domain() -> String {
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    domain_from(None, &resolv)
}

/// The domain `given` names (`CLUSTER_DOMAIN`'s value), else the one
/// `resolv_conf` searches, else `cluster.local`.
pub fn domain_from(given: Option<&str>, resolv_conf: &str) -> String {
    if let Some(domain) = given.map(str::trim).filter(|d| !d.is_empty()) {
        return domain.trim_end_matches('.').to_owned();
    }
    resolv_conf
        .lines()
        .filter_map(|line| line.trim().strip_prefix("search"))
        .flat_map(str::split_whitespace)
        .find_map(|entry| entry.strip_prefix("svc."))
        .map(|domain| domain.trim_end_matches('.').to_owned())
        .unwrap_or_else(|| DEFAULT_CLUSTER_DOMAIN.to_owned())
}

/// `<name>.<namespace>.svc.<cluster domain>`.
pub fn service_hostname(name: &str, namespace: &str, domain: &str) -> String {
    format!("{name}.{namespace}.svc.{domain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_comes_from_env_then_resolv_conf_then_default() {
        let resolv =
            "nameserver 10.96.0.10\nsearch ns.svc.example.org svc.example.org example.org\noptions ndots:5\n";
        assert_eq!(domain_from(None, resolv), "example.org");
        assert_eq!(domain_from(Some("corp.internal."), resolv), "corp.internal");
        assert_eq!(
            domain_from(None, "nameserver 1.1.1.1\nsearch home.lan\n"),
            "cluster.local"
        );
        assert_eq!(domain_from(Some("  "), ""), "cluster.local");
    }

    #[test]
    fn service_hostnames() {
        assert_eq!(
            service_hostname("webhook", "ns", "cluster.local"),
            "webhook.ns.svc.cluster.local"
        );
    }
}
