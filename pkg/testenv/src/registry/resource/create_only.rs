//! The review kinds: served for `create` alone, answered and never stored, as
//! kube-apiserver's authentication and authorization groups serve them.

use serde::{Serialize, de::DeserializeOwned};

use super::builtin_kinds::{Scope, roundtrip};
use super::{Builtin, KindImpl, ResourceDef, Roundtrip};

/// A create-only kind as its k8s-openapi type describes it.
#[derive(Clone, Debug)]
pub(crate) struct CreateOnlyKind {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) namespaced: bool,
    roundtrip: Roundtrip,
    schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

fn kind<T>() -> CreateOnlyKind
where
    T: k8s_openapi::Resource + DeserializeOwned + Serialize + schemars::JsonSchema,
    T::Scope: Scope,
{
    CreateOnlyKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        namespaced: <T::Scope as Scope>::NAMESPACED,
        roundtrip: roundtrip::<T>,
        schema: schemars::SchemaGenerator::subschema_for::<T>,
    }
}

/// The review kinds kube-apiserver serves by default, but TokenReview (testenv's
/// tokens are checked by its own authenticator alone).
pub(crate) fn create_only_kinds() -> &'static [CreateOnlyKind] {
    use k8s_openapi::api::authentication::v1 as authentication;
    use k8s_openapi::api::authorization::v1 as authorization;
    static KINDS: std::sync::OnceLock<Vec<CreateOnlyKind>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        vec![
            kind::<authentication::SelfSubjectReview>(),
            kind::<authorization::LocalSubjectAccessReview>(),
            kind::<authorization::SelfSubjectAccessReview>(),
            kind::<authorization::SelfSubjectRulesReview>(),
            kind::<authorization::SubjectAccessReview>(),
        ]
    })
}

/// What a ServiceAccount's `token` subresource takes and answers, TokenRequest: not
/// served as a resource of its own, but decoded and reported on as one.
pub(crate) fn token_request_def() -> ResourceDef {
    use k8s_openapi::Resource as _;
    use k8s_openapi::api::authentication::v1::TokenRequest;
    let mut def = CreateOnlyKind {
        group: TokenRequest::GROUP,
        version: TokenRequest::VERSION,
        kind: TokenRequest::KIND,
        plural: TokenRequest::URL_PATH_SEGMENT,
        namespaced: true,
        roundtrip: roundtrip::<TokenRequest>,
        schema: schemars::SchemaGenerator::subschema_for::<TokenRequest>,
    }
    .resource_def();
    def.create_only = false;
    def
}

impl CreateOnlyKind {
    /// The kind's schema as a reference into `generator`'s definitions.
    pub(crate) fn schema_ref(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.schema)(generator)
    }

    /// The resource: its verbs are `create` alone, and it has no status subresource
    /// (the status is the answer).
    pub(crate) fn resource_def(&self) -> ResourceDef {
        ResourceDef {
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            plural: self.plural.to_owned(),
            singular: self.kind.to_lowercase(),
            kind: self.kind.to_owned(),
            list_kind: String::new(),
            namespaced: self.namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            status: false,
            generation: false,
            allow_create_on_update: false,
            allow_unconditional_update: false,
            return_deleted_object: false,
            deletecollection: false,
            create_only: true,
            token_request: false,
            imp: KindImpl::Builtin(Builtin::Other, self.roundtrip),
            columns: Vec::new(),
            scale: None,
            storage_api_version: None,
            converter: None,
            webhook_conversion: false,
        }
    }
}
