//! The webhook's own certificates (Knative's `webhook/certificates`): a
//! self-signed ECDSA CA and a serving certificate for the webhook's Service,
//! kept in a Secret and renewed before they expire. The CA has a subject of
//! its own and both carry key identifiers (the serving certificate's
//! Authority Key Identifier is the CA's Subject Key Identifier), so
//! `openssl verify`, Go, Python and rustls all accept the chain.
//!
//! The reconciler writes the Secret only when a key is missing, the serving
//! certificate does not parse, or it expires within [`RENEW_BEFORE`]; the
//! TLS server reads the Secret on every handshake, so a renewal needs no
//! restart. A renewal rotates in three steps, so no client that trusts the
//! configurations' `caBundle` ever sees a certificate it cannot verify:
//!
//! 1. the new CA joins the bundle ([`CA_CERT`] holds both) and the new
//!    serving certificate waits under [`NEXT_SERVER_CERT`];
//! 2. once every webhook configuration (and CRD converting through the
//!    webhook) that trusted the old CA trusts the new
//!    one too, the serving certificate switches;
//! 3. [`RETIRE_AFTER`] later, the old CA leaves the bundle.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use kinject_webhook::certificates::{Certificates, needs_renewal};
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
//! let certs = Certificates::generate("webhook", "knative-samples", "cluster.local", now).unwrap();
//! assert!(needs_renewal(&certs.to_data(), now).is_none());
//! let six_days_later = now + Duration::from_secs(6 * 24 * 3600 + 1);
//! assert!(needs_renewal(&certs.to_data(), six_days_later).is_some());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinject_runtime::controller::{Action, Error as ReconcileError, Impl, ObjectKey, Reconciler};
use kinject_runtime::injection::Context;
use kinject_runtime::leader::{LeaderAware, LeaderAwareFuncs};
use kinject_runtime::lister::Lister;
use kinject_runtime::rbac::Verb;
use kube::Api;
use kube::api::PostParams;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};

/// The Secret key of the serving certificate's private key (PKCS #8 PEM).
pub const SERVER_KEY: &str = "server-key.pem";
/// The Secret key of the serving certificate (PEM).
pub const SERVER_CERT: &str = "server-cert.pem";
/// The Secret key of the CA bundle: the webhook configurations' `caBundle`.
/// One CA, or two while a rotation is under way.
pub const CA_CERT: &str = "ca-cert.pem";
/// The Secret keys of a rotation under way: the next serving key and
/// certificate, and the CA that signed them, kept until every webhook
/// configuration trusts that CA.
pub const NEXT_SERVER_KEY: &str = "next-server-key.pem";
/// See [`NEXT_SERVER_KEY`].
pub const NEXT_SERVER_CERT: &str = "next-server-cert.pem";
/// See [`NEXT_SERVER_KEY`].
pub const NEXT_CA_CERT: &str = "next-ca-cert.pem";
/// The annotation on the Secret saying when the previous CA leaves the
/// bundle (seconds since 1970): [`RETIRE_AFTER`] after the serving certificate
/// switched, so every replica's cache serves the new one first.
pub const RETIRE_PREVIOUS_CA_AT: &str = "webhook.kinject.dev/retire-previous-ca-at";
/// How long the previous CA stays in the bundle after the switch.
pub const RETIRE_AFTER: Duration = Duration::from_secs(60);
/// How long generated certificates are valid (Knative's 7 days).
pub const VALIDITY: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Certificates expiring sooner than this are replaced (Knative's one day).
pub const RENEW_BEFORE: Duration = Duration::from_secs(24 * 60 * 60);
/// The organization of generated certificates (Knative's).
pub const ORGANIZATION: &str = "knative.dev";

/// What time it is: `SystemTime::now` in a process, a settable clock in
/// tests, so expiry is tested without waiting.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(SystemTime::now)
}

