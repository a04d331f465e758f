//! The options of a request, parsed from its query and body into what the registry
//! takes.

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::registry::options::{DeleteOpts, FieldValidation, Selection, WriteOpts, check_fields};
use crate::registry::resource::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};

use super::request::{QueryView, Request};
use super::route::Target;

pub(crate) fn write_opts(q: &QueryView<'_>, req: &Request) -> Result<WriteOpts, ErrorStatus> {
    let validation = match q.get("fieldValidation") {
        None | Some("" | "Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ErrorStatus::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn, or Strict, got {other}"
            )));
        }
    };
    let dry_run = match q.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ErrorStatus::bad_request(format!(
                "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
            )));
        }
    };
    Ok(WriteOpts {
        dry_run,
        validation,
        field_manager: Some(
            q.get("fieldManager")
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| req.user_agent.split('/').next().unwrap_or_default())
                .chars()
                .take(128)
                .collect(),
        ),
        explicit_manager: q.get("fieldManager").is_some_and(|m| !m.is_empty()),
        force: q.flag("force") == Some(true),
        managed_fields: None,
        skip_validation: false,
    })
}

pub(crate) fn delete_opts(req: &Request, q: &QueryView<'_>) -> Result<DeleteOpts, ErrorStatus> {
    let mut opts = DeleteOpts::default();
    if !req.body.is_empty() {
        let body: Value = serde_json::from_slice(&req.body).map_err(|e| {
            ErrorStatus::bad_request(format!(
                "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: {e}"
            ))
        })?;
        let s = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_owned);
        opts.preconditions.uid = s("/preconditions/uid");
        opts.preconditions.resource_version = s("/preconditions/resourceVersion");
        opts.propagation = s("/propagationPolicy");
        if opts.propagation.is_none() {
            opts.propagation = match body.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some("Orphan".into()),
                Some(false) => Some("Background".into()),
                None => None,
            };
        }
        opts.dry_run = body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    }
    if let Some(p) = q.get("propagationPolicy") {
        opts.propagation = Some(p.to_owned());
    }
    if q.get("dryRun") == Some("All") {
        opts.dry_run = true;
    }
    if let Some(p) = &opts.propagation
        && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
    {
        return Err(ErrorStatus::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            vec![FieldError::not_supported(
                "propagationPolicy",
                json!(p),
                &[
                    "Foreground".into(),
                    "Background".into(),
                    "Orphan".into(),
                    "nil".into(),
                ],
            )],
        ));
    }
    Ok(opts)
}

pub(crate) fn selection(def: &ResourceDef, t: &Target, q: &QueryView<'_>) -> Result<Selection, ErrorStatus> {
    let labels =
        LabelSelector::parse(q.get("labelSelector").unwrap_or_default()).map_err(ErrorStatus::bad_request)?;
    let fields =
        FieldSelector::parse(q.get("fieldSelector").unwrap_or_default()).map_err(ErrorStatus::bad_request)?;
    check_fields(def, &fields)?;
    Ok(Selection {
        namespace: t.namespace.clone(),
        labels,
        fields,
    })
}

pub(crate) fn parse_rv(s: &str) -> Result<u64, ErrorStatus> {
    s.parse::<u64>().map_err(|_| {
        ErrorStatus::bad_request(format!("invalid resource version: \"{s}\"")).with_cause(
            "",
            "",
            "resourceVersion",
        )
    })
}

pub(crate) fn too_large(rv: u64, current: u64) -> ErrorStatus {
    let mut e = ErrorStatus::new(
        504,
        "Timeout",
        format!("Timeout: Too large resource version: {rv}, current: {current}"),
    )
    .with_cause("ResourceVersionTooLarge", "Too large resource version", "");
    e.retry_after_seconds = Some(1);
    e
}
