//! Asking a CRD's conversion webhook, as kube-apiserver asks it, for the
//! conversions a request needs (see [`crate::conversion`] for why a request
//! runs again once they are answered).

use std::time::Duration;

use serde_json::{Value, json};

use crate::conversion::{Asked, ConversionWebhook, Conversions, Scope};
use crate::errors::ErrorStatus;
use crate::test_env::ServiceRoute;

use super::reply::Reply;
use super::webhook_client::{self, CallError};

/// kube-apiserver's timeout for a conversion webhook.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A request needs at most a few rounds: its object into the storage
/// version, and back. More means the answers do not settle.
const MAX_ROUNDS: usize = 8;

/// Runs a request on a resource converted by its webhook until every
/// conversion it needs has been answered, and answers it; a conversion that
/// failed answers kube-apiserver's 500.
pub(super) async fn answered<F, Fut>(routes: &[ServiceRoute], mut request: F) -> Reply
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Reply>,
{
    let scope = Conversions::scope();
    for _ in 0..MAX_ROUNDS {
        let reply = Conversions::run(&scope, request()).await;
        let (asked, failure, stored) = {
            let mut conversions = lock(&scope);
            (
                conversions.take_asked(),
                conversions.failure().map(str::to_owned),
                conversions.stored(),
            )
        };
        if stored {
            // A write is never run twice. Its way back into the request's
            // version was asked before it stored, so this does not happen.
            if !asked.is_empty() {
                eprintln!(
                    "testenv: a request stored an object and then needed a conversion it had not asked for; its reply shows the object unconverted"
                );
            }
            return reply;
        }
        if asked.is_empty() {
            return match failure {
                Some(message) => Reply::error(&ErrorStatus::new(500, "", message)),
                None => reply,
            };
        }
        ask(&scope, routes, asked).await;
    }
    Reply::error(&ErrorStatus::internal(
        "testenv: the conversion webhook's answers did not settle the request",
    ))
}

/// Runs `step`, a part of a request that has no effect when a conversion
/// is missing (a dry run, a write that fails before it stores, a watch
/// rendering events), until the webhook has answered every conversion it
/// needs: the admission webhooks around it then run once, as kube-apiserver
/// runs them. Outside a conversion scope, or when nothing is missing, `step`
/// runs once.
pub(super) async fn settled<T>(routes: &[ServiceRoute], mut step: impl FnMut() -> T) -> T {
    let Some(scope) = Conversions::current() else {
        return step();
    };
    for _ in 0..MAX_ROUNDS {
        let out = step();
        let asked = {
            let mut conversions = lock(&scope);
            // A step that stored is done; the request's own loop reports
            // what it still lacked.
            if conversions.stored() {
                return out;
            }
            conversions.take_asked()
        };
        if asked.is_empty() {
            return out;
        }
        ask(&scope, routes, asked).await;
    }
    step()
}

fn lock(scope: &Scope) -> std::sync::MutexGuard<'_, Conversions> {
    scope.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Asks the webhook once per webhook and target version, with every object
/// bound there, and records the answers.
async fn ask(scope: &Scope, routes: &[ServiceRoute], asked: Vec<Asked>) {
    let mut reviews: Vec<(ConversionWebhook, String, Vec<Asked>)> = Vec::new();
    for one in asked {
        match reviews
            .iter_mut()
            .find(|(webhook, to, _)| *webhook == one.webhook && *to == one.to)
        {
            Some((_, _, objects)) => objects.push(one),
            None => reviews.push((one.webhook.clone(), one.to.clone(), vec![one])),
        }
    }
    for (webhook, to, objects) in reviews {
        let inputs: Vec<&Value> = objects.iter().map(|a| &a.object).collect();
        let answers = convert(&webhook, &to, &inputs, routes).await;
        let mut conversions = lock(scope);
        for (one, answer) in objects.iter().zip(answers) {
            conversions.answer(one, answer);
        }
    }
}

/// One `ConversionReview` of `objects` into `to`: each object converted, or
/// kube-apiserver's message for why not. A call that fails fails them all.
async fn convert(
    webhook: &ConversionWebhook,
    to: &str,
    objects: &[&Value],
    routes: &[ServiceRoute],
) -> Vec<Result<Value, String>> {
    let first = objects.first().copied().unwrap_or(&Value::Null);
    let gvk = format!(
        "{}, Kind={}",
        first
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        first.get("kind").and_then(Value::as_str).unwrap_or_default()
    );
    let all_failed =
        |why: String| vec![Err(format!("conversion webhook for {gvk} failed: {why}")); objects.len()];
    let Some(review_version) = webhook.review_version else {
        return all_failed("no supported conversion review versions".to_owned());
    };
    let uid = crate::names::random_uuid().to_string();
    let review = Review {
        kind: "ConversionReview",
        api_version: format!("apiextensions.k8s.io/{review_version}"),
        request: Request {
            uid: &uid,
            desired_api_version: to,
            objects,
        },
        response: json!({"uid": "", "convertedObjects": null, "result": {"metadata": {}}}),
    };
    let answer = match webhook_client::call(&webhook.client, TIMEOUT, routes, &review).await {
        Ok(answer) => answer,
        Err(CallError::Unreached(why) | CallError::Answered(why)) => return all_failed(why),
    };
    let converted = match converted_objects(answer, review_version, &uid) {
        Ok(converted) => converted,
        Err(why) => return all_failed(why),
    };
    if converted.len() != objects.len() {
        return vec![
            Err(format!(
                "conversion webhook for {gvk} returned {} objects, expected {}",
                converted.len(),
                objects.len()
            ));
            objects.len()
        ];
    }
    let in_list = objects.len() > 1;
    objects
        .iter()
        .zip(converted)
        .enumerate()
        .map(|(index, (input, output))| {
            check_converted(input, &output, to).map(|()| output).map_err(|why| {
                if in_list {
                    format!("conversion webhook for {gvk} returned invalid converted object at index {index}: {why}")
                } else {
                    format!("conversion webhook for {gvk} returned invalid object: {why}")
                }
            })
        })
        .collect()
}