/// Why certificates could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// rcgen refused the parameters or could not sign.
    #[error("cannot generate the webhook certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A time rcgen cannot represent.
    #[error(
        "cannot generate the webhook certificates: the clock reads {0:?}, outside what a certificate can hold"
    )]
    Time(SystemTime),
}

/// A CA and the serving certificate it signed, PEM encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificates {
    /// The serving certificate's private key.
    pub server_key: String,
    /// The serving certificate.
    pub server_cert: String,
    /// The CA certificate.
    pub ca_cert: String,
}

impl Certificates {
    /// A new CA and serving certificate for the Service `service` in
    /// `namespace`, valid from `now` for [`VALIDITY`], with Knative's names:
    /// `service`, `service.namespace`, `service.namespace.svc` (the common
    /// name) and `service.namespace.svc.<cluster_domain>`.
    pub fn generate(
        service: &str,
        namespace: &str,
        cluster_domain: &str,
        now: SystemTime,
    ) -> Result<Certificates, CertificateError> {
        let not_before = time::OffsetDateTime::from(now.checked_sub(Duration::from_secs(60)).unwrap_or(now));
        let not_after =
            time::OffsetDateTime::from(now.checked_add(VALIDITY).ok_or(CertificateError::Time(now))?);

        let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::OrganizationName, ORGANIZATION);
        // A subject of its own: with the serving certificate's, OpenSSL takes
        // the serving certificate for self-signed and refuses the chain.
        ca.distinguished_name
            .push(DnType::CommonName, format!("{service}.{namespace}.svc CA"));
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::CrlSign,
        ];
        ca.not_before = not_before;
        ca.not_after = not_after;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let server_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let common_name = format!("{service}.{namespace}.svc");
        let mut server = CertificateParams::new(vec![
            service.to_owned(),
            format!("{service}.{namespace}"),
            common_name.clone(),
            format!("{common_name}.{cluster_domain}"),
        ])?;
        server
            .distinguished_name
            .push(DnType::OrganizationName, ORGANIZATION);
        server.distinguished_name.push(DnType::CommonName, common_name);
        server.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.not_before = not_before;
        server.not_after = not_after;
        // Names the CA's key, so verifiers find the issuer by key and not by
        // subject alone (OpenSSL, Go and Python look for it).
        server.use_authority_key_identifier_extension = true;
        // BasicConstraints CA:FALSE, which also makes rcgen write the
        // certificate's own Subject Key Identifier.
        server.is_ca = IsCa::ExplicitNoCa;
        let server_cert = server.signed_by(&server_key, &issuer)?;
        Ok(Certificates {
            server_key: server_key.serialize_pem(),
            server_cert: server_cert.pem(),
            ca_cert: ca_cert.pem(),
        })
    }

    /// The Secret data holding them.
    pub fn to_data(&self) -> BTreeMap<String, ByteString> {
        BTreeMap::from([
            (
                SERVER_KEY.to_owned(),
                ByteString(self.server_key.clone().into_bytes()),
            ),
            (
                SERVER_CERT.to_owned(),
                ByteString(self.server_cert.clone().into_bytes()),
            ),
            (CA_CERT.to_owned(), ByteString(self.ca_cert.clone().into_bytes())),
        ])
    }
}

/// When the serving certificate in `data` expires, if it parses.
pub fn not_after(data: &BTreeMap<String, ByteString>) -> Option<SystemTime> {
    let pem = data.get(SERVER_CERT)?;
    let chain = x509_cert::Certificate::load_pem_chain(&pem.0).ok()?;
    let since_epoch = chain
        .first()?
        .tbs_certificate
        .validity
        .not_after
        .to_unix_duration();
    SystemTime::UNIX_EPOCH.checked_add(since_epoch)
}

