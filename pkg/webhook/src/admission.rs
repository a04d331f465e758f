//! The three admission controllers, as pure functions from an
//! `AdmissionRequest` to an `AdmissionResponse` (Knative's
//! `resourcesemantics/defaulting`, `resourcesemantics/validation` and
//! `configmaps`), with Knative's messages word for word.
//!
//! ```
//! use kinject_webhook::admission::{Admit, Validation, review_response};
//! # use kinject_runtime::apis::registry::CustomKind;
//! let validation = Validation::new(Vec::<CustomKind>::new());
//! let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
//!     "uid":"1","kind":{"group":"samples.knative.dev","version":"v1alpha1","kind":"Unknown"},
//!     "resource":{"group":"samples.knative.dev","version":"v1alpha1","resource":"unknowns"},
//!     "operation":"CREATE","userInfo":{},"object":{"metadata":{"name":"x"}}}}"#;
//! let response = review_response(&validation, body).unwrap();
//! assert!(response.contains("decoding request failed: unhandled kind: samples.knative.dev/v1alpha1, Kind=Unknown"));
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_runtime::apis::DiagnosticLevel;
use kinject_runtime::apis::registry::CustomKind;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube_core::{DynamicResourceScope, GroupVersionKind, Resource, Status};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Knative's "this update edits the example" guard: the annotation holding
/// the checksum of `_example` as shipped.
pub const EXAMPLE_CHECKSUM_ANNOTATION: &str = "knative.dev/example-checksum";
/// The key of a ConfigMap that documents its settings, not sets them.
pub const EXAMPLE_KEY: &str = "_example";

/// An object of an AdmissionReview exactly as the API server sent it: the
/// JSON is kept whole (a JSON patch must be computed against it, and unknown
/// fields must be seen), with its metadata read for [`Resource`] when first
/// asked for: a review of an object with 200,000 labels would otherwise hold
/// them twice, and no built-in admission controller reads them that way.
#[derive(Clone, Debug, Default)]
pub struct RawObject {
    metadata: OnceLock<ObjectMeta>,
    json: Value,
}

impl RawObject {
    /// The object from its JSON.
    pub fn new(json: Value) -> Self {
        RawObject {
            metadata: OnceLock::new(),
            json,
        }
    }

    /// The JSON, as sent.
    pub fn json(&self) -> &Value {
        &self.json
    }
}

/// The metadata of an object's JSON, or empty metadata where it has none
/// that decodes.
fn metadata_of(json: &Value) -> ObjectMeta {
    json.get("metadata")
        .and_then(|m| ObjectMeta::deserialize(m).ok())
        .unwrap_or_default()
}

/// Equal when the JSON is: the metadata is read from it.
impl PartialEq for RawObject {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
    }
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(RawObject::new)
    }
}

impl Resource for RawObject {
    type DynamicType = kube_core::discovery::ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }
    fn meta(&self) -> &ObjectMeta {
        self.metadata.get_or_init(|| metadata_of(&self.json))
    }
    #[allow(clippy::expect_used, reason = "initialised on the line before")]
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        let _ = self.metadata.get_or_init(|| metadata_of(&self.json));
        self.metadata.get_mut().expect("metadata initialised")
    }
}

/// An AdmissionRequest whose objects are kept as sent.
pub type Request = AdmissionRequest<RawObject>;

/// An admission controller: answers one request.
pub trait Admit: Send + Sync + 'static {
    /// The answer to `request`.
    fn admit(&self, request: &Request) -> AdmissionResponse;
}

/// Why a request body is not an AdmissionReview.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON of an AdmissionReview.
    #[error("could not decode body: {0}")]
    Decode(#[from] serde_json::Error),
    /// An AdmissionReview without a request.
    #[error("could not decode body: the AdmissionReview has no request")]
    NoRequest,
}

/// Decodes an AdmissionReview, lets `admit` answer it and encodes the
/// response review (same apiVersion, the request's uid).
pub fn review_response(admit: &dyn Admit, body: &[u8]) -> Result<String, ReviewError> {
    review_response_measured(admit, body, None)
}

/// [`review_response`], counted and timed in `metrics` when given.
pub fn review_response_measured(
    admit: &dyn Admit,
    body: &[u8],
    metrics: Option<&crate::metrics::AdmissionMetrics>,
) -> Result<String, ReviewError> {
    let review: AdmissionReview<RawObject> = serde_json::from_slice(body)?;
    let request: Request = review.try_into().map_err(|_| ReviewError::NoRequest)?;
    let started = std::time::Instant::now();
    let response = admit.admit(&request);
    if let Some(metrics) = metrics {
        metrics.observe(&request, response.allowed, started.elapsed());
    }
    Ok(serde_json::to_string(&response.into_review())?)
}

/// `Allowed`.
pub fn allowed(request: &Request) -> AdmissionResponse {
    AdmissionResponse::from(request)
}