/// The review kube-apiserver sends, written straight from the objects: a
/// list's review holds thousands. It carries an empty response, as
/// kube-apiserver's does.
#[derive(serde::Serialize)]
struct Review<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: String,
    request: Request<'a>,
    response: Value,
}

#[derive(serde::Serialize)]
struct Request<'a> {
    uid: &'a str,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: &'a str,
    objects: &'a [&'a Value],
}

/// The response's `convertedObjects`, checked as kube-apiserver checks a
/// review (a `v1beta1` one was never checked for its kind and uid).
fn converted_objects(mut answer: Value, review_version: &str, uid: &str) -> Result<Vec<Value>, String> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    if review_version == "v1" {
        let expected = "apiextensions.k8s.io/v1, Kind=ConversionReview";
        let got = format!("{}, Kind={}", text(&answer, "apiVersion"), text(&answer, "kind"));
        if got != expected {
            return Err(format!("expected webhook response of {expected}, got {got}"));
        }
    }
    let Some(response) = answer.get("response").filter(|r| !r.is_null()) else {
        return Err("no response provided".to_owned());
    };
    if review_version == "v1" && text(response, "uid") != uid {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            text(response, "uid")
        ));
    }
    let result = response.get("result").unwrap_or(&Value::Null);
    let status = text(result, "status");
    if status != "Success" {
        return Err(match text(result, "message") {
            message if !message.is_empty() => message,
            _ => format!("response.result.status was '{status}', not 'Success'"),
        });
    }
    match answer.pointer_mut("/response/convertedObjects").map(Value::take) {
        Some(Value::Array(objects)) => Ok(objects),
        _ => Ok(Vec::new()),
    }
}

/// What kube-apiserver requires of a converted object: the version asked
/// for, and the same kind, name, namespace and uid.
fn check_converted(input: &Value, output: &Value, to: &str) -> Result<(), String> {
    let text = |v: &Value, ptr: &str| {
        v.pointer(ptr)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    if !output.is_object() {
        return Err(format!("expected an object, got {output}"));
    }
    if text(output, "/apiVersion") != to {
        return Err(format!(
            "invalid groupVersion (expected {to}, received {})",
            text(output, "/apiVersion")
        ));
    }
    for (field, ptr) in [
        ("kind", "/kind"),
        ("name", "/metadata/name"),
        ("namespace", "/metadata/namespace"),
        ("UID", "/metadata/uid"),
    ] {
        let (expected, got) = (text(input, ptr), text(output, ptr));
        if expected != got {
            return Err(format!("must have the same {field}: {expected} != {got}"));
        }
    }
    match output.get("metadata") {
        Some(Value::Object(_)) => Ok(()),
        None => Err("missing metadata in converted object".to_owned()),
        Some(other) => Err(format!(
            "invalid metadata of type {} in converted object",
            crate::go_format::go_json_type(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_converted_object_must_keep_its_identity() {
        let input = json!({"apiVersion": "g/v1", "kind": "W", "metadata": {"name": "a", "namespace": "n", "uid": "u"}});
        let mut output = input.clone();
        output["apiVersion"] = json!("g/v2");
        assert_eq!(check_converted(&input, &output, "g/v2"), Ok(()));
        assert_eq!(
            check_converted(&input, &output, "g/v3"),
            Err("invalid groupVersion (expected g/v3, received g/v2)".to_owned())
        );
        output["metadata"]["name"] = json!("b");
        assert_eq!(
            check_converted(&input, &output, "g/v2"),
            Err("must have the same name: a != b".to_owned())
        );
    }

    #[test]
    fn a_response_is_checked_before_its_objects_are_read() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "1", "result": {"status": "Success"}, "convertedObjects": [{}]}});
        assert_eq!(converted_objects(ok.clone(), "v1", "1"), Ok(vec![json!({})]));
        assert_eq!(
            converted_objects(ok, "v1", "2"),
            Err("expected response.uid=\"2\", got \"1\"".to_owned())
        );
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "1", "result": {"status": "Failure", "message": "no"}}});
        assert_eq!(converted_objects(failed, "v1", "1"), Err("no".to_owned()));
        assert_eq!(
            converted_objects(json!({}), "v1beta1", "1"),
            Err("no response provided".to_owned())
        );
    }
}
