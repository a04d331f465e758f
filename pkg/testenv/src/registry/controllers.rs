//! Optional stand-ins for the kube-controller-manager loops that finish deletions a bare
//! kube-apiserver only starts: the garbage collector (owner references, `orphan` and
//! `foregroundDeletion` finalizers) and the namespace controller (emptying and removing
//! Terminating namespaces). They run synchronously after every write, until nothing
//! changes, so tests observe their outcome without waiting. One step is not
//! synchronous: a Terminating namespace whose content is gone is removed by
//! [`Registry::finalize_namespaces`], which the server runs on a tick, so a
//! create into it meanwhile gets kube-apiserver's 403 `NamespaceTerminating`
//! as in a cluster, where the namespace controller runs apart from the API
//! server.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::object_meta::{has_finalizer, is_deleting, meta_str};
use crate::store::{ObjKey, ResKey};

use super::Registry;
use super::options::DeleteOpts;
use super::resource::ResourceDef;

/// Which controllers run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Controllers {
    pub(crate) garbage_collector: bool,
    pub(crate) namespaces: bool,
    /// Whether a tick removes emptied namespaces ([`Registry::finalize_namespaces`]);
    /// without one (no async runtime to run it), they go inside the write
    /// that emptied them.
    pub(crate) namespaces_on_a_tick: bool,
    /// The uids of the namespaces seen Terminating and empty at the last tick:
    /// each is removed at the tick after, so it is Terminating for at least
    /// one whole tick.
    pub(crate) emptied_namespaces: HashSet<String>,
}

fn owner_refs(o: &Value) -> Vec<Value> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn uid(o: &Value) -> &str {
    meta_str(o, "uid")
}

fn is_terminating_namespace(o: &Obj) -> bool {
    o.def.plural == "namespaces" && o.def.group.is_empty() && is_deleting(&o.value)
}

/// One object, addressed for a write.
struct Obj {
    def: Arc<ResourceDef>,
    key: ObjKey,
    value: Arc<Value>,
}

impl Registry {
    fn def_for_key(&self, res: &ResKey) -> Option<Arc<ResourceDef>> {
        self.resources.iter().find(|d| &d.key() == res).cloned()
    }

    fn all_objects(&self) -> Vec<Obj> {
        let mut keys: Vec<ResKey> = self.resources.iter().map(|d| d.key()).collect();
        keys.sort();
        keys.dedup();
        let mut out = Vec::new();
        for res in keys {
            let Some(def) = self.def_for_key(&res) else {
                continue;
            };
            for (k, v) in self.store.iter(&res) {
                out.push(Obj {
                    def: Arc::clone(&def),
                    key: k.clone(),
                    value: Arc::clone(v),
                });
            }
        }
        out
    }

