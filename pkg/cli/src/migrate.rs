//! `kinject migrate`: every object of a kind rewritten in its CRD's storage
//! version, then the CRD's `status.storedVersions` trimmed to that version
//! alone, so that an older version can leave `spec.versions`. This is
//! Knative's storage-version migrator (`apiextensions/storageversion`),
//! through kubectl like the rest of this command.
//!
//! An empty merge patch is enough to rewrite an object: the API server stores
//! every write in the storage version, and skips a write only when the stored
//! bytes would not change, which they do for an object stored in another
//! version. An object deleted meanwhile needs nothing, and one written
//! meanwhile is stored in the storage version already. The status is trimmed
//! only once every object went through, so a migration stopped anywhere is
//! finished by running it again; objects it rewrote before keep their
//! meaning (a patch of nothing changes nothing but where they are stored).

use serde_json::{Value, json};

use crate::kubectl;

/// How many objects one kubectl run patches: progress is printed after
/// each, and a failure stops the migration there.
const BATCH: usize = 500;

/// A CustomResourceDefinition as the migration reads it.
#[derive(Debug)]
struct Definition {
    /// `widgets.tutorial.example.com`.
    name: String,
    group: String,
    plural: String,
    kind: String,
    /// The version marked `storage`.
    storage: String,
    /// `status.storedVersions`.
    stored: Vec<String>,
    resource_version: String,
}

