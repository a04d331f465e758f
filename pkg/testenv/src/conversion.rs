//! Conversion between the versions of a CRD that converts through a webhook
//! (`spec.conversion.strategy: Webhook`), as kube-apiserver converts: objects
//! are stored in the storage version, and every read, list, watch event and
//! write in another version is converted.
//!
//! Two kinds of converter do it:
//!
//! - a [`Converter`] registered for the CRD
//!   ([`Builder::converter`](crate::Builder::converter)), called in process
//!   and synchronously. The framework's harnesses register one built from
//!   the kinds' own conversions, which is what the webhook would answer;
//! - otherwise the CRD's own webhook (`spec.conversion.webhook.clientConfig`),
//!   called over HTTPS as kube-apiserver calls it ([`WebhookConverter`]).
//!
//! The registry converts under its lock, where no call can wait on the
//! network. So a request on a resource converted by its webhook runs in a
//! [`Conversions`] scope: a conversion the webhook has not answered yet is
//! noted and the request fails; the HTTP layer then asks the webhook for
//! every noted conversion at once (a list is one review) and runs the request
//! again, now answered from the scope. A run that stored something is never
//! run again. The answer for an object depends only on what the webhook may
//! change: everything but `metadata`, and its labels and annotations, as
//! kube-apiserver restores the rest of the metadata from the input.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

/// Converts objects of one CRD between its versions.
pub trait Converter: Send + Sync + Debug {
    /// `object`, of any version of the kind, in `api_version`
    /// (`group/version`), or why it does not convert.
    ///
    /// # Errors
    ///
    /// What the conversion refused, as the webhook would answer it in its
    /// `result.message`.
    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String>;
}

/// What kube-apiserver's message says when a conversion failed: the object's
/// `apiVersion` and kind, and the reason.
pub(crate) fn failure(object: &Value, reason: &str) -> String {
    let text = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    format!(
        "conversion webhook for {}, Kind={} failed: {reason}",
        text("apiVersion"),
        text("kind")
    )
}

/// A CRD's `spec.conversion.webhook`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConversionWebhook {
    /// `clientConfig`: `url` or `service`, and `caBundle`.
    pub(crate) client: Value,
    /// The `ConversionReview` version to send: the first of
    /// `conversionReviewVersions` that kube-apiserver speaks.
    pub(crate) review_version: Option<&'static str>,
}

impl ConversionWebhook {
    pub(crate) fn of(crd: &Value) -> Self {
        let review_version = crd
            .pointer("/spec/conversion/webhook/conversionReviewVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|v| match v.as_str() {
                Some("v1") => Some("v1"),
                Some("v1beta1") => Some("v1beta1"),
                _ => None,
            });
        Self {
            client: crd
                .pointer("/spec/conversion/webhook/clientConfig")
                .cloned()
                .unwrap_or(Value::Null),
            review_version,
        }
    }
}

/// The converter of a CRD that converts through its webhook and has no
/// converter registered.
#[derive(Debug)]
pub(crate) struct WebhookConverter(pub(crate) ConversionWebhook);

/// What `convert` answers for a conversion the webhook has not answered
/// yet in this scope.
pub(crate) const NOT_YET_ASKED: &str = "the conversion webhook has not been asked yet";

impl Converter for WebhookConverter {
    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String> {
        let scope = SCOPE.try_with(Arc::clone).map_err(|_| {
            "testenv calls a conversion webhook only while it serves an API request".to_owned()
        })?;
        let mut conversions = scope.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (api_version.to_owned(), answer_key(object));
        match conversions.answers.get(&key) {
            Some(Ok(converted)) => Ok(restore_metadata(object, converted)),
            Some(Err(message)) => {
                let message = message.clone();
                conversions.failure.get_or_insert_with(|| message.clone());
                Err(message)
            }
            None => {
                conversions.asked.push(Asked {
                    webhook: self.0.clone(),
                    to: api_version.to_owned(),
                    object: object.clone(),
                });
                Err(NOT_YET_ASKED.to_owned())
            }
        }
    }
}

/// The part of an object a conversion webhook may change, as text: written
/// from the object as it is, since a list asks for thousands.
fn answer_key(object: &Value) -> String {
    serde_json::to_string(&KeyView(object)).unwrap_or_default()
}

/// An object without the metadata a conversion cannot change.
struct KeyView<'a>(&'a Value);

impl serde::Serialize for KeyView<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let Value::Object(fields) = self.0 else {
            return self.0.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (name, value) in fields {
            match (name.as_str(), value) {
                ("metadata", Value::Object(meta)) => {
                    let kept: serde_json::Map<String, Value> = ["labels", "annotations"]
                        .into_iter()
                        .filter_map(|k| meta.get(k).map(|v| (k.to_owned(), v.clone())))
                        .collect();
                    map.serialize_entry(name, &kept)?;
                }
                _ => map.serialize_entry(name, value)?,
            }
        }
        map.end()
    }
}

/// The webhook's answer with the input's metadata, but for the labels and
/// annotations the webhook answered (kube-apiserver's `restoreObjectMeta`).
fn restore_metadata(input: &Value, converted: &Value) -> Value {
    let mut out = converted.clone();
    let mut meta = input.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        for field in ["labels", "annotations"] {
            match converted.pointer(&format!("/metadata/{field}")) {
                Some(v) if !v.is_null() => {
                    m.insert(field.to_owned(), v.clone());
                }
                _ => {
                    m.remove(field);
                }
            }
        }
    }
    out["metadata"] = meta;
    out
}