/// Why the certificates in `data` must be replaced at `now`, or `None` when
/// they are good for more than [`RENEW_BEFORE`].
pub fn needs_renewal(data: &BTreeMap<String, ByteString>, now: SystemTime) -> Option<String> {
    for key in [SERVER_KEY, SERVER_CERT, CA_CERT] {
        if data.get(key).is_none_or(|v| v.0.is_empty()) {
            return Some(format!("the Secret has no {key:?}"));
        }
    }
    let Some(expiry) = not_after(data) else {
        return Some(format!("{SERVER_CERT:?} is not a PEM certificate"));
    };
    if expiry < now + RENEW_BEFORE {
        return Some(format!("{SERVER_CERT:?} expires within a day"));
    }
    None
}

/// What the certificates reconciler needs to know.
#[derive(Clone)]
pub struct CertificatesOptions {
    /// The webhook's Service (`webhook`).
    pub service: String,
    /// The Secret (`webhook-certs`).
    pub secret: String,
    /// Where both live (`SYSTEM_NAMESPACE`).
    pub namespace: String,
    /// The clock expiry is judged by.
    pub clock: Clock,
    /// The CRDs whose conversion calls the webhook: their `caBundle` must
    /// trust a new CA before the certificate it signs is served, as the
    /// webhook configurations' must.
    pub converted_crds: Vec<String>,
}

impl std::fmt::Debug for CertificatesOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificatesOptions")
            .field("service", &self.service)
            .field("secret", &self.secret)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The queue (and lease) name of the certificates reconciler.
pub const QUEUE: &str = "webhookcertificates";

struct CertReconciler {
    options: CertificatesOptions,
    secrets: Lister<Secret>,
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    crds: Api<CustomResourceDefinition>,
    api: Api<Secret>,
    cluster_domain: String,
    leadership: Arc<LeaderAwareFuncs>,
}

/// What a reconcile does to the Secret's data.
enum Step {
    /// Nothing to do until this long from now (none: until the Secret changes).
    Wait(Option<Duration>),
    /// Write this data (and this retirement annotation, or remove it).
    Write {
        data: BTreeMap<String, ByteString>,
        retire_at: Option<String>,
        why: String,
    },
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> String {
    data.get(key)
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}

/// The PEM blocks of a bundle, each ending in a newline.
fn pem_blocks(bundle: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current = String::new();
    for line in bundle.lines() {
        current.push_str(line);
        current.push('\n');
        if line.starts_with("-----END") {
            blocks.push(std::mem::take(&mut current));
        }
    }
    blocks
}

impl CertReconciler {
    /// Whether every webhook configuration (and converted CRD) whose caBundle trusts `old` also
    /// trusts `new`. Read from the API server, not an informer: it is asked
    /// once a week, during a rotation, and the process keeps no cache of
    /// every configuration for it.
    async fn configurations_trust(&self, old: &str, new: &str) -> Result<bool, kube::Error> {
        let params = kube::api::ListParams::default();
        let mutating = self.mutating.list(&params).await?;
        let validating = self.validating.list(&params).await?;
        let bundles: Vec<String> = mutating
            .items
            .iter()
            .flat_map(|c| {
                c.webhooks
                    .iter()
                    .flatten()
                    .map(|w| w.client_config.ca_bundle.clone())
            })
            .chain(validating.items.iter().flat_map(|c| {
                c.webhooks
                    .iter()
                    .flatten()
                    .map(|w| w.client_config.ca_bundle.clone())
            }))
            .flatten()
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .collect();
        let mut bundles = bundles;
        for name in &self.options.converted_crds {
            let conversion_ca = self
                .crds
                .get_opt(name)
                .await?
                .and_then(|crd| crd.spec.conversion)
                .and_then(|conversion| conversion.webhook)
                .and_then(|webhook| webhook.client_config)
                .and_then(|config| config.ca_bundle);
            bundles.extend(conversion_ca.map(|b| String::from_utf8_lossy(&b.0).into_owned()));
        }
        Ok(bundles
            .iter()
            .filter(|b| b.contains(old.trim()))
            .all(|b| b.contains(new.trim())))
    }