/// Refused with a BadRequest Status carrying `message` (Knative's
/// `MakeErrorStatus`).
pub fn bad_request(request: &Request, message: impl Into<String>) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    response.allowed = false;
    response.result = Status::failure(&message.into(), "BadRequest").with_code(400);
    response
}

/// Go's `schema.GroupVersionKind.String()`: `group/version, Kind=kind`.
struct GoGvk<'a>(&'a GroupVersionKind);

impl fmt::Display for GoGvk<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.0.group, self.0.version, self.0.kind)
    }
}

/// The kinds of a registry, by group, version and kind.
#[derive(Clone, Debug, Default)]
struct Kinds(HashMap<(String, String, String), CustomKind>);

impl Kinds {
    fn new(kinds: impl IntoIterator<Item = CustomKind>, keep: fn(&CustomKind) -> bool) -> Self {
        Kinds(
            kinds
                .into_iter()
                .filter(keep)
                .map(|k| ((k.group.clone(), k.version.clone(), k.kind.clone()), k))
                .collect(),
        )
    }

    fn get(&self, gvk: &GroupVersionKind) -> Result<&CustomKind, String> {
        self.0
            .get(&(gvk.group.clone(), gvk.version.clone(), gvk.kind.clone()))
            .ok_or_else(|| format!("unhandled kind: {}", GoGvk(gvk)))
    }

    fn list(&self) -> Vec<CustomKind> {
        let mut kinds: Vec<CustomKind> = self.0.values().cloned().collect();
        kinds.sort_by(|a, b| a.plural.cmp(&b.plural).then(a.group.cmp(&b.group)));
        kinds
    }
}

const MISSING_NEW_OBJECT: &str = "the new object may not be nil";

/// `/defaulting`: decodes the new object into its kind's type (refusing
/// unknown fields), runs `set_defaults` and answers a JSON patch from the
/// object as sent to the object as the type writes it back, defaults
/// included (Knative's round-trip patch plus `SetDefaults`).
#[derive(Clone, Debug, Default)]
pub struct Defaulting {
    kinds: Kinds,
}

impl Defaulting {
    /// Defaults the kinds of `kinds` that have a `Defaultable` hook.
    pub fn new(kinds: impl IntoIterator<Item = CustomKind>) -> Self {
        Defaulting {
            kinds: Kinds::new(kinds, CustomKind::is_defaulted),
        }
    }

    /// The kinds defaulted, by plural.
    pub fn kinds(&self) -> Vec<CustomKind> {
        self.kinds.list()
    }

    fn mutate(&self, request: &Request) -> Result<json_patch::Patch, String> {
        let kind = self.kinds.get(&request.kind)?;
        let defaulted = match &request.object {
            Some(new) => Some(
                kind.set_defaults(new.json())
                    .unwrap_or_else(|| Ok(new.json().clone()))
                    .map_err(|e| format!("cannot decode incoming new object: {e}"))?,
            ),
            None => None,
        };
        if let Some(old) = &request.old_object {
            kind.decode(old.json())
                .map_err(|e| format!("cannot decode incoming old object: {e}"))?;
        }
        match (&request.object, defaulted) {
            (Some(new), Some(defaulted)) => Ok(json_patch::diff(new.json(), &defaulted)),
            _ => Err(MISSING_NEW_OBJECT.to_owned()),
        }
    }
}

impl Admit for Defaulting {
    fn admit(&self, request: &Request) -> AdmissionResponse {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return allowed(request);
        }
        match self.mutate(request) {
            Ok(patch) if patch.0.is_empty() => allowed(request),
            Ok(patch) => match allowed(request).with_patch(patch) {
                Ok(response) => response,
                Err(e) => bad_request(request, format!("mutation failed: {e}")),
            },
            Err(e) => bad_request(request, format!("mutation failed: {e}")),
        }
    }
}

/// `/resource-validation`: decodes the new and old objects (refusing
/// unknown fields) and runs `validate`; error-level problems refuse the
/// request with `validation failed: <problems>`, warning-level ones travel
/// as `warnings`.
///
/// Two deliberate differences from Knative: DELETE is allowed without
/// decoding anything (an object stored before a field was removed from its
/// type can always be deleted), and an update of a subresource (`status`) is
/// allowed without validating (it cannot change the spec, and refusing it
/// would keep a controller from reporting on an object stored before the
/// webhook existed).
#[derive(Clone, Debug, Default)]
pub struct Validation {
    kinds: Kinds,
}

impl Validation {
    /// Validates the kinds of `kinds` that have a `Validatable` hook.
    pub fn new(kinds: impl IntoIterator<Item = CustomKind>) -> Self {
        Validation {
            kinds: Kinds::new(kinds, CustomKind::is_validated),
        }
    }

    /// The kinds validated, by plural.
    pub fn kinds(&self) -> Vec<CustomKind> {
        self.kinds.list()
    }
}

