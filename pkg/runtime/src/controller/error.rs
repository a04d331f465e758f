//! What a reconcile returns when it did not simply succeed, and how the
//! controller reacts to it.

use crate::apis::go_quote;
use crate::events::Event;
use std::error::Error as StdError;
use std::fmt;

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// The error a [`Reconciler`](super::Reconciler) returns.
///
/// Any error converts into it with `?` (it wraps the error as a transient
/// failure). The constructors make the other failures Knative's controllers know
/// about, and the controller treats each as Knative's `handleErr` does. An
/// `Err` is always a failure: to come back later, a reconcile returns
/// `Ok` with a requeue ([`Action::requeue_after`](super::Action::requeue_after),
/// or `Reconciled::requeue_after` from a typed reconciler), which no log, event
/// or error metric counts as a failure.
///
/// | made by | the controller |
/// |---|---|
/// | `?`, [`Error::new`] | logs "Reconcile error" and retries with per-key backoff |
/// | an API conflict (409) wrapped by `?` | retries with backoff, logging at debug only ([`is_conflict`](Self::is_conflict)) |
/// | [`Error::permanent`] | logs "Reconcile error" and forgets the key until the next change |
/// | [`Error::skip_key`] | forgets the key quietly (a replica that is not the leader, say) |
///
/// Like `anyhow::Error` it is not itself a [`std::error::Error`] (that is what
/// lets every error convert into it); [`source`](Self::source) gives the wrapped
/// error, and `{:#}` prints it with its chain of causes.
///
/// ```
/// use kinject_runtime::controller::Error;
///
/// fn parse(n: &str) -> Result<u32, Error> {
///     Ok(n.parse::<u32>()?) // any error converts
/// }
/// assert!(parse("x").is_err());
///
/// assert_eq!(Error::skip_key("ns/rut").to_string(), r#"skipped key: "ns/rut""#);
/// assert!(Error::permanent("bad spec").is_permanent());
/// ```
pub struct Error {
    kind: Kind,
    /// An event to record about the object before the error goes back to the
    /// queue (Knative's wrapped `ReconcilerEvent`).
    event: Option<Box<Event>>,
}

enum Kind {
    Transient(BoxError),
    Permanent(BoxError),
    SkipKey(String),
}

impl Error {
    /// A transient failure: the key is retried with per-key exponential backoff.
    /// The same as converting `err` with `?` or `into()`.
    pub fn new(err: impl Into<BoxError>) -> Self {
        Error {
            kind: Kind::Transient(err.into()),
            event: None,
        }
    }

    /// A failure that retrying cannot fix (an invalid spec, say): the controller
    /// logs it and forgets the key until the object changes again (Knative's
    /// `NewPermanentError`).
    ///
    /// Making a skip permanent leaves it a skip, as wrapping one in Go's
    /// `permanentError` does.
    pub fn permanent(err: impl Into<Error>) -> Self {
        let err = err.into();
        match err.kind {
            Kind::Transient(e) | Kind::Permanent(e) => Error {
                kind: Kind::Permanent(e),
                event: err.event,
            },
            kind => Error {
                kind,
                event: err.event,
            },
        }
    }

    /// The reconciler chose not to process `key` (it is not the leader for it,
    /// say): the key is forgotten without an error log (Knative's `NewSkipKey`).
    pub fn skip_key(key: impl Into<String>) -> Self {
        Error {
            kind: Kind::SkipKey(key.into()),
            event: None,
        }
    }

    /// Attaches an event to record about the object: the reconciler records it
    /// and still hands the error to the queue (Knative's event wrapped with `%w`).
    pub fn with_event(mut self, event: Event) -> Self {
        self.event = Some(Box::new(event));
        self
    }

    /// The attached event, if any.
    pub fn event(&self) -> Option<&Event> {
        self.event.as_deref()
    }

    /// Prefixes the message with `context` (`failed to create pod: <cause>`),
    /// keeping the kind, the attached event and the cause chain (so a wrapped
    /// conflict is still a conflict), as Go's `fmt.Errorf("...: %w", err)` does.
    pub fn context(self, context: impl fmt::Display) -> Self {
        let wrap = |e: BoxError| -> BoxError {
            Box::new(Contextual {
                context: context.to_string(),
                source: e,
            })
        };
        let kind = match self.kind {
            Kind::Transient(e) => Kind::Transient(wrap(e)),
            Kind::Permanent(e) => Kind::Permanent(wrap(e)),
            other => other,
        };
        Error {
            kind,
            event: self.event,
        }
    }

    /// True for an error made by [`skip_key`](Self::skip_key).
    pub fn is_skip_key(&self) -> bool {
        matches!(self.kind, Kind::SkipKey(_))
    }

    /// True for an error made by [`permanent`](Self::permanent).
    pub fn is_permanent(&self) -> bool {
        matches!(self.kind, Kind::Permanent(_))
    }

    /// True when the wrapped error, or any error in its chain of causes, is an
    /// API `Conflict`: a write lost a race on `resourceVersion`. Such failures are
    /// expected and retried without an error log.
    ///
    /// The rule is apimachinery's `IsConflict`: the status reason is `Conflict`, or
    /// the code is 409 and the reason is not one of the other well-known reasons
    /// (so a 409 `AlreadyExists` is not a conflict).
    pub fn is_conflict(&self) -> bool {
        let mut next: Option<&(dyn StdError + 'static)> = match &self.kind {
            Kind::Transient(e) | Kind::Permanent(e) => Some(e.as_ref()),
            Kind::SkipKey(_) => None,
        };
        while let Some(err) = next {
            if let Some(status) = api_status(err)
                && status_is_conflict(status)
            {
                return true;
            }
            next = err.source();
        }
        false
    }

