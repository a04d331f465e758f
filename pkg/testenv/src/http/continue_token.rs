//! `continue` tokens, encoded and decoded as kube-apiserver's storage does, with Go's
//! errors for a garbled one.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::errors::ErrorStatus;
use crate::go_format::go_json_type;

/// A `continue` token, shaped as kube-apiserver's: unpadded URL-safe base64 of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<key below the list's prefix>\u0000"}`.
/// `rv` -1 continues at the latest revision.
pub(super) fn encode_continue(rv: i64, start: &str) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// Decodes a `continue` token as kube-apiserver's storage does, with its errors:
/// the revision (negative: the latest) and the key (below the list's prefix) to
/// start from, inclusive.
pub(super) fn decode_continue(token: &str) -> Result<(i64, String), ErrorStatus> {
    let bad = |why: String| {
        ErrorStatus::bad_request(format!("invalid continue token: continue key is not valid{why}"))
    };
    let raw = go_base64_raw_url(token).map_err(|e| bad(format!(": {e}")))?;
    let parsed: Value =
        serde_json::from_slice(&raw).map_err(|e| bad(format!(": {}", go_json_error(&raw, &e))))?;
    let Some(fields) = parsed.as_object() else {
        return Err(bad(format!(
            ": json: cannot unmarshal {} into Go value of type storage.continueToken",
            go_json_type(&parsed)
        )));
    };
    // encoding/json matches field names case-insensitively, preferring an exact match.
    let field = |name: &str| {
        fields.get(name).or_else(|| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    };
    let wrong = |name: &str, v: &Value, want: &str| {
        let what = match v {
            Value::Number(n) => format!("number {n}"),
            other => go_json_type(other).to_owned(),
        };
        bad(format!(
            ": json: cannot unmarshal {what} into Go struct field continueToken.{name} of type {want}"
        ))
    };
    let version = match field("v") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(wrong("v", other, "string")),
    };
    let rv = match field("rv") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(rv) => rv,
            None => return Err(wrong("rv", &Value::Number(n.clone()), "int64")),
        },
        Some(other) => return Err(wrong("rv", other, "int64")),
    };
    let start = match field("start") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(wrong("start", other, "string")),
    };
    if version != "meta.k8s.io/v1" {
        return Err(bad(format!(
            ": server does not recognize this encoded version {version}"
        )));
    }
    if rv == 0 {
        return Err(bad(
            ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
        ));
    }
    if start.is_empty() {
        return Err(bad(": encoded start key empty (version meta.k8s.io/v1)".into()));
    }
    // No climbing out of the list's prefix: the key must already be a clean path.
    let rooted = if start.starts_with('/') {
        start.to_owned()
    } else {
        format!("/{start}")
    };
    if clean_path(&rooted) != rooted {
        return Err(bad(format!(": {start}")));
    }
    Ok((rv, rooted[1..].to_owned()))
}

/// Go's `path.Clean` for a rooted path.
fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Go's `base64.RawURLEncoding.DecodeString`, errors included (it skips CR and LF and
/// ignores the unused bits of the last character).
fn go_base64_raw_url(s: &str) -> Result<Vec<u8>, String> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    };
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3 + 2);
    let mut quad = [0u8; 4];
    let mut n = 0;
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'\r' || c == b'\n' {
            continue;
        }
        let Some(v) = value(c) else {
            return Err(format!("illegal base64 data at input byte {i}"));
        };
        quad[n] = v;
        n += 1;
        if n == 4 {
            out.extend([
                (quad[0] << 2) | (quad[1] >> 4),
                (quad[1] << 4) | (quad[2] >> 2),
                (quad[2] << 6) | quad[3],
            ]);
            n = 0;
        }
    }
    match n {
        1 => {
            return Err(format!(
                "illegal base64 data at input byte {}",
                bytes.len().saturating_sub(1)
            ));
        }
        2 => out.push((quad[0] << 2) | (quad[1] >> 4)),
        3 => out.extend([(quad[0] << 2) | (quad[1] >> 4), (quad[1] << 4) | (quad[2] >> 2)]),
        _ => {}
    }
    Ok(out)
}

/// A byte as encoding/json quotes it in errors (`strconv.Quote` of the byte as a rune).
fn go_quote_char(c: u8) -> String {
    let inner = match c {
        b'\'' => "\\'".to_owned(),
        b'"' => "\"".to_owned(),
        b'\\' => "\\\\".to_owned(),
        0x07 => "\\a".to_owned(),
        0x08 => "\\b".to_owned(),
        0x0c => "\\f".to_owned(),
        b'\n' => "\\n".to_owned(),
        b'\r' => "\\r".to_owned(),
        b'\t' => "\\t".to_owned(),
        0x0b => "\\v".to_owned(),
        0x00..=0x1f | 0x7f => format!("\\x{c:02x}"),
        0x80..=0xa0 | 0xad => format!("\\u{c:04x}"),
        _ => char::from(c).to_string(),
    };
    format!("'{inner}'")
}

/// encoding/json's wording of a syntax error, for the common cases.
fn go_json_error(raw: &[u8], e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".into();
    }
    // serde_json reports 1-based line and column of the offending character.
    let offset = raw
        .split_inclusive(|b| *b == b'\n')
        .take(e.line().saturating_sub(1))
        .map(<[u8]>::len)
        .sum::<usize>()
        + e.column().saturating_sub(1);
    let c = raw.get(offset).copied().unwrap_or_default();
    let msg = e.to_string();
    if msg.starts_with("expected ident") {
        // Inside `true`, `false` or `null`: say which letter was due.
        let begin = raw[..offset.min(raw.len())]
            .iter()
            .rposition(|b| !b.is_ascii_lowercase())
            .map_or(0, |p| p + 1);
        let literal = match raw.get(begin) {
            Some(b't') => "true",
            Some(b'f') => "false",
            _ => "null",
        };
        if let Some(due) = literal.as_bytes().get(offset - begin) {
            return format!(
                "invalid character {} in literal {literal} (expecting {})",
                go_quote_char(c),
                go_quote_char(*due)
            );
        }
    }
    let context = if msg.starts_with("expected `:`") {
        "after object key"
    } else if msg.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if msg.starts_with("expected `,` or `]`") {
        "after array element"
    } else if msg.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if msg.starts_with("trailing characters") {
        "after top-level value"
    } else if msg.starts_with("control character") {
        "in string literal"
    } else if msg.starts_with("invalid escape") {
        "in string escape code"
    } else {
        "looking for beginning of value"
    };
    let shown = go_quote_char(c);
    format!("invalid character {shown} {context}")
}
