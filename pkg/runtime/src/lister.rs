//! Listers: typed, read-only views of an informer's cache.
//!
//! Reads return `Arc`s a caller may keep as long as it likes: objects are
//! immutable behind them, so no caller can change what another one sees. With
//! the default [`CacheFormat::Decoded`](crate::informer::CacheFormat), a read
//! shares the object the informer decoded once when it stored it (the one its
//! handlers saw), so it costs a lock and an `Arc` clone, not a decode; with
//! [`CacheFormat::Json`](crate::informer::CacheFormat) every read decodes a
//! fresh copy, the price of a small cache.
//!
//! ```no_run
//! # fn demo(ctx: &kinject_runtime::injection::Context) -> Result<(), kinject_runtime::informer::CacheError> {
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::core::Selector;
//! let pods = ctx.informer::<Pod>().lister();
//! let mine = pods.namespaced("ns").list(&Selector::from_iter([("app", "web")]))?;
//! let one = pods.namespaced("ns").get("web-1")?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::Resource;
use kube::core::Selector;
use parking_lot::RwLock;

use crate::apis::Object;
use crate::labels::CompiledSelector;
use crate::store::{CacheError, IndexError, Store};

/// Reads an informer's cache across namespaces.
pub struct Lister<K> {
    store: Arc<RwLock<Store<K>>>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister {
            store: self.store.clone(),
        }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lister")
    }
}

impl<K: Object> Lister<K> {
    pub(crate) fn new(store: Arc<RwLock<Store<K>>>) -> Self {
        Lister { store }
    }

    /// Every cached object whose labels match, in every namespace, ordered by
    /// namespace then name.
    pub fn list(&self, selector: &Selector) -> Result<Vec<Arc<K>>, CacheError> {
        self.store.read().list(None, &CompiledSelector::new(selector))
    }

    /// Every cached object.
    pub fn list_all(&self) -> Result<Vec<Arc<K>>, CacheError> {
        self.list(&Selector::default())
    }

    /// The object at `namespace`/`name` (an empty namespace for cluster-scoped
    /// kinds), for generic code that holds keys rather than typed scopes.
    pub fn get_by_key(&self, namespace: &str, name: &str) -> Result<Option<Arc<K>>, CacheError> {
        self.store.read().get(namespace, name)
    }

    /// The objects a custom index maps `value` to.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        self.store.read().by_index(index, value)
    }

    /// The `(namespace, name)` of every cached object.
    pub fn keys(&self) -> Vec<(String, String)> {
        self.store
            .read()
            .keys()
            .map(|(namespace, name)| (namespace.to_owned(), name.to_owned()))
            .collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.store.read().len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.store.read().len() == 0
    }
}

impl<K: Object + Resource<Scope = NamespaceResourceScope>> Lister<K> {
    /// The objects of one namespace.
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            store: self.store.clone(),
            namespace: namespace.to_owned(),
        }
    }
}

impl<K: Object + Resource<Scope = ClusterResourceScope>> Lister<K> {
    /// The cluster-scoped object called `name`.
    pub fn get(&self, name: &str) -> Result<Option<Arc<K>>, CacheError> {
        self.get_by_key("", name)
    }
}

/// Reads one namespace of an informer's cache.
pub struct NamespaceLister<K> {
    store: Arc<RwLock<Store<K>>>,
    namespace: String,
}

impl<K> fmt::Debug for NamespaceLister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<K: Object> NamespaceLister<K> {
    /// The object called `name` in this namespace.
    pub fn get(&self, name: &str) -> Result<Option<Arc<K>>, CacheError> {
        self.store.read().get(&self.namespace, name)
    }

    /// The objects of this namespace whose labels match, ordered by name.
    pub fn list(&self, selector: &Selector) -> Result<Vec<Arc<K>>, CacheError> {
        self.store
            .read()
            .list(Some(&self.namespace), &CompiledSelector::new(selector))
    }

    /// Every object of this namespace.
    pub fn list_all(&self) -> Result<Vec<Arc<K>>, CacheError> {
        self.list(&Selector::default())
    }
}
