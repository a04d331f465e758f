//! Building `kube::Api` handles for statically typed kinds of either scope.

use std::marker::PhantomData;

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

/// Where a typed client gets its `kube::Client`: a client itself, or the
/// injection context (`Client::new(&ctx, "ns")`).
pub trait ClientSource {
    /// A handle on the shared kube client.
    fn kube_client(&self) -> Client;
}

impl ClientSource for Client {
    fn kube_client(&self) -> Client {
        self.clone()
    }
}

/// The verbs a [`TypedClient`] may offer, one marker trait each: a kind's
/// `#[genclient]` (`noStatus`, `readonly`, `onlyVerbs`, `skipVerbs`) picks the
/// set, and a verb outside it is a compile error rather than a runtime 405:
///
/// ```compile_fail,E0277
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinject_runtime::client::{TypedClient, verbs};
///
/// enum ReadOnly {}
/// impl verbs::Get for ReadOnly {}
///
/// async fn write(client: TypedClient<ConfigMap, ReadOnly>, cm: ConfigMap) {
///     let _ = client.create(&cm).await;
/// }
/// ```
pub mod verbs {
    macro_rules! verbs {
        ($($(#[$doc:meta])* $verb:ident),* $(,)?) => {
            $($(#[$doc])* pub trait $verb {} impl $verb for AllVerbs {})*
        };
    }

    /// Every verb: the default of [`TypedClient`](super::TypedClient).
    #[derive(Debug)]
    pub enum AllVerbs {}

    verbs! {
        /// `get`.
        Get,
        /// `list`.
        List,
        /// `watch`.
        Watch,
        /// `create`.
        Create,
        /// `update`.
        Update,
        /// `update_status`.
        UpdateStatus,
        /// `patch`.
        Patch,
        /// `patch_status`.
        PatchStatus,
        /// `delete`.
        Delete,
        /// `delete_collection`.
        DeleteCollection,
    }
}

/// A typed client for one kind, with the verbs of Knative's generated clients.
///
/// It is a thin layer over [`kube::Api`] (reach it with [`TypedClient::api`]):
/// `update` and `update_status` take the name from the object, as client-go's
/// `Update` and `UpdateStatus` do. `V` names the verbs it offers (see
/// [`verbs`]); a generated `Client` is this type with its kind's verbs.
pub struct TypedClient<K, V = verbs::AllVerbs> {
    api: Api<K>,
    verbs: PhantomData<fn() -> V>,
}

impl<K: Clone, V> Clone for TypedClient<K, V> {
    fn clone(&self) -> Self {
        TypedClient {
            api: self.api.clone(),
            verbs: PhantomData,
        }
    }
}

impl<K: Resource, V> std::fmt::Debug for TypedClient<K, V> {
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

impl<K, V> TypedClient<K, V>
where
    K: Resource<DynamicType = (), Scope: ApiScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    /// A client for `namespace` (all namespaces when `None`; ignored for
    /// cluster-scoped kinds).
    pub fn from_client(client: Client, namespace: Option<&str>) -> Self {
        TypedClient {
            api: scoped_api::<K>(client, namespace),
            verbs: PhantomData,
        }
    }

    /// A client for the objects in `namespace`.
    pub fn new(source: &impl ClientSource, namespace: &str) -> Self
    where
        K: Resource<Scope = NamespaceResourceScope>,
    {
        Self::from_client(source.kube_client(), Some(namespace))
    }

    /// A client whose `list`, `watch` and `delete_collection` span every namespace.
    pub fn all_namespaces(source: &impl ClientSource) -> Self
    where
        K: Resource<Scope = NamespaceResourceScope>,
    {
        Self::from_client(source.kube_client(), None)
    }

    /// A client for a cluster-scoped kind.
    pub fn cluster(source: &impl ClientSource) -> Self
    where
        K: Resource<Scope = ClusterResourceScope>,
    {
        Self::from_client(source.kube_client(), None)
    }

    /// The underlying `kube::Api`, for anything beyond these verbs.
    pub fn api(&self) -> &Api<K> {
        &self.api
    }

    /// Reads the object called `name` from the API server.
    pub async fn get(&self, name: &str) -> kube::Result<K>
    where
        V: verbs::Get,
    {
        self.api.get(name).await
    }

    /// Lists objects from the API server (prefer the lister in controllers).
    pub async fn list(&self, params: &kube::api::ListParams) -> kube::Result<kube::core::ObjectList<K>>
    where
        V: verbs::List,
    {
        self.api.list(params).await
    }

    /// Streams changes after `resource_version` (prefer the informer in controllers).
    pub async fn watch(
        &self,
        params: &kube::api::WatchParams,
        resource_version: &str,
    ) -> kube::Result<impl futures::Stream<Item = kube::Result<kube::core::WatchEvent<K>>> + use<K, V>>
    where
        V: verbs::Watch,
    {
        self.api.watch(params, resource_version).await
    }

    /// Creates `obj`.
    pub async fn create(&self, obj: &K) -> kube::Result<K>
    where
        V: verbs::Create,
    {
        self.api.create(&kube::api::PostParams::default(), obj).await
    }

    /// Replaces the object named by `obj`; its resourceVersion guards against
    /// lost updates.
    pub async fn update(&self, obj: &K) -> kube::Result<K>
    where
        V: verbs::Update,
    {
        let name = obj.meta().name.clone().ok_or_else(unnamed::<K>)?;
        self.api
            .replace(&name, &kube::api::PostParams::default(), obj)
            .await
    }

    /// Replaces the status of the object named by `obj`, through the status
    /// subresource.
    pub async fn update_status(&self, obj: &K) -> kube::Result<K>
    where
        V: verbs::UpdateStatus,
    {
        let name = obj.meta().name.clone().ok_or_else(unnamed::<K>)?;
        self.api
            .replace_status(&name, &kube::api::PostParams::default(), obj)
            .await
    }

    /// Patches the object called `name`.
    pub async fn patch<P: serde::Serialize + std::fmt::Debug>(
        &self,
        name: &str,
        params: &kube::api::PatchParams,
        patch: &kube::api::Patch<P>,
    ) -> kube::Result<K>
    where
        V: verbs::Patch,
    {
        self.api.patch(name, params, patch).await
    }

    /// Patches the status of the object called `name`.
    pub async fn patch_status<P: serde::Serialize + std::fmt::Debug>(
        &self,
        name: &str,
        params: &kube::api::PatchParams,
        patch: &kube::api::Patch<P>,
    ) -> kube::Result<K>
    where
        V: verbs::PatchStatus,
    {
        self.api.patch_status(name, params, patch).await
    }

    /// Deletes the object called `name`; `Left` is the object while finalizers
    /// keep it.
    pub async fn delete(
        &self,
        name: &str,
        params: &kube::api::DeleteParams,
    ) -> kube::Result<either::Either<K, kube::core::Status>>
    where
        V: verbs::Delete,
    {
        self.api.delete(name, params).await
    }

    /// Deletes every object `list` matches.
    pub async fn delete_collection(
        &self,
        params: &kube::api::DeleteParams,
        list: &kube::api::ListParams,
    ) -> kube::Result<either::Either<kube::core::ObjectList<K>, kube::core::Status>>
    where
        V: verbs::DeleteCollection,
    {
        self.api.delete_collection(params, list).await
    }
}
