//! The webhook's integration tests, one binary (linking is most of a test
//! step on two cores): its admission controllers on the sample kinds, the
//! webhook in-process behind HTTPS, and the `webhook` binary end to end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The webhook's three configurations in the sample's namespace, with the
/// resource each is: what it keeps pointed at itself and trusting its CA.
const CONFIGURATIONS: [(&str, &str); 3] = [
    (
        "mutatingwebhookconfigurations",
        "defaulting.webhook.knative-samples.knative.dev",
    ),
    (
        "validatingwebhookconfigurations",
        "validation.webhook.knative-samples.knative.dev",
    ),
    (
        "validatingwebhookconfigurations",
        "config.webhook.knative-samples.knative.dev",
    ),
];

mod admission;
mod e2e;
mod https;
