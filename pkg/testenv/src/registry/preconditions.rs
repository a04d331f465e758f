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

    /// `rest.BeforeDelete`'s check, which a `DELETE` meets before storage does: its
    /// 409 names the object's kind where storage errors name the resource, and words
    /// the mismatch its own way (uid first, then resourceVersion).
    pub(crate) fn check_before_delete(
        &self,
        def: &ResourceDef,
        name: &str,
        existing: &Value,
    ) -> Result<(), ErrorStatus> {
        let failed = |why: String| ErrorStatus::conflict_on(&def.group, &def.kind, name, &why);
        let uid = meta_str(existing, "uid");
        if let Some(wanted) = &self.uid
            && wanted != uid
        {
            return Err(failed(format!(
                "the UID in the precondition ({wanted}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            )));
        }
        let rv = meta_str(existing, "resourceVersion");
        if let Some(wanted) = &self.resource_version
            && wanted != rv
        {
            return Err(failed(format!(
                "the ResourceVersion in the precondition ({wanted}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
            )));
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
