//! Request bodies decoded as kube-apiserver's handlers decode them: JSON, YAML, or
//! protobuf for built-in kinds.

use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::registry::resource::ResourceDef;

use super::proto;
use super::request::{QueryView, Request};

/// Decodes a create/update body: JSON, YAML or (for built-in kinds) protobuf, as
/// kube-apiserver accepts (CBOR is not implemented here).
pub(crate) fn json_body(req: &Request, def: &ResourceDef) -> Result<Value, ErrorStatus> {
    let ct = req.content_type.split(';').next().unwrap_or_default().trim();
    let cannot = |e: String| {
        ErrorStatus::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
            kind = def.kind,
            v = def.version
        ))
    };
    match ct {
        "" | "application/json" | "*/*" => {
            serde_json::from_slice(&req.body).map_err(|e| cannot(e.to_string()))
        }
        "application/yaml" => std::str::from_utf8(&req.body)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_saphyr::from_str::<Value>(t).map_err(|e| e.to_string()))
            .map_err(cannot),
        "application/vnd.kubernetes.protobuf" if proto::decodes(&def.api_version(), &def.kind) => {
            proto::decode(&def.api_version(), &def.kind, &req.body).map_err(cannot)
        }
        // Custom resources have no protobuf schema, so kube-apiserver offers them none.
        "application/vnd.kubernetes.protobuf" if def.is_custom() => Err(ErrorStatus::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml".to_owned(),
        )),
        _ => Err(ErrorStatus::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (testenv does not decode {ct})"
        ))),
    }
}

/// Custom resources decode as unstructured objects, which must name their kind (built-in
/// bodies take it from the endpoint). The message depends on which decoder ran: the
/// strict one (fieldValidation Warn or Strict) or the lenient one (Ignore).
pub(crate) fn custom_kind_present(
    req: &Request,
    q: &QueryView<'_>,
    def: &ResourceDef,
    body: &Value,
) -> Result<(), ErrorStatus> {
    if !def.is_custom()
        || !body.is_object()
        || body
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| !k.is_empty())
    {
        return Ok(());
    }
    let raw = String::from_utf8_lossy(&req.body);
    let missing = format!("Object 'Kind' is missing in '{raw}'");
    if q.get("fieldValidation") == Some("Ignore") {
        return Err(ErrorStatus::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: {missing}",
            kind = def.kind,
            v = def.version,
        )));
    }
    Err(ErrorStatus::bad_request(format!(
        "the object provided is unrecognized (must be of type {}): {missing} ({})",
        def.kind,
        summarize(&req.body, 30)
    )))
}

/// The start of a body for an error message: text when it looks like JSON, else hex.
fn summarize(data: &[u8], max: usize) -> String {
    let cut = &data[..data.len().min(max)];
    let more = if data.len() > max { " ..." } else { "" };
    match data.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(cut)),
        Some(_) => {
            let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// Decodes the body of a subresource whose kind is not the resource's (a Scale, a
/// TokenRequest): JSON, or protobuf as client-go's typed clients send it.
pub(crate) fn subresource_body(req: &Request, api_version: &str, kind: &str) -> Result<Value, ErrorStatus> {
    let ct = req.content_type.split(';').next().unwrap_or_default().trim();
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    if ct == "application/vnd.kubernetes.protobuf" {
        proto::decode(api_version, kind, &req.body)
    } else {
        serde_json::from_slice::<Value>(&req.body).map_err(|e| e.to_string())
    }
    .map_err(|e| {
        ErrorStatus::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}"
        ))
    })
}