    /// Step 2: serve the next certificate once the configurations trust its CA.
    async fn switch(
        &self,
        mut data: BTreeMap<String, ByteString>,
        now: SystemTime,
    ) -> Result<Step, kube::Error> {
        let next_ca = text(&data, NEXT_CA_CERT);
        let previous = pem_blocks(&text(&data, CA_CERT))
            .into_iter()
            .find(|b| b.trim() != next_ca.trim())
            .unwrap_or_default();
        if !self.configurations_trust(&previous, &next_ca).await? {
            return Ok(Step::Wait(Some(Duration::from_secs(2))));
        }
        for (from, to) in [(NEXT_SERVER_KEY, SERVER_KEY), (NEXT_SERVER_CERT, SERVER_CERT)] {
            if let Some(value) = data.remove(from) {
                data.insert(to.to_owned(), value);
            }
        }
        data.remove(NEXT_CA_CERT);
        let retire_at = (now + RETIRE_AFTER)
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
            .to_string();
        Ok(Step::Write {
            data,
            retire_at: Some(retire_at),
            why: "every webhook configuration trusts the new CA; serving the new certificate".into(),
        })
    }

    /// Step 1, or the first certificates: a new CA and serving certificate
    /// when the current ones are missing or expire within a day.
    fn renew(
        &self,
        mut data: BTreeMap<String, ByteString>,
        now: SystemTime,
        namespace: &str,
    ) -> Result<Step, CertificateError> {
        let Some(why) = needs_renewal(&data, now) else {
            // Look again when the certificate enters its last day, in case
            // nothing else touches the Secret until then.
            return Ok(Step::Wait(not_after(&data).map(|expiry| {
                expiry
                    .checked_sub(RENEW_BEFORE)
                    .and_then(|d| d.duration_since(now).ok())
                    .unwrap_or_default()
                    + Duration::from_secs(1)
            })));
        };
        let certs = Certificates::generate(&self.options.service, namespace, &self.cluster_domain, now)?;
        let current = pem_blocks(&text(&data, CA_CERT)).pop();
        let Some(current) = current.filter(|_| not_after(&data).is_some()) else {
            // Nothing trusts anything yet (or what is there cannot be
            // served): install at once.
            data.extend(certs.to_data());
            return Ok(Step::Write {
                data,
                retire_at: None,
                why,
            });
        };
        data.insert(
            CA_CERT.to_owned(),
            ByteString(format!("{current}{}", certs.ca_cert).into_bytes()),
        );
        data.insert(NEXT_CA_CERT.to_owned(), ByteString(certs.ca_cert.into_bytes()));
        data.insert(
            NEXT_SERVER_KEY.to_owned(),
            ByteString(certs.server_key.into_bytes()),
        );
        data.insert(
            NEXT_SERVER_CERT.to_owned(),
            ByteString(certs.server_cert.into_bytes()),
        );
        Ok(Step::Write {
            data,
            retire_at: None,
            why: format!("{why}; the new CA joins the bundle first"),
        })
    }

    /// The next step of the certificates' life at `now`.
    async fn step(&self, secret: &Secret, now: SystemTime, namespace: &str) -> Result<Step, ReconcileError> {
        let data = secret.data.clone().unwrap_or_default();
        if data.contains_key(NEXT_CA_CERT) {
            return self
                .switch(data, now)
                .await
                .map_err(|e| ReconcileError::new(e).context("cannot read the webhook configurations"));
        }
        let retire_at = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RETIRE_PREVIOUS_CA_AT))
            .and_then(|t| t.parse::<u64>().ok())
            .and_then(|t| SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(t)));
        if let Some(at) = retire_at {
            // Step 3: the old CA leaves the bundle.
            if let Ok(left) = at.duration_since(now) {
                return Ok(Step::Wait(Some(left + Duration::from_secs(1))));
            }
            let mut data = data;
            let current = pem_blocks(&text(&data, CA_CERT)).pop().unwrap_or_default();
            data.insert(CA_CERT.to_owned(), ByteString(current.into_bytes()));
            return Ok(Step::Write {
                data,
                retire_at: None,
                why: "the previous CA leaves the bundle".into(),
            });
        }
        self.renew(data, now, namespace)
            .map_err(|e| ReconcileError::permanent(ReconcileError::new(e.to_string())))
    }
}

