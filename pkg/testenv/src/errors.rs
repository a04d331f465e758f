//! The errors the server answers with: failure `Status` bodies shaped exactly as
//! kube-apiserver sends them, and the field errors of its validation.

use std::fmt;

use serde_json::{Map, Value, json};

/// One `details.causes` entry of a `Status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCause {
    /// Machine-readable cause, e.g. `FieldValueRequired`.
    pub reason: String,
    /// Human-readable description.
    pub message: String,
    /// The field the cause is about, e.g. `metadata.name`.
    pub field: String,
}

/// A failure `Status` (`kind: Status`, `apiVersion: v1`, `status: Failure`).
///
/// Every error the server answers with is one of these, and reactors answer with
/// them too. `details.kind` holds the *resource* (plural), as kube-apiserver does.
/// Its fields ([`StatusFields`]) are read and set through it (`status.code`).
///
/// The fields live behind one allocation: nearly every function of the server
/// returns `Result<_, ErrorStatus>`, and a pointer-sized error keeps each of
/// those results small on the success path, which is the common one.
#[derive(Clone, PartialEq, Eq)]
pub struct ErrorStatus {
    fields: Box<StatusFields>,
}

/// The fields of an [`ErrorStatus`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatusFields {
    /// HTTP status code, repeated in the body's `code`.
    pub code: u16,
    /// `reason`, e.g. `NotFound`, `Conflict`, `Invalid`.
    pub reason: String,
    /// `message`. Empty in a reactor response means "fill it from the request".
    pub message: String,
    /// `details.name`.
    pub name: String,
    /// `details.group`.
    pub group: String,
    /// `details.kind` (the resource plural for storage errors, the kind for `Invalid`).
    pub kind: String,
    /// `details.causes`.
    pub causes: Vec<StatusCause>,
    /// `details.retryAfterSeconds`.
    pub retry_after_seconds: Option<u32>,
    /// Errors built by apimachinery's `NewGenericServerResponse` always carry a
    /// `details` object, `{}` when every field is empty.
    empty_details: bool,
}

impl std::ops::Deref for ErrorStatus {
    type Target = StatusFields;

    fn deref(&self) -> &StatusFields {
        &self.fields
    }
}

impl std::ops::DerefMut for ErrorStatus {
    fn deref_mut(&mut self) -> &mut StatusFields {
        &mut self.fields
    }
}

impl fmt::Debug for ErrorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fields.fmt(f)
    }
}