/// A conversion the webhook is to be asked for.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub(crate) webhook: ConversionWebhook,
    pub(crate) to: String,
    pub(crate) object: Value,
}

/// The conversions of one request: the webhook's answers so far, what is
/// still to ask, and whether the request stored anything.
#[derive(Debug, Default)]
pub(crate) struct Conversions {
    answers: HashMap<(String, String), Result<Value, String>>,
    asked: Vec<Asked>,
    /// The first failed conversion the request met, as kube-apiserver words it.
    failure: Option<String>,
    stored: bool,
}

pub(crate) type Scope = Arc<Mutex<Conversions>>;

tokio::task_local! {
    static SCOPE: Scope;
}

impl Conversions {
    /// A new scope for one request.
    pub(crate) fn scope() -> Scope {
        Arc::default()
    }

    /// The scope the running request answers from, if it has one.
    pub(crate) fn current() -> Option<Scope> {
        SCOPE.try_with(Arc::clone).ok()
    }

    /// Runs `f` with `scope` as the conversions it answers from.
    pub(crate) async fn run<F: Future>(scope: &Scope, f: F) -> F::Output {
        SCOPE.scope(Arc::clone(scope), f).await
    }

    /// The conversions asked for in the last run, taken.
    pub(crate) fn take_asked(&mut self) -> Vec<Asked> {
        std::mem::take(&mut self.asked)
    }

    /// Records the webhook's answer: converted, or kube-apiserver's message
    /// for why not.
    pub(crate) fn answer(&mut self, asked: &Asked, answer: Result<Value, String>) {
        self.answers
            .insert((asked.to.clone(), answer_key(&asked.object)), answer);
    }

    /// Forgets the answers, so that a long watch keeps none it no longer needs.
    pub(crate) fn forget(&mut self) {
        self.answers.clear();
        self.failure = None;
    }

    pub(crate) fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    pub(crate) fn stored(&self) -> bool {
        self.stored
    }
}

/// Notes that the request in whose scope this runs stored an object, so
/// that it is not run again.
pub(crate) fn note_stored() {
    let _ = SCOPE.try_with(|scope| scope.lock().unwrap_or_else(PoisonError::into_inner).stored = true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_keeps_the_inputs_metadata_but_the_webhooks_labels_and_annotations() {
        let input = json!({"apiVersion": "g/v1", "kind": "W",
            "metadata": {"name": "w", "uid": "u", "resourceVersion": "7", "labels": {"a": "1"}},
            "spec": {"x": 1}});
        let converted = json!({"apiVersion": "g/v2", "kind": "W",
            "metadata": {"name": "other", "annotations": {"b": "2"}}, "spec": {"y": 1}});
        assert_eq!(
            restore_metadata(&input, &converted),
            json!({"apiVersion": "g/v2", "kind": "W",
                "metadata": {"name": "w", "uid": "u", "resourceVersion": "7", "annotations": {"b": "2"}},
                "spec": {"y": 1}})
        );
    }

    #[test]
    fn the_key_of_an_answer_leaves_out_what_a_conversion_cannot_change() {
        let object = json!({"kind": "W", "metadata": {"name": "w", "resourceVersion": "7",
            "labels": {"a": "1"}}, "spec": {"x": 1}});
        assert_eq!(
            answer_key(&object),
            r#"{"kind":"W","metadata":{"labels":{"a":"1"}},"spec":{"x":1}}"#
        );
    }

    #[test]
    fn an_answer_serves_the_same_object_at_another_revision() {
        let scope = Conversions::scope();
        let webhook = WebhookConverter(ConversionWebhook::of(&json!({})));
        let object = json!({"apiVersion": "g/v1", "kind": "W",
            "metadata": {"name": "w", "resourceVersion": "1"}, "spec": {"x": 1}});
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(Conversions::run(&scope, async {
            assert_eq!(webhook.convert(&object, "g/v2"), Err(NOT_YET_ASKED.to_owned()));
        }));
        let asked = scope.lock().unwrap().take_asked();
        assert_eq!(asked.len(), 1);
        scope.lock().unwrap().answer(
            &asked[0],
            Ok(json!({"apiVersion": "g/v2", "kind": "W", "metadata": {}, "spec": {"y": 1}})),
        );
        let mut later = object.clone();
        later["metadata"]["resourceVersion"] = json!("2");
        runtime.block_on(Conversions::run(&scope, async {
            let converted = webhook.convert(&later, "g/v2").unwrap();
            assert_eq!(converted["spec"], json!({"y": 1}));
            assert_eq!(converted["metadata"]["resourceVersion"], json!("2"));
        }));
        assert!(scope.lock().unwrap().take_asked().is_empty());
    }

    #[test]
    fn outside_a_request_the_webhook_is_not_called() {
        let webhook = WebhookConverter(ConversionWebhook::of(&json!({})));
        let err = webhook.convert(&json!({}), "g/v2").unwrap_err();
        assert!(err.contains("only while it serves an API request"), "{err}");
    }
}