impl Reconciler for CertReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        if !self.leadership.is_leader_for(key) {
            return Ok(Action::await_change());
        }
        let Some(secret) = self
            .secrets
            .namespaced(&key.namespace)
            .get(&key.name)
            .map_err(|e| ReconcileError::new(e.to_string()))?
        else {
            // The manifests create the (empty) Secret; without it there is
            // nowhere to keep certificates the webhook configurations trust.
            tracing::warn!(
                secret = %key,
                "the webhook certificates Secret does not exist; create it (config/ has it, empty)"
            );
            return Ok(Action::await_change());
        };
        let now = (self.options.clock)();
        let step = self.step(&secret, now, &key.namespace).await?;
        let (data, retire_at, why) = match step {
            Step::Wait(Some(after)) => return Ok(Action::requeue_after(after)),
            Step::Wait(None) => return Ok(Action::await_change()),
            Step::Write { data, retire_at, why } => (data, retire_at, why),
        };
        tracing::info!(secret = %key, reason = %why, "Updating the webhook certificates");
        let mut updated = (*secret).clone();
        updated.data = Some(data);
        let annotations = updated.metadata.annotations.get_or_insert_with(BTreeMap::new);
        match retire_at {
            Some(at) => {
                annotations.insert(RETIRE_PREVIOUS_CA_AT.to_owned(), at);
            }
            None => {
                annotations.remove(RETIRE_PREVIOUS_CA_AT);
            }
        }
        self.api
            .replace(&key.name, &PostParams::default(), &updated)
            .await
            .map_err(|e| ReconcileError::new(e).context(format!("cannot update Secret {key}")))?;
        Ok(Action::await_change())
    }
}

/// The certificates reconciler, leader-elected, over the Secret informer of
/// `options.namespace` that watches `options.secret` alone (it needs no
/// read access to any other Secret).
pub fn new_controller(ctx: &Context, options: CertificatesOptions) -> Impl {
    let secrets = ctx
        .in_namespace(options.namespace.clone())
        .named_informer::<Secret>(&options.secret);
    let key = ObjectKey::new(options.namespace.clone(), options.secret.clone());
    let leadership = Arc::new(LeaderAwareFuncs::enqueuing_on_promote(key.clone()));
    ctx.needs::<MutatingWebhookConfiguration>(&[Verb::List]);
    ctx.needs::<ValidatingWebhookConfiguration>(&[Verb::List]);
    for crd in &options.converted_crds {
        ctx.needs_named::<CustomResourceDefinition>(crd, &[Verb::Get]);
    }
    let reconciler = Arc::new(CertReconciler {
        api: Api::namespaced(ctx.client(), &options.namespace),
        cluster_domain: ctx.cluster_domain().to_owned(),
        secrets: secrets.lister(),
        mutating: Api::all(ctx.client()),
        validating: Api::all(ctx.client()),
        crds: Api::all(ctx.client()),
        options,
        leadership: leadership.clone(),
    });
    let leader: Arc<dyn LeaderAware> = leadership;
    let controller = Impl::new(
        QUEUE,
        reconciler,
        crate::controller_options::controller_options(ctx).leader_aware(leader),
    );
    secrets.add_event_handler(controller.enqueue_handler().with_filter(move |secret: &Secret| {
        secret.metadata.name.as_deref() == Some(key.name.as_str())
            && secret.metadata.namespace.as_deref() == Some(key.namespace.as_str())
    }));
    controller
}
