//! The verbs of kube-apiserver's generic registry: create, update (main resource and
//! `status`), patch, server-side apply and delete with finalizers, each a method of
//! [`Registry`](super::Registry).

mod apply;
mod create;
mod delete;
mod patch;
mod update;

use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::object_meta::validation::NameRule;

use super::resource::{Builtin, ResourceDef};

pub(crate) use patch::unsupported_patch_type;

/// How the kind's object names are validated.
fn name_rule(def: &ResourceDef) -> NameRule {
    match def.builtin() {
        Some(Builtin::Namespace) => NameRule::Label,
        Some(Builtin::Service) => NameRule::Dns1035,
        _ => NameRule::Subdomain,
    }
}

/// The object without metadata (and status when it is a subresource): what
/// `metadata.generation` tracks.
fn generation_view(def: &ResourceDef, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if def.status {
            m.remove("status");
        }
    }
    v
}

/// etcd's default `--max-request-bytes` (1.5 MiB).
const MAX_STORED_OBJECT_BYTES: usize = 1024 * 1024 + 512 * 1024;

/// Refuses to store an object etcd would refuse: its request-size limit surfaces
/// through kube-apiserver as an untyped 500 carrying etcd's own message. The size
/// is that of the object's JSON (kube-apiserver stores built-ins as protobuf, a little
/// smaller).
fn check_storable(obj: &Value) -> Result<(), ErrorStatus> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing a `Value` into a counter cannot fail.
    let _ = serde_json::to_writer(&mut n, obj);
    if n.0 > MAX_STORED_OBJECT_BYTES {
        return Err(ErrorStatus::new(500, "", "etcdserver: request is too large"));
    }
    Ok(())
}

/// The object a write stores under the status-subresource rule: a status write
/// changes only `status` (ResetObjectMetaForStatus and friends), and a write to
/// the main resource of a kind with the subresource keeps the stored status.
fn status_rule(def: &ResourceDef, existing: &Value, incoming: Value, status_only: bool) -> Value {
    let existing = def.in_own_version(existing);
    let (mut stored, status_from) = if status_only {
        (existing.clone().into_owned(), incoming.get("status").cloned())
    } else if def.status {
        (incoming, existing.get("status").cloned())
    } else {
        return incoming;
    };
    match status_from {
        Some(status) => stored["status"] = status,
        None => {
            if let Some(m) = stored.as_object_mut() {
                m.remove("status");
            }
        }
    }
    stored
}
