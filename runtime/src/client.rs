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

/// A typed client for one kind, with the verbs of Knative's generated clients.
///
/// It is a thin layer over [`kube::Api`] (reach it with [`TypedClient::api`]):
/// `update` and `update_status` take the name from the object, as client-go's
/// `Update` and `UpdateStatus` do. Generated per-kind clients wrap it and expose
/// only the verbs their `#[genclient]` allows.
pub struct TypedClient<K> {
    api: Api<K>,
}

impl<K: Clone> Clone for TypedClient<K> {
    fn clone(&self) -> Self {
        TypedClient {
            api: self.api.clone(),
        }
    }
}

impl<K: Resource> std::fmt::Debug for TypedClient<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedClient")
            .field("resource", &self.api.resource_url())
            .finish()
    }
}

/// An object handed to `update`/`update_status` has no `metadata.name`.
fn unnamed<K: Resource<DynamicType = ()>>() -> kube::Error {
    kube::Error::Service(
        format!(
            "cannot update a {} without metadata.name; set the name of the object",
            K::kind(&())
        )
        .into(),
    )
}

impl<K> TypedClient<K>
where
    K: Resource<DynamicType = (), Scope: ApiScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    /// A client for `namespace` (all namespaces when `None`; ignored for
    /// cluster-scoped kinds).
    pub fn new(client: Client, namespace: Option<&str>) -> Self {
        TypedClient {
            api: scoped_api::<K>(client, namespace),
        }
    }

    /// The underlying `kube::Api`, for anything beyond these verbs.
    pub fn api(&self) -> &Api<K> {
        &self.api
    }

    /// Reads one object.
    pub async fn get(&self, name: &str) -> kube::Result<K> {
        self.api.get(name).await
    }

    /// Lists objects.
    pub async fn list(&self, params: &kube::api::ListParams) -> kube::Result<kube::core::ObjectList<K>> {
        self.api.list(params).await
    }

    /// Watches for changes from `resource_version`.
    pub async fn watch(
        &self,
        params: &kube::api::WatchParams,
        resource_version: &str,
    ) -> kube::Result<impl futures::Stream<Item = kube::Result<kube::core::WatchEvent<K>>> + use<K>> {
        self.api.watch(params, resource_version).await
    }

    /// Creates an object.
    pub async fn create(&self, obj: &K) -> kube::Result<K> {
        self.api.create(&kube::api::PostParams::default(), obj).await
    }

    /// Replaces an object (its `resourceVersion` guards against lost updates).
    pub async fn update(&self, obj: &K) -> kube::Result<K> {
        let name = obj.meta().name.clone().ok_or_else(unnamed::<K>)?;
        self.api
            .replace(&name, &kube::api::PostParams::default(), obj)
            .await
    }

    /// Replaces an object's status through the status subresource.
    pub async fn update_status(&self, obj: &K) -> kube::Result<K> {
        let name = obj.meta().name.clone().ok_or_else(unnamed::<K>)?;
        self.api
            .replace_status(&name, &kube::api::PostParams::default(), obj)
            .await
    }

    /// Patches an object.
    pub async fn patch<P: serde::Serialize + std::fmt::Debug>(
        &self,
        name: &str,
        params: &kube::api::PatchParams,
        patch: &kube::api::Patch<P>,
    ) -> kube::Result<K> {
        self.api.patch(name, params, patch).await
    }

    /// Patches an object's status.
    pub async fn patch_status<P: serde::Serialize + std::fmt::Debug>(
        &self,
        name: &str,
        params: &kube::api::PatchParams,
        patch: &kube::api::Patch<P>,
    ) -> kube::Result<K> {
        self.api.patch_status(name, params, patch).await
    }

    /// Deletes an object; `Left` is the object when finalizers keep it around.
    pub async fn delete(
        &self,
        name: &str,
        params: &kube::api::DeleteParams,
    ) -> kube::Result<either::Either<K, kube::core::Status>> {
        self.api.delete(name, params).await
    }

    /// Deletes every object matching `list`.
    pub async fn delete_collection(
        &self,
        params: &kube::api::DeleteParams,
        list: &kube::api::ListParams,
    ) -> kube::Result<either::Either<kube::core::ObjectList<K>, kube::core::Status>> {
        self.api.delete_collection(params, list).await
    }
}
