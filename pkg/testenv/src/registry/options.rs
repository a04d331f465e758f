//! The options of reads and writes, as the registry takes them from a request.

use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::selector::{FieldSelector, LabelSelector, field_value, labels_of};

use super::preconditions::Preconditions;
use super::resource::ResourceDef;

/// `fieldValidation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// Options every write takes.
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteOpts {
    pub(crate) dry_run: bool,
    pub(crate) validation: FieldValidation,
    /// The field manager: `fieldManager`, else the User-Agent's product name.
    pub(crate) field_manager: Option<String>,
    /// `fieldManager` was given explicitly (apply requires it).
    pub(crate) explicit_manager: bool,
    /// `force` (server-side apply only).
    pub(crate) force: bool,
    /// `managedFields` computed by server-side apply, to store with the object.
    pub(crate) managed_fields: Option<Value>,
    /// Build the object without checking it (a dry run only): what mutating admission
    /// webhooks see, since kube-apiserver validates an object after they changed it.
    pub(crate) skip_validation: bool,
}

/// A successful write: the object as stored and the `Warning` headers to send.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) object: Value,
    pub(crate) warnings: Vec<String>,
    /// `201 Created` rather than `200 OK`.
    pub(crate) created: bool,
}

/// `DeleteOptions` as far as the registry uses them.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeleteOpts {
    pub(crate) preconditions: Preconditions,
    pub(crate) propagation: Option<String>,
    pub(crate) dry_run: bool,
}

/// A list request's selection.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selection {
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

impl Selection {
    pub(crate) fn matches(&self, def: &ResourceDef, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns)
        {
            return false;
        }
        if !(self.labels.is_empty() || self.labels.matches(&labels_of(obj))) {
            return false;
        }
        if self.fields.is_empty() {
            return true;
        }
        // Field labels name fields of the requested version; the metadata
        // reads the same in every version, with no conversion.
        let view = std::cell::OnceCell::new();
        self.fields.matches(|f| match f {
            "metadata.name" | "metadata.namespace" => read_field(def, obj, f),
            _ => read_field(def, view.get_or_init(|| def.in_version(obj)), f),
        })
    }
}

fn read_field(def: &ResourceDef, obj: &Value, field: &str) -> String {
    match field {
        "metadata.name" => field_value(obj, "/metadata/name"),
        "metadata.namespace" => field_value(obj, "/metadata/namespace"),
        other => match def.field_label(other) {
            Some(p) if obj.pointer(p).is_some() => field_value(obj, p),
            Some(_) => def.field_zero(other).to_owned(),
            None => String::new(),
        },
    }
}

/// Rejects field selectors the resource does not support, with kube-apiserver's words.
pub(crate) fn check_fields(def: &ResourceDef, fields: &FieldSelector) -> Result<(), ErrorStatus> {
    for t in &fields.terms {
        let known = matches!(t.field.as_str(), "metadata.name" | "metadata.namespace")
            || def.field_label(&t.field).is_some();
        if !known {
            // Kinds with their own field-label conversion word it differently from the
            // default ObjectMeta-only conversion.
            let msg = if def.has_field_labels() {
                format!("field label not supported: {}", t.field)
            } else {
                format!(
                    "\"{}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                    t.field
                )
            };
            return Err(ErrorStatus::bad_request(msg));
        }
    }
    Ok(())
}