    /// The wrapped error of a transient or permanent failure; `None` for a skip.
    pub fn source(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match &self.kind {
            Kind::Transient(e) | Kind::Permanent(e) => Some(e.as_ref()),
            Kind::SkipKey(_) => None,
        }
    }

    /// Takes the wrapped error out; `None` for a skip.
    pub fn into_source(self) -> Option<BoxError> {
        match self.kind {
            Kind::Transient(e) | Kind::Permanent(e) => Some(e),
            Kind::SkipKey(_) => None,
        }
    }
}

impl<E: Into<BoxError>> From<E> for Error {
    fn from(err: E) -> Self {
        Error::new(err)
    }
}

impl fmt::Display for Error {
    /// The wrapped error's message, or Knative's text for a skip.
    /// The alternate form (`{:#}`) appends the chain of causes, `: `-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::SkipKey(key) => write!(f, "skipped key: {}", go_quote(key)),
            Kind::Transient(e) | Kind::Permanent(e) => {
                write!(f, "{}", message_of(e.as_ref()))?;
                if f.alternate() {
                    let mut next = e.source();
                    while let Some(cause) = next {
                        write!(f, ": {cause}")?;
                        next = cause.source();
                    }
                }
                Ok(())
            }
        }
    }
}

/// A cause with a prefix; made by [`Error::context`].
#[derive(Debug)]
struct Contextual {
    context: String,
    source: BoxError,
}

impl fmt::Display for Contextual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, message_of(self.source.as_ref()))
    }
}

impl StdError for Contextual {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.source.as_ref())
    }
}

/// An error's message, printing API errors as the API server worded them (what
/// client-go's errors print: `inducing failure for create pods`) rather than
/// kube's debug-flavoured form.
fn message_of(err: &(dyn StdError + 'static)) -> String {
    match api_status(err) {
        Some(status) if !status.message.is_empty() => status.message.clone(),
        _ => err.to_string(),
    }
}

/// Adds [`Error::context`] to results.
///
/// ```
/// use kinject_runtime::controller::{Error, ResultExt};
/// let failed: Result<(), std::io::Error> = Err(std::io::Error::other("disk full"));
/// let err = failed.context("failed to save").unwrap_err();
/// assert_eq!(err.to_string(), "failed to save: disk full");
/// ```
pub trait ResultExt<T> {
    /// Converts the error into an [`Error`] with `context` in front of its message.
    fn context(self, context: impl fmt::Display) -> Result<T, Error>;
}

impl<T, E: Into<Error>> ResultExt<T> for Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T, Error> {
        self.map_err(|e| e.into().context(context))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Transient(e) => f.debug_tuple("Transient").field(e).finish(),
            Kind::Permanent(e) => f.debug_tuple("Permanent").field(e).finish(),
            Kind::SkipKey(key) => f.debug_tuple("SkipKey").field(key).finish(),
        }
    }
}

/// The API status carried by `err`, if it is one of kube's API errors.
fn api_status<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a kube::core::Status> {
    if let Some(kube::Error::Api(status)) = err.downcast_ref::<kube::Error>() {
        return Some(status);
    }
    if let Some(status) = err.downcast_ref::<kube::core::Status>() {
        return Some(status);
    }
    err.downcast_ref::<Box<kube::core::Status>>().map(AsRef::as_ref)
}

/// Status reasons apimachinery knows; a 409 with any other reason is a conflict.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

fn status_is_conflict(status: &kube::core::Status) -> bool {
    status.reason == "Conflict" || (status.code == 409 && !KNOWN_REASONS.contains(&status.reason.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: reason.to_owned(),
            message: "the object has been modified".to_owned(),
            ..kube::core::Status::default()
        }))
    }

    #[derive(Debug, thiserror::Error)]
    #[error("updating status")]
    struct Wrapper(#[source] kube::Error);

    #[test]
    fn messages_match_knative() {
        assert_eq!(Error::skip_key("ns/rut").to_string(), r#"skipped key: "ns/rut""#);
        assert_eq!(Error::new("boom").to_string(), "boom");
        assert_eq!(Error::permanent("bad").to_string(), "bad");
    }

    #[test]
    fn predicates() {
        let transient = Error::from("boom");
        assert!(!transient.is_permanent() && !transient.is_skip_key());
        assert!(Error::permanent("bad").is_permanent());
        assert!(Error::permanent(Error::new("bad")).is_permanent());
        assert!(Error::skip_key("k").is_skip_key());
        // Wrapping a skip as permanent keeps it a skip, as in Go.
        assert!(Error::permanent(Error::skip_key("k")).is_skip_key());
    }

    #[test]
    fn conflicts_are_found_in_the_chain() {
        assert!(Error::from(api_error(409, "Conflict")).is_conflict());
        assert!(Error::from(api_error(409, "")).is_conflict());
        assert!(!Error::from(api_error(409, "AlreadyExists")).is_conflict());
        assert!(!Error::from(api_error(404, "NotFound")).is_conflict());
        assert!(Error::from(Wrapper(api_error(409, "Conflict"))).is_conflict());
        assert!(Error::permanent(api_error(409, "Conflict")).is_conflict());
        assert!(!Error::from("409").is_conflict());
        assert!(!Error::skip_key("k").is_conflict());
    }

    #[test]
    fn source_and_alternate_display() {
        let err = Error::from(Wrapper(api_error(409, "Conflict")));
        assert_eq!(
            err.source().map(ToString::to_string).as_deref(),
            Some("updating status")
        );
        assert!(format!("{err:#}").starts_with("updating status: ApiError: the object has been modified"));
        assert!(Error::skip_key("k").source().is_none());
        assert!(Error::new("x").into_source().is_some());
        assert_eq!(format!("{:?}", Error::skip_key("k")), r#"SkipKey("k")"#);
    }
}