    /// Rewrites an object's metadata as a controller would (an update with its own revision).
    fn controller_write(&mut self, o: &Obj, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) {
        let mut v = (*o.value).clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            edit(meta);
        }
        let done = is_deleting(&v)
            && v.pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        // As for any update, emptying a deleted object's finalizers deletes it as stored.
        if done {
            self.store.remove(&o.def.key(), &o.key);
        } else {
            self.store.put(&o.def.key(), o.key.clone(), v);
        }
    }

    /// Runs kube-apiserver's CRD finalizer and the enabled controllers until the store
    /// stops changing.
    pub(crate) fn settle(&mut self) {
        for _ in 0..1000 {
            let before = self.store.rv();
            // Not opt-in: this controller runs inside kube-apiserver itself.
            self.crd_finalizer_pass();
            if self.controllers.namespaces {
                self.namespace_pass();
            }
            if self.controllers.garbage_collector {
                self.gc_pass();
            }
            if self.store.rv() == before {
                return;
            }
        }
    }

    /// The namespace controller's content step: every object of a
    /// Terminating namespace is deleted (finalizers still hold some back).
    /// Without a tick, an emptied namespace goes here too.
    fn namespace_pass(&mut self) {
        let all = self.all_objects();
        for ns in all.iter().filter(|o| is_terminating_namespace(o)) {
            let name = ns.key.name.as_str();
            for o in all.iter().filter(|o| o.def.namespaced && o.key.namespace == name) {
                if !is_deleting(&o.value) {
                    let _ = self.delete(&o.def, &o.key.namespace, &o.key.name, &DeleteOpts::default());
                }
            }
        }
        if !self.controllers.namespaces_on_a_tick {
            for ns in self.emptied_namespaces() {
                self.remove_namespace(&ns);
            }
        }
    }

    /// The namespace controller's last step, run on a tick: a Terminating
    /// namespace that was already empty at the previous tick loses its
    /// `kubernetes` finalizer and goes. Returns whether anything went.
    pub(crate) fn finalize_namespaces(&mut self) -> bool {
        let emptied = self.emptied_namespaces();
        let mut removed = false;
        let mut still_waiting = HashSet::new();
        for ns in emptied {
            let id = uid(&ns.value).to_owned();
            if self.controllers.emptied_namespaces.contains(&id) {
                self.remove_namespace(&ns);
                removed = true;
            } else {
                still_waiting.insert(id);
            }
        }
        self.controllers.emptied_namespaces = still_waiting;
        if removed {
            self.settle();
        }
        removed
    }

    /// The Terminating namespaces with nothing left in them.
    fn emptied_namespaces(&self) -> Vec<Obj> {
        // The tick runs every 500 ms: with no namespace Terminating (nearly
        // always), it must not walk every object of the server.
        let namespaces = ResKey::new("", "namespaces");
        if !self.store.iter(&namespaces).any(|(_, ns)| is_deleting(ns)) {
            return Vec::new();
        }
        let all = self.all_objects();
        let occupied: HashSet<String> = all
            .iter()
            .filter(|o| o.def.namespaced)
            .map(|o| o.key.namespace.clone())
            .collect();
        all.into_iter()
            .filter(|o| is_terminating_namespace(o) && !occupied.contains(&o.key.name))
            .collect()
    }

    /// Clears the namespace's `kubernetes` finalizer; it goes unless others
    /// remain in `metadata.finalizers`.
    fn remove_namespace(&mut self, ns: &Obj) {
        let done = ns
            .value
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if done {
            self.store.remove(&ns.def.key(), &ns.key);
            return;
        }
        // Held by another finalizer: only ours goes, once.
        let ours = ns
            .value
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if ours {
            let mut v = (*ns.value).clone();
            v["spec"] = json!({});
            self.store.put(&ns.def.key(), ns.key.clone(), v);
        }
    }

    fn gc_pass(&mut self) {
        let all = self.all_objects();
        let uids: HashSet<&str> = all.iter().map(|o| uid(&o.value)).collect();
        let dependents_of = |owner: &str| -> Vec<&Obj> {
            all.iter()
                .filter(|o| {
                    owner_refs(&o.value)
                        .iter()
                        .any(|r| r.get("uid").and_then(Value::as_str) == Some(owner))
                })
                .collect()
        };
        for o in all.iter().filter(|o| is_deleting(&o.value)) {
            let owner = uid(&o.value).to_owned();
            if has_finalizer(&o.value, "orphan") {
                for d in dependents_of(&owner) {
                    self.controller_write(d, |meta| {
                        if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
                            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&owner));
                        }
                    });
                }
                self.controller_write(o, |meta| remove_finalizer(meta, "orphan"));
                return;
            }
            if has_finalizer(&o.value, "foregroundDeletion") {
                let deps = dependents_of(&owner);
                for d in &deps {
                    if !is_deleting(&d.value) {
                        let opts = DeleteOpts {
                            propagation: Some("Foreground".into()),
                            ..DeleteOpts::default()
                        };
                        let _ = self.delete(&d.def, &d.key.namespace, &d.key.name, &opts);
                    }
                }
                let blocking = deps.iter().any(|d| {
                    owner_refs(&d.value).iter().any(|r| {
                        r.get("uid").and_then(Value::as_str) == Some(&owner)
                            && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
                    })
                });
                if !blocking {
                    self.controller_write(o, |meta| remove_finalizer(meta, "foregroundDeletion"));
                    return;
                }
            }
        }
        for o in &all {
            let refs = owner_refs(&o.value);
            if refs.is_empty() || is_deleting(&o.value) {
                continue;
            }
            let orphaned = refs
                .iter()
                .all(|r| !uids.contains(r.get("uid").and_then(Value::as_str).unwrap_or_default()));
            if orphaned {
                let _ = self.delete(&o.def, &o.key.namespace, &o.key.name, &DeleteOpts::default());
                return;
            }
        }
    }
}

fn remove_finalizer(meta: &mut serde_json::Map<String, Value>, f: &str) {
    if let Some(Value::Array(fins)) = meta.get_mut("finalizers") {
        fins.retain(|x| x != f);
    }
}