impl ErrorStatus {
    /// Any status: `ErrorStatus::new(429, "TooManyRequests", "slow down")`.
    pub fn new(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            fields: Box::new(StatusFields {
                code,
                reason: reason.into(),
                message: message.into(),
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                causes: Vec::new(),
                retry_after_seconds: None,
                empty_details: false,
            }),
        }
    }

    /// Sets `details.name`, `details.group` and `details.kind`.
    #[must_use]
    pub fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        group.clone_into(&mut self.group);
        kind.clone_into(&mut self.kind);
        name.clone_into(&mut self.name);
        self
    }

    /// Adds a `details.causes` entry.
    #[must_use]
    pub fn with_cause(mut self, reason: &str, message: &str, field: &str) -> Self {
        self.causes.push(StatusCause {
            reason: reason.to_owned(),
            message: message.to_owned(),
            field: field.to_owned(),
        });
        self
    }

    /// `409 Conflict` as an optimistic-concurrency failure. In a reactor, the message and
    /// details are filled from the request (`Operation cannot be fulfilled on ...`).
    pub fn conflict() -> Self {
        Self::new(409, "Conflict", "")
    }

    /// `500 InternalError` with kube-apiserver's `Internal error occurred: <msg>` text.
    pub fn internal(msg: impl fmt::Display) -> Self {
        let msg = msg.to_string();
        Self::new(500, "InternalError", format!("Internal error occurred: {msg}")).with_cause("", &msg, "")
    }

    /// `400 BadRequest`.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg)
    }

    /// `403 Forbidden`.
    pub fn forbidden(msg: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", msg)
    }

    /// `503 ServiceUnavailable`.
    pub fn service_unavailable(msg: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", msg)
    }

    /// `429 TooManyRequests`.
    pub fn too_many_requests(msg: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", msg)
    }

    /// `404 NotFound` for `<resource> "<name>" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// `409 AlreadyExists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// `409 Conflict` with kube-apiserver's message, e.g. for a stale `resourceVersion`.
    pub fn conflict_on(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// The optimistic-lock `Conflict`.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict_on(group, resource, name, OPTIMISTIC_LOCK)
    }

    /// `422 Invalid`: `<Kind>[.<group>] "<name>" is invalid: <causes>`. Every cause is
    /// listed in `details.causes`; the message names each distinct one once, as
    /// apimachinery's `ErrorList.ToAggregate` does.
    pub(crate) fn invalid(group: &str, kind: &str, name: &str, causes: Vec<FieldError>) -> Self {
        let mut list: Vec<String> = Vec::new();
        for text in causes.iter().map(FieldError::to_string) {
            if !list.contains(&text) {
                list.push(text);
            }
        }
        let joined = if list.len() == 1 {
            list.join("")
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut status = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {joined}", qualified(group, kind)),
        )
        .with_details(group, kind, name);
        status.causes = causes
            .into_iter()
            .map(|c| StatusCause {
                reason: c.kind.reason().to_owned(),
                message: c.message_without_field(),
                field: c.field,
            })
            .collect();
        status
    }

    /// `410 Expired`, as the watch cache answers a too-old `resourceVersion`.
    pub fn expired(msg: impl Into<String>) -> Self {
        Self::new(410, "Expired", msg)
    }

    /// `405 MethodNotAllowed`.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// `415 UnsupportedMediaType`.
    pub fn unsupported_media_type(msg: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", msg)
    }

    /// `404` for a path the server does not serve.
    pub fn unknown_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// `422` for a patch that cannot be applied: apimachinery's `NewGenericServerResponse`
    /// with no resource, name or causes, so the patch library's own message is not sent.
    pub(crate) fn unprocessable() -> Self {
        let mut s = Self::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        );
        s.empty_details = true;
        s
    }

    /// Fills an empty message and details from the request a reactor matched.
    pub(crate) fn fill_for(mut self, verb: &str, group: &str, resource: &str, name: &str) -> Self {
        if self.message.is_empty() {
            self.message = match self.reason.as_str() {
                "Conflict" => format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {OPTIMISTIC_LOCK}",
                    qualified(group, resource)
                ),
                "NotFound" => format!("{} \"{name}\" not found", qualified(group, resource)),
                "AlreadyExists" => {
                    format!("{} \"{name}\" already exists", qualified(group, resource))
                }
                _ => format!("inducing failure for {verb} {resource}"),
            };
        }
        if self.kind.is_empty() && self.group.is_empty() && self.name.is_empty() {
            self = self.with_details(group, resource, name);
        }
        self
    }

    /// The JSON body.
    pub fn to_json(&self) -> Value {
        let mut details = Map::new();
        if !self.name.is_empty() {
            details.insert("name".into(), json!(self.name));
        }
        if !self.group.is_empty() {
            details.insert("group".into(), json!(self.group));
        }
        if !self.kind.is_empty() {
            details.insert("kind".into(), json!(self.kind));
        }
        if !self.causes.is_empty() {
            let causes = self
                .causes
                .iter()
                .map(|c| {
                    let mut m = Map::new();
                    if !c.reason.is_empty() {
                        m.insert("reason".into(), json!(c.reason));
                    }
                    if !c.message.is_empty() {
                        m.insert("message".into(), json!(c.message));
                    }
                    if !c.field.is_empty() {
                        m.insert("field".into(), json!(c.field));
                    }
                    Value::Object(m)
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(s) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty()
            && let Some(m) = body.as_object_mut()
        {
            m.remove("reason");
        }
        if !details.is_empty() || self.empty_details {
            body["details"] = Value::Object(details);
        }
        body
    }

    /// Parses a `Status` body back, e.g. from a watch `ERROR` event.
    pub fn from_json(v: &Value) -> Option<Self> {
        if v.get("kind")?.as_str()? != "Status" {
            return None;
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let d = |k: &str| {
            v.pointer(&format!("/details/{k}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Some(Self {
            fields: Box::new(StatusFields {
                code: v
                    .get("code")
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(500),
                reason: s("reason"),
                message: s("message"),
                name: d("name"),
                group: d("group"),
                kind: d("kind"),
                causes: Vec::new(),
                retry_after_seconds: None,
                empty_details: v
                    .get("details")
                    .is_some_and(|d| d.as_object().is_some_and(Map::is_empty)),
            }),
        })
    }
}

impl fmt::Display for ErrorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} {})", self.message, self.code, self.reason)
    }
}

