//! An admission webhook's answer, read as kube-apiserver reads it.

use base64::Engine as _;
use serde_json::Value;

use crate::go_format::go_json_type;

/// The review's `response`, checked as kube-apiserver checks it.
pub(super) fn check_response(review: &Value, uid: &str) -> Result<Value, String> {
    let Some(response) = review.get("response") else {
        return Err("webhook response was absent".to_owned());
    };
    let got = response.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid=\"{uid}\", got \"{got}\""));
    }
    Ok(response.clone())
}

/// `response.patch` as Go decodes a `[]byte`: a base64 string, or an array of
/// byte values (what kube-rs's `AdmissionResponse` sends).
pub(super) fn patch_bytes(patch: &Value) -> Result<Vec<u8>, String> {
    match patch {
        Value::String(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("illegal base64 data in response.patch: {e}")),
        Value::Array(items) => items
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| "response.patch holds a value that is not a byte".to_owned()),
        other => Err(format!(
            "cannot unmarshal {} into response.patch of type []byte",
            go_json_type(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_patch_is_read_as_go_reads_a_byte_slice() {
        assert_eq!(patch_bytes(&json!("W10=")), Ok(b"[]".to_vec()));
        assert_eq!(patch_bytes(&json!([91, 93])), Ok(b"[]".to_vec()));
        assert!(patch_bytes(&json!([256])).is_err());
        assert!(patch_bytes(&json!({})).is_err());
    }
}