impl Admit for Validation {
    fn admit(&self, request: &Request) -> AdmissionResponse {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return allowed(request);
        }
        let kind = match self.kinds.get(&request.kind) {
            Ok(kind) => kind,
            Err(e) => return bad_request(request, format!("decoding request failed: {e}")),
        };
        let Some(new) = &request.object else {
            return bad_request(request, format!("validation failed: {MISSING_NEW_OBJECT}"));
        };
        let verdict = match kind.validate(new.json()) {
            Some(Ok(verdict)) => verdict,
            Some(Err(e)) => {
                return bad_request(
                    request,
                    format!("decoding request failed: cannot decode incoming new object: {e}"),
                );
            }
            None => Ok(()),
        };
        if let Some(old) = &request.old_object
            && let Err(e) = kind.decode(old.json())
        {
            return bad_request(
                request,
                format!("decoding request failed: cannot decode incoming old object: {e}"),
            );
        }
        if request.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
            return allowed(request);
        }
        let Err(problems) = verdict else {
            return allowed(request);
        };
        let errors = problems.filter(DiagnosticLevel::Error);
        let warnings = problems.filter(DiagnosticLevel::Warning);
        let mut response = if errors.is_empty() {
            allowed(request)
        } else {
            bad_request(request, format!("validation failed: {errors}"))
        };
        if !warnings.is_empty() {
            response.warnings = Some(vec![warnings.to_string()]);
        }
        response
    }
}

/// Checks a ConfigMap's data; `Err` says why it cannot be used.
pub type ConfigCheck = Arc<dyn Fn(&BTreeMap<String, String>) -> Result<(), String> + Send + Sync>;

/// `/config-validation`: checks the ConfigMaps it knows by name with the
/// parser the process itself uses, and refuses an edit of `_example` that
/// its checksum annotation gives away.
#[derive(Clone, Default)]
pub struct ConfigValidation {
    checks: BTreeMap<String, ConfigCheck>,
}

impl fmt::Debug for ConfigValidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigValidation")
            .field("config_maps", &self.checks.keys())
            .finish()
    }
}

impl ConfigValidation {
    /// Checks nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks the ConfigMaps named `name` with `check`.
    pub fn with(mut self, name: impl Into<String>, check: ConfigCheck) -> Self {
        self.checks.insert(name.into(), check);
        self
    }

    /// The `config-logging`, `config-leader-election` and
    /// `config-observability` checks of `kinject-sharedmain` (the process's
    /// own start-up parsers), under the names `names` gives each (the
    /// process's `CONFIG_*_NAME`).
    pub fn sharedmain(names: impl Fn(&str) -> String) -> Self {
        kinject_sharedmain::CONFIG_MAPS
            .into_iter()
            .fold(Self::new(), |checks, config| {
                let check: ConfigCheck = Arc::new(move |data| {
                    kinject_sharedmain::check_config_map(config, data).unwrap_or(Ok(()))
                });
                checks.with(names(config), check)
            })
    }

    fn validate(&self, request: &Request) -> Result<(), String> {
        let gvk = &request.kind;
        if !(gvk.group.is_empty() && gvk.version == "v1" && gvk.kind == "ConfigMap") {
            return Err(format!("unhandled kind: {}", GoGvk(gvk)));
        }
        let config_map = match &request.object {
            Some(new) => ConfigMapView::deserialize(new.json())
                .map_err(|e| format!("cannot decode incoming new object: {e}"))?,
            None => ConfigMapView::default(),
        };
        let data = config_map.data.unwrap_or_default();
        if let Some(expected) = config_map
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(EXAMPLE_CHECKSUM_ANNOTATION))
        {
            let actual = example_checksum(data.get(EXAMPLE_KEY).map(String::as_str).unwrap_or_default());
            if *expected != actual {
                return Err(format!(
                    "the update modifies a key in {EXAMPLE_KEY:?} which is probably not what you want. \
                     Instead, copy the respective setting to the top-level of the ConfigMap, directly below \"data\""
                ));
            }
        }
        match config_map
            .metadata
            .name
            .as_deref()
            .and_then(|n| self.checks.get(n))
        {
            Some(check) => check(&data),
            None => Ok(()),
        }
    }
}

impl Admit for ConfigValidation {
    fn admit(&self, request: &Request) -> AdmissionResponse {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return allowed(request);
        }
        match self.validate(request) {
            Ok(()) => allowed(request),
            Err(e) => bad_request(request, format!("validation failed: {e}")),
        }
    }
}

/// The parts of a ConfigMap that `/config-validation` reads. Decoding the
/// whole `ConfigMap` would copy its labels, and a review may carry hundreds
/// of thousands of them; the API server has checked the rest before any
/// webhook sees it.
#[derive(Debug, Default, Deserialize)]
struct ConfigMapView {
    #[serde(default)]
    metadata: ConfigMapMetaView,
    data: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigMapMetaView {
    name: Option<String>,
    annotations: Option<BTreeMap<String, String>>,
}

/// Knative's `configmap.Checksum`: the CRC-32 (IEEE) of the value, as 8 hex
/// digits.
pub fn example_checksum(value: &str) -> String {
    format!("{:08x}", crc32fast::hash(value.as_bytes()))
}
