//! Building `kube::Api` handles for statically typed kinds of either scope.

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};

/// The scope of a kind, deciding how a namespace narrows its `Api`.
///
/// Implemented for k8s-openapi's namespaced and cluster scopes, so generic code
/// over `K: Resource<Scope: ApiScope>` can build the right `Api<K>`.
pub trait ApiScope: Sized {
    /// True for namespaced kinds.
    const NAMESPACED: bool;

    /// `Api` for `K` in `namespace` (all namespaces when `None`; cluster-scoped
    /// kinds ignore it).
    fn api<K: Resource<Scope = Self, DynamicType = ()>>(client: Client, namespace: Option<&str>) -> Api<K>;
}

impl ApiScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K: Resource<Scope = Self, DynamicType = ()>>(client: Client, namespace: Option<&str>) -> Api<K> {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl ApiScope for ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K: Resource<Scope = Self, DynamicType = ()>>(client: Client, _: Option<&str>) -> Api<K> {
        Api::all(client)
    }
}

/// `Api<K>` narrowed to `namespace` when `K` is namespaced.
pub fn scoped_api<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope: ApiScope>,
{
    <K::Scope as ApiScope>::api::<K>(client, namespace)
}
