//! What the server answers, and how objects are rendered for the client's `Accept`.

use bytes::Bytes;
use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::registry::Registry;
use crate::registry::options::Written;
use crate::registry::resource::ResourceDef;

use super::table::{self, partial};

/// What to send back.
#[derive(Debug)]
pub(crate) enum Reply {
    Json {
        code: u16,
        body: Value,
        warnings: Vec<String>,
    },
    Text {
        code: u16,
        text: String,
    },
    /// A 200 JSON body with its own media type (aggregated discovery).
    JsonAs {
        content_type: &'static str,
        body: Value,
    },
    /// A 200 document already encoded (OpenAPI), with its content hash as `ETag`.
    Document {
        content_type: &'static str,
        body: Bytes,
        etag: String,
    },
    /// A watch: newline-delimited JSON events, streamed.
    Stream(super::watch_buffer::Receiver),
}

impl Reply {
    pub(crate) fn ok(body: Value) -> Self {
        Self::Json {
            code: 200,
            body,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn error(e: &ErrorStatus) -> Self {
        Self::Json {
            code: e.code,
            body: e.to_json(),
            warnings: Vec::new(),
        }
    }
}

/// How objects are rendered, from the `Accept` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    Full,
    Meta,
    Table,
}

impl Output {
    pub(crate) fn from_accept(accept: &str) -> Self {
        for media in accept.split(',') {
            let mut parts = media.split(';').map(str::trim);
            let base = parts.next().unwrap_or_default();
            let as_ = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| *k == "as")
                .map(|(_, v)| v);
            match as_ {
                Some("Table") => return Self::Table,
                Some("PartialObjectMetadata" | "PartialObjectMetadataList") => return Self::Meta,
                Some(_) => {}
                None if base.contains("json") || base == "*/*" => return Self::Full,
                None => {}
            }
        }
        Self::Full
    }

    /// One object in this output.
    pub(crate) fn object(self, def: &ResourceDef, obj: &Value) -> Value {
        match self {
            Self::Full => Registry::present(def, obj),
            Self::Meta => partial(obj),
            Self::Table => table::table(def, &[Registry::present(def, obj)], None),
        }
    }
}

pub(crate) fn written(w: Written, output: Output, def: &ResourceDef) -> Reply {
    Reply::Json {
        code: if w.created { 201 } else { 200 },
        body: output.object(def, &w.object),
        warnings: w.warnings,
    }
}
