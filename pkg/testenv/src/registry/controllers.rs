//! Optional stand-ins for the kube-controller-manager loops that finish deletions a bare
//! kube-apiserver only starts: the garbage collector (owner references, `orphan` and
//! `foregroundDeletion` finalizers) and the namespace controller (emptying and removing
//! Terminating namespaces). They run synchronously after every write, until nothing
//! changes, so tests observe their outcome without waiting.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::object_meta::{has_finalizer, is_deleting, meta_str};
use crate::store::{ObjKey, ResKey};

use super::Registry;
use super::options::DeleteOpts;
use super::resource::ResourceDef;

/// Which controllers run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Controllers {
    pub(crate) garbage_collector: bool,
    pub(crate) namespaces: bool,
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

    fn namespace_pass(&mut self) {
        let all = self.all_objects();
        let terminating: Vec<&Obj> = all
            .iter()
            .filter(|o| o.def.plural == "namespaces" && o.def.group.is_empty() && is_deleting(&o.value))
            .collect();
        for ns in terminating {
            let name = ns.key.name.as_str();
            let mut remaining = 0;
            for o in all.iter().filter(|o| o.def.namespaced && o.key.namespace == name) {
                remaining += 1;
                if !is_deleting(&o.value) {
                    let _ = self.delete(&o.def, &o.key.namespace, &o.key.name, &DeleteOpts::default());
                }
            }
            let still_there = all
                .iter()
                .filter(|o| o.def.namespaced && o.key.namespace == name)
                .any(|o| self.store.get(&o.def.key(), &o.key).is_some());
            if remaining == 0 || !still_there {
                let mut v = (*ns.value).clone();
                v["spec"] = json!({});
                let done = v
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty);
                self.store.put(&ns.def.key(), ns.key.clone(), v);
                if done {
                    self.store.remove(&ns.def.key(), &ns.key);
                }
            }
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