impl Definition {
    fn read(crd: &Value) -> Option<Definition> {
        let text = |pointer: &str| crd.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
        let storage = crd
            .pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
            .get("name")?
            .as_str()?
            .to_owned();
        Some(Definition {
            name: text("/metadata/name")?,
            group: text("/spec/group")?,
            plural: text("/spec/names/plural")?,
            kind: text("/spec/names/kind")?,
            storage,
            stored: crd
                .pointer("/status/storedVersions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default(),
            resource_version: text("/metadata/resourceVersion").unwrap_or_default(),
        })
    }

    /// Whether `resource` names this CRD as kubectl takes it: its name, plural,
    /// singular, kind or a short name, in any case.
    fn named(crd: &Value, resource: &str) -> bool {
        let wanted = resource.to_lowercase();
        let names = crd.pointer("/spec/names");
        let field = |key: &str| {
            names
                .and_then(|n| n.get(key))
                .and_then(Value::as_str)
                .map(str::to_lowercase)
        };
        let short = names
            .and_then(|n| n.get("shortNames"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_lowercase);
        crd.pointer("/metadata/name").and_then(Value::as_str) == Some(wanted.as_str())
            || ["plural", "singular", "kind"]
                .iter()
                .filter_map(|key| field(key))
                .chain(short)
                .any(|name| name == wanted)
    }

    /// `widgets.v1beta1.tutorial.example.com`: kubectl's name of the
    /// resource in the storage version.
    fn in_storage_version(&self) -> String {
        format!("{}.{}.{}", self.plural, self.storage, self.group)
    }
}

/// Migrates every object of the CRD `resource` names to its storage version.
pub(crate) fn migrate(resource: &str, extra: &[String]) -> Result<(), String> {
    let crd = find(resource, extra)?;
    let (name, storage) = (&crd.name, &crd.storage);
    if crd.stored == [storage.clone()] {
        println!("{name}: every object is stored in {storage} already; nothing to migrate");
        return Ok(());
    }
    let objects = identities(&crd, extra)?;
    let mut done = 0;
    for batch in objects.chunks(BATCH) {
        rewrite(batch, extra).map_err(|e| {
            format!(
                "{e}\n{name}: {done} of {} objects were rewritten in {storage} before this; \
                 status.storedVersions is unchanged ({}): run `kinject migrate {resource}` again to finish",
                objects.len(),
                crd.stored.join(", ")
            )
        })?;
        done += batch.len();
        println!("{name}: {done}/{} objects rewritten in {storage}", objects.len());
    }
    trim_stored_versions(&crd, extra)?;
    println!(
        "{name}: status.storedVersions is [{storage}] (was [{}]); versions but {storage} may now leave the CRD's spec.versions",
        crd.stored.join(", ")
    );
    Ok(())
}

/// The items `kubectl get <what> -o json` lists.
fn list_items(what: &[&str], extra: &[String]) -> Result<Vec<Value>, String> {
    let mut args = vec!["get"];
    args.extend(what);
    args.extend(["-o", "json"]);
    let listed = kubectl::capture(&args, extra, "")?;
    let mut list: Value = serde_json::from_str(&listed)
        .map_err(|e| format!("kubectl get {} printed what is not JSON: {e}", what[0]))?;
    Ok(match list.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    })
}

/// The one CRD `resource` names.
fn find(resource: &str, extra: &[String]) -> Result<Definition, String> {
    let items = list_items(&["customresourcedefinitions"], extra)?;
    let named: Vec<&Value> = items
        .iter()
        .filter(|crd| Definition::named(crd, resource))
        .collect();
    match named.as_slice() {
        [] => Err(format!(
            "no CustomResourceDefinition is named {resource:?}; `kubectl get customresourcedefinitions` lists them \
             (a kind, plural, short name or `plural.group` names one)"
        )),
        [crd] => Definition::read(crd).ok_or_else(|| {
            format!("the CustomResourceDefinition {resource:?} names has no version marked storage")
        }),
        several => Err(format!(
            "{resource:?} names several CustomResourceDefinitions ({}); name one as `plural.group`",
            several
                .iter()
                .filter_map(|crd| crd.pointer("/metadata/name").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Each object of the kind, as much of it as a patch needs to name it.
fn identities(crd: &Definition, extra: &[String]) -> Result<Vec<Value>, String> {
    let resource = crd.in_storage_version();
    let items = list_items(&[&resource, "--all-namespaces"], extra)?;
    Ok(items
        .iter()
        .map(|item| {
            let mut metadata = json!({"name": item.pointer("/metadata/name")});
            if let Some(namespace) = item.pointer("/metadata/namespace") {
                metadata["namespace"] = namespace.clone();
            }
            json!({
                "apiVersion": format!("{}/{}", crd.group, crd.storage),
                "kind": crd.kind,
                "metadata": metadata,
            })
        })
        .collect())
}

/// An empty merge patch of each object of `batch`: an object gone since it
/// was listed is no failure.
fn rewrite(batch: &[Value], extra: &[String]) -> Result<(), String> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": batch}).to_string();
    let refused = match kubectl::capture(&["patch", "-f", "-", "--type=merge", "-p", "{}"], extra, &list) {
        Ok(_) => return Ok(()),
        Err(refused) => refused,
    };
    let failures: Vec<&str> = refused
        .lines()
        .filter(|line| {
            line.starts_with("Error from server") && !line.starts_with("Error from server (NotFound)")
        })
        .collect();
    if failures.is_empty()
        && refused
            .lines()
            .any(|line| line.starts_with("Error from server (NotFound)"))
    {
        return Ok(());
    }
    Err(if failures.is_empty() {
        refused.trim_end().to_owned()
    } else {
        failures.join("\n")
    })
}

/// `status.storedVersions` set to the storage version alone, on the CRD as
/// it was read: a CRD changed since (another storage version, say) is a
/// conflict, and nothing is trimmed.
fn trim_stored_versions(crd: &Definition, extra: &[String]) -> Result<(), String> {
    let patch = json!({
        "metadata": {"resourceVersion": crd.resource_version},
        "status": {"storedVersions": [crd.storage]},
    })
    .to_string();
    let crd_name = format!("customresourcedefinitions/{}", crd.name);
    kubectl::capture(
        &["patch", &crd_name, "--subresource=status", "--type=merge", "-p", &patch],
        extra,
        "",
    )
    .map(drop)
    .map_err(|e| {
        format!(
            "{e}\n{}: every object is stored in {}, but status.storedVersions could not be trimmed (the CRD changed \
             since the migration read it?): run `kinject migrate {}` again",
            crd.name, crd.storage, crd.name
        )
    })
}
