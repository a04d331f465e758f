//! What a write requires of the object it changes: preconditions and the
//! optimistic-concurrency `resourceVersion`.

use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::object_meta::meta_str;

use super::resource::ResourceDef;

/// What a write requires of the stored object (apimachinery's `storage.Preconditions`):
/// a delete's `preconditions`, and the `uid` an update's body names.
#[derive(Clone, Debug, Default)]
pub(crate) struct Preconditions {
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
}

impl Preconditions {
    /// `Preconditions.Check`: a 409 for the first precondition `existing` fails.
    pub(crate) fn check(&self, def: &ResourceDef, name: &str, existing: &Value) -> Result<(), ErrorStatus> {
        let failed = |what: &str, wanted: &str, field: &str| {
            ErrorStatus::conflict_on(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {}",
                    meta_str(existing, field)
                ),
            )
        };
        if let Some(uid) = &self.uid
            && uid != meta_str(existing, "uid")
        {
            return Err(failed("UID", uid, "uid"));
        }
        if let Some(rv) = &self.resource_version
            && rv != meta_str(existing, "resourceVersion")
        {
            return Err(failed("ResourceVersion", rv, "resourceVersion"));
        }
        Ok(())
    }
}

/// Optimistic concurrency: a write naming a `resourceVersion` must name the stored
/// one; an empty one writes over whatever is stored.
pub(crate) fn check_resource_version(
    def: &ResourceDef,
    name: &str,
    existing: &Value,
    rv: &str,
) -> Result<(), ErrorStatus> {
    if rv.is_empty() || rv == meta_str(existing, "resourceVersion") {
        Ok(())
    } else {
        Err(ErrorStatus::stale(&def.group, &def.plural, name))
    }
}