impl std::error::Error for ErrorStatus {}

pub(crate) const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// `resource` or `resource.group`, as kube-apiserver's `GroupResource.String()`.
pub(crate) fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

/// The kind of a field validation error (k8s.io/apimachinery `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldErrorKind {
    Required,
    Invalid,
    TypeInvalid,
    Forbidden,
    NotSupported,
    TooLong,
    TooMany,
    Duplicate,
}

impl FieldErrorKind {
    fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::Forbidden => "FieldValueForbidden",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Duplicate => "FieldValueDuplicate",
        }
    }
}

/// One field validation error, rendered as apimachinery's `field.Error`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FieldError {
    pub(crate) kind: FieldErrorKind,
    pub(crate) field: String,
    pub(crate) value: Option<Value>,
    /// The value as Go's `%#v` prints it, when that is not JSON-like.
    pub(crate) raw: Option<String>,
    pub(crate) detail: String,
}

impl FieldError {
    pub(crate) fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Required,
            field: field.into(),
            value: None,
            raw: None,
            detail: detail.into(),
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value: Some(value),
            raw: None,
            detail: detail.into(),
        }
    }

    /// An invalid value printed verbatim (`0x0`, `map[string]string{...}`).
    pub(crate) fn invalid_raw(
        field: impl Into<String>,
        raw: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value: None,
            raw: Some(raw.into()),
            detail: detail.into(),
        }
    }

    pub(crate) fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Forbidden,
            field: field.into(),
            value: None,
            raw: None,
            detail: detail.into(),
        }
    }

    pub(crate) fn not_supported(field: impl Into<String>, value: Value, allowed: &[String]) -> Self {
        let quoted = allowed
            .iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ");
        Self {
            kind: FieldErrorKind::NotSupported,
            field: field.into(),
            value: Some(value),
            raw: None,
            detail: format!("supported values: {quoted}"),
        }
    }

    pub(crate) fn with_kind(mut self, kind: FieldErrorKind) -> Self {
        self.kind = kind;
        self
    }

    fn type_text(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Duplicate => "Duplicate value",
        }
    }

    fn message_without_field(&self) -> String {
        let mut s = self.type_text().to_owned();
        // apimachinery leaves the value out of these error types.
        let shows_value = !matches!(
            self.kind,
            FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong
        );
        if shows_value {
            if let Some(raw) = &self.raw {
                s.push_str(": ");
                s.push_str(raw);
            } else if let Some(v) = &self.value {
                s.push_str(": ");
                s.push_str(&render_value(v));
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message_without_field())
    }
}

/// Renders a value as apimachinery does in field errors (`"text"`, `5`, `true`, `null`).
fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        Value::Object(_) => "\"object\"".to_owned(),
        Value::Array(_) => "\"array\"".to_owned(),
        other => other.to_string(),
    }
}
