//! The registry: the stored objects and what kube-apiserver's registry does to them,
//! kind by kind. It knows nothing of HTTP; requests reach it as method calls with
//! their options already parsed. Everything here runs under one lock and never awaits.

pub(crate) mod builtin_rules;
pub(crate) mod controllers;
pub(crate) mod crd;
mod decode;
pub(crate) mod managed_fields;
pub(crate) mod options;
pub(crate) mod preconditions;
pub(crate) mod rbac;
pub(crate) mod resource;
mod reviews;
mod scale;
pub(crate) mod schema;
pub(crate) mod tokens;
pub(crate) mod verbs;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::errors::ErrorStatus;
use crate::names::{NameGenerator, UidGenerator};
use crate::store::{ObjKey, Store};

use controllers::Controllers;
use resource::{Builtin, ResourceDef};

/// The stored objects and the resources served; the verbs are its methods.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) store: Store,
    pub(crate) resources: Vec<Arc<ResourceDef>>,
    pub(crate) names: NameGenerator,
    pub(crate) uids: UidGenerator,
    pub(crate) controllers: Controllers,
    /// The converters of CRDs that convert through a webhook, by CRD name.
    pub(crate) converters: std::collections::BTreeMap<String, Arc<dyn crate::Converter>>,
}

impl Registry {
    /// Stores an object as given (see `TestEnv::seed_object`), with a new
    /// revision and a watch event.
    pub(crate) fn seed(&mut self, def: &ResourceDef, ns: &str, name: &str, mut obj: Value) -> Value {
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        let stored = self.store.put(
            &def.key(),
            ObjKey::new(ns, name),
            def.to_storage(obj.clone()).unwrap_or(obj),
        );
        if def.builtin() == Some(Builtin::Crd) {
            self.sync_crd(&stored);
        }
        Self::present(def, &stored)
    }

    pub(crate) fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.resources
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    }

    pub(crate) fn find_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.resources
            .iter()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    /// Stored objects carry the version they were written with; every read is served in
    /// the requested version (CRD versions share storage with `None` conversion).
    pub(crate) fn present(def: &ResourceDef, obj: &Value) -> Value {
        def.in_version(obj)
    }

    pub(crate) fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Value, ErrorStatus> {
        self.store
            .get(&def.key(), &ObjKey::new(ns, name))
            .map(|o| Self::present(def, o))
            .ok_or_else(|| ErrorStatus::not_found(&def.group, &def.plural, name))
    }
}
