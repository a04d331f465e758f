//! The model of an injectable kind, parsed from its marker attributes.
//!
//! This module is the single parser of markers: `#[derive(Kind)]` (in the
//! `kinject-macros` crate) and the generator both call [`KindModel::from_derive_input`],
//! so a marker means the same thing at compile time and at generation time, and
//! an unknown or malformed marker is an error in both, never silently ignored.
//!
//! ```
//! let input: syn::DeriveInput = syn::parse_quote! {
//!     #[derive(Kind)]
//!     #[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced, shortnames = ["asvc"])]
//!     #[genclient]
//!     #[genreconciler]
//!     pub struct AddressableService {
//!         pub metadata: ObjectMeta,
//!         pub spec: AddressableServiceSpec,
//!         pub status: Option<AddressableServiceStatus>,
//!     }
//! };
//! let model = kinject_model::KindModel::from_derive_input(&input).unwrap();
//! assert_eq!(model.plural, "addressableservices");
//! assert_eq!(model.api_version(), "samples.knative.dev/v1alpha1");
//! ```

use std::collections::BTreeSet;
use std::fmt;

/// Kubernetes' name checks, shared with the runtime (from `kinject-types`).
pub use kinject_types::validation;
use kinject_types::validation::{is_dns1123_label, is_dns1123_subdomain, is_kube_version, is_qualified_name};
use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{
    Attribute, Data, DeriveInput, Expr, ExprArray, Fields, GenericArgument, Ident, Lit, LitStr,
    PathArguments, Type,
};

/// The marker attributes this module owns.
pub const MARKERS: [&str; 3] = ["kind", "genclient", "genreconciler"];

/// Whether objects of a kind live in a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Objects live in a namespace.
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
}

/// A typed-client verb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// Read one object.
    Get,
    /// Read many objects.
    List,
    /// Stream changes.
    Watch,
    /// Create an object.
    Create,
    /// Replace an object.
    Update,
    /// Replace an object's status.
    UpdateStatus,
    /// Patch an object.
    Patch,
    /// Patch an object's status.
    PatchStatus,
    /// Delete an object.
    Delete,
    /// Delete many objects.
    DeleteCollection,
}

impl Verb {
    /// Every verb, in declaration order.
    pub const ALL: [Verb; 10] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::UpdateStatus,
        Verb::Patch,
        Verb::PatchStatus,
        Verb::Delete,
        Verb::DeleteCollection,
    ];

    /// The verb as written in markers (`update_status`).
    pub fn name(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::UpdateStatus => "update_status",
            Verb::Patch => "patch",
            Verb::PatchStatus => "patch_status",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "delete_collection",
        }
    }

    /// True for the verbs that act on the status subresource.
    pub fn is_status(self) -> bool {
        matches!(self, Verb::UpdateStatus | Verb::PatchStatus)
    }

    fn from_name(name: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.name() == name)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `#[genclient(...)]`: generate a typed client, lister and informer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenClient {
    /// The client's verbs after `only_verbs`, `skip_verbs`, `no_verbs` and `no_status`.
    pub verbs: BTreeSet<Verb>,
    /// `no_status`: the kind has no status subresource to write.
    pub no_status: bool,
}

impl GenClient {
    /// True when informers (and so listers and injection accessors) can be built,
    /// which needs `list` and `watch`.
    pub fn has_informer(&self) -> bool {
        self.verbs.contains(&Verb::List) && self.verbs.contains(&Verb::Watch)
    }
}

/// `#[genreconciler(...)]`: generate the typed reconciler traits and `new_impl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenReconciler {
    /// Class annotation keys; when set, the reconciler only acts on objects whose
    /// first present key has the reconciler's class value.
    pub classes: Vec<String>,
    /// Whether the generic Knative-shaped status logic (defaults, conditions,
    /// observed generation) runs around `reconcile_kind`.
    pub krshapedlogic: bool,
    /// The finalizer name; defaults to `<plural>.<group>`.
    pub finalizer: Option<String>,
}

/// `printcolumn(name = .., type = .., json_path = ..)` in `#[kind]`: a column
/// `kubectl get` shows (kubebuilder's `+kubebuilder:printcolumn`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintColumn {
    /// The header (`Replicas`).
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// Where the value is, from the object (`.spec.replicas`).
    pub json_path: String,
    /// What the column means.
    pub description: Option<String>,
    /// An OpenAPI format refining the type (`int32`, `date-time`).
    pub format: Option<String>,
    /// 0 shows the column always; higher shows it only with `-o wide`.
    pub priority: i32,
}

/// `scale(spec_replicas = .., status_replicas = .., label_selector = ..)` in
/// `#[kind]`: the scale subresource (kubebuilder's `+kubebuilder:subresource:scale`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scale {
    /// The desired replicas, under `.spec`.
    pub spec_replicas: String,
    /// The observed replicas, under `.status`.
    pub status_replicas: String,
    /// A label selector in string form, under `.spec` or `.status`.
    pub label_selector: Option<String>,
}

/// Everything the derive and the generator know about one kind.
#[derive(Clone, Debug)]
pub struct KindModel {
    /// The struct's name, which is also the Kubernetes kind.
    pub ident: Ident,
    /// The API group (`samples.knative.dev`; empty for the core group).
    pub group: String,
    /// The API version (`v1alpha1`).
    pub version: String,
    /// The resource name (`addressableservices`).
    pub plural: String,
    /// Lower-case singular name (`addressableservice`).
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub scope: Scope,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// kubectl categories.
    pub categories: Vec<String>,
    /// Columns `kubectl get` shows, in marker order.
    pub print_columns: Vec<PrintColumn>,
    /// The scale subresource, when the kind has one.
    pub scale: Option<Scale>,
    /// Descriptions in the CRD's schema are cut to this many bytes (0 drops
    /// them), for kinds that embed big Kubernetes types.
    pub max_description_len: Option<usize>,
    /// `storage`: of the kind's versions, this one is what the API server
    /// stores (needed when there are several).
    pub storage: bool,
    /// The struct's doc comment, one entry per line.
    pub docs: Vec<String>,
    /// The type of the `spec` field, if there is one.
    pub spec: Option<Type>,
    /// The `T` of the `status: Option<T>` field, if there is one.
    pub status: Option<Type>,
    /// Present when the kind carries `#[genclient]`.
    pub genclient: Option<GenClient>,
    /// Present when the kind carries `#[genreconciler]`.
    pub genreconciler: Option<GenReconciler>,
}

impl KindModel {
    /// The kind name (`AddressableService`).
    pub fn kind(&self) -> String {
        self.ident.to_string()
    }

    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The default finalizer name, `<plural>.<group>`, unless overridden.
    pub fn finalizer_name(&self) -> String {
        self.genreconciler
            .as_ref()
            .and_then(|r| r.finalizer.clone())
            .unwrap_or_else(|| format!("{}.{}", self.plural, self.group))
    }

    /// The name of the kind's CRD (`addressableservices.samples.knative.dev`).
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// Reads the model from a struct carrying `#[derive(Kind)]` and its markers.
    ///
    /// All problems found are returned together, each spanning the attribute or
    /// field at fault and saying how to fix it.
    pub fn from_derive_input(input: &DeriveInput) -> syn::Result<KindModel> {
        let mut errors = Errors::default();
        if !input.generics.params.is_empty() {
            errors.push(syn::Error::new(
                input.generics.span(),
                format!(
                    "`{}` derives Kind but is generic; a kind is one concrete type: remove the \
                     parameters and give its fields concrete types",
                    input.ident
                ),
            ));
        }
        if !matches!(input.vis, syn::Visibility::Public(_)) {
            errors.push(syn::Error::new(
                input.ident.span(),
                format!(
                    "`{0}` derives Kind but is not `pub`; the generated clients, informers and \
                     reconcilers live in another crate: declare it `pub struct {0}`",
                    input.ident
                ),
            ));
        }
        let fields = read_fields(input, &mut errors);
        let kind_attr = find_single(&input.attrs, "kind", &mut errors);
        let kind = match kind_attr {
            Some(attr) => parse_kind_attr(attr, &input.ident, &mut errors),
            None => {
                errors.push(syn::Error::new(
                    input.ident.span(),
                    format!(
                        "`{}` derives Kind but has no #[kind(...)] attribute; add \
                         #[kind(group = \"<api group>\", version = \"<version>\", namespaced)]",
                        input.ident
                    ),
                ));
                None
            }
        };
        let genclient = find_single(&input.attrs, "genclient", &mut errors)
            .map(|attr| parse_genclient(attr, kind.as_ref().map(|k| k.scope), &fields, &mut errors));
        let genreconciler_attr = find_single(&input.attrs, "genreconciler", &mut errors);
        let genreconciler =
            genreconciler_attr.map(|attr| parse_genreconciler(attr, &input.ident, &fields, &mut errors));
        if let Some(attr) = genreconciler_attr {
            let lacks_informer = match &genclient {
                None => true,
                Some(Some(client)) => !client.has_informer(),
                // A malformed #[genclient] has its own error already.
                Some(None) => false,
            };
            if lacks_informer {
                errors.push(needs_informer(attr, &input.ident));
            }
        }

        if let (Some(attr), Some(kind), Some(fields)) = (kind_attr, &kind, &fields)
            && kind.scale.is_some()
            && fields.status.is_none()
        {
            errors.push(syn::Error::new_spanned(
                attr,
                format!(
                    "scale(...) on `{}` reads replicas from the status, but the kind has no `status` field; \
                     add `pub status: Option<...>` with the replicas field",
                    input.ident
                ),
            ));
        }
        errors.finish()?;
        let (Some(kind), Some(fields)) = (kind, fields) else {
            // Both are only None when an error was recorded above.
            return Err(syn::Error::new(
                input.ident.span(),
                "invalid #[derive(Kind)] input",
            ));
        };
        Ok(KindModel {
            ident: input.ident.clone(),
            group: kind.group,
            version: kind.version,
            plural: kind.plural,
            singular: kind.singular,
            scope: kind.scope,
            short_names: kind.short_names,
            categories: kind.categories,
            print_columns: kind.print_columns,
            scale: kind.scale,
            max_description_len: kind.max_description_len,
            storage: kind.storage,
            docs: doc_lines(&input.attrs),
            spec: fields.spec,
            status: fields.status,
            genclient: genclient.flatten(),
            genreconciler: genreconciler.flatten(),
        })
    }
}

/// The generated reconciler reads objects through the informer and lister of
/// `#[genclient]`, and writes through its client.
fn needs_informer(attr: &Attribute, ident: &Ident) -> syn::Error {
    syn::Error::new_spanned(
        attr,
        format!(
            "#[genreconciler] on `{ident}` needs the client, informer and lister of #[genclient] with the \
             `list` and `watch` verbs; add #[genclient] (or put list and watch back into its verbs)"
        ),
    )
}

/// True when `attrs` contain `#[derive(..., Kind, ...)]` (any path ending in `Kind`).
pub fn derives_kind(attrs: &[Attribute]) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("derive")).any(|a| {
        let mut found = false;
        let _ = a.parse_nested_meta(|meta| {
            if meta.path.segments.last().is_some_and(|s| s.ident == "Kind") {
                found = true;
            }
            Ok(())
        });
        found
    })
}

/// The English plural of a kind, lower-cased, by the rules Kubernetes' generators
/// use (`AddressableService` → `addressableservices`, `Policy` → `policies`).
pub fn pluralize(kind: &str) -> String {
    let singular = kind.to_lowercase();
    if singular == "endpoints" {
        return singular;
    }
    let chars: Vec<char> = singular.chars().collect();
    let n = chars.len();
    if n < 2 {
        return singular;
    }
    let (last, before) = (chars[n - 1], chars[n - 2]);
    let stem: String = chars[..n - 1].iter().collect();
    match last {
        's' | 'x' | 'z' => format!("{singular}es"),
        'y' if !"aeiou".contains(before) => format!("{stem}ies"),
        'h' if before == 'c' || before == 's' => format!("{singular}es"),
        'e' if before == 'f' => format!("{}ves", &singular[..singular.len() - 2]),
        'f' => format!("{stem}ves"),
        _ => format!("{singular}s"),
    }
}

struct KindAttr {
    group: String,
    version: String,
    plural: String,
    singular: String,
    scope: Scope,
    short_names: Vec<String>,
    categories: Vec<String>,
    print_columns: Vec<PrintColumn>,
    scale: Option<Scale>,
    max_description_len: Option<usize>,
    storage: bool,
}

struct FieldsInfo {
    spec: Option<Type>,
    status: Option<Type>,
}

#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, err: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(err),
            None => self.0 = Some(err),
        }
    }

    fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

fn find_single<'a>(attrs: &'a [Attribute], name: &str, errors: &mut Errors) -> Option<&'a Attribute> {
    let mut found = attrs.iter().filter(|a| a.path().is_ident(name));
    let first = found.next();
    for dup in found {
        errors.push(syn::Error::new_spanned(
            dup,
            format!("#[{name}] is given more than once; merge its options into one #[{name}(...)]"),
        ));
    }
    first
}

fn read_fields(input: &DeriveInput, errors: &mut Errors) -> Option<FieldsInfo> {
    let named = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => named,
            _ => {
                errors.push(syn::Error::new(
                    input.ident.span(),
                    "Kind needs a struct with named fields `metadata`, `spec` and `status`",
                ));
                return None;
            }
        },
        _ => {
            errors.push(syn::Error::new(
                input.ident.span(),
                "Kind can only be derived for a struct with fields `metadata`, `spec` and `status`",
            ));
            return None;
        }
    };
    let mut info = FieldsInfo {
        spec: None,
        status: None,
    };
    let mut has_metadata = false;
    for field in &named.named {
        let Some(name) = &field.ident else { continue };
        match name.to_string().as_str() {
            "metadata" => has_metadata = true,
            "spec" => info.spec = Some(field.ty.clone()),
            "status" => match option_inner(&field.ty) {
                Some(inner) => info.status = Some(inner.clone()),
                None => errors.push(syn::Error::new(
                    field.ty.span(),
                    "`status` must be an `Option<...>` so that objects without a status round-trip; \
                     write `pub status: Option<YourStatus>`",
                )),
            },
            other => errors.push(syn::Error::new(
                name.span(),
                format!(
                    "unsupported field `{other}`: a kind has `metadata`, `spec` and `status`; \
                     move `{other}` into the spec or the status"
                ),
            )),
        }
    }
    if !has_metadata {
        errors.push(syn::Error::new(
            input.ident.span(),
            format!(
                "`{}` has no `metadata` field; add `pub metadata: ObjectMeta`",
                input.ident
            ),
        ));
    }
    Some(info)
}

fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(inner) if args.args.len() == 1 => Some(inner),
        _ => None,
    }
}

const KIND_KEYS: [&str; 12] = [
    "group",
    "version",
    "plural",
    "singular",
    "namespaced",
    "cluster_scoped",
    "shortnames",
    "categories",
    "printcolumn",
    "scale",
    "max_description_len",
    "storage",
];

fn parse_kind_attr(attr: &Attribute, ident: &Ident, errors: &mut Errors) -> Option<KindAttr> {
    let mut group: Option<String> = None;
    let mut version: Option<String> = None;
    let mut plural: Option<String> = None;
    let mut singular: Option<String> = None;
    let mut scope: Option<(Scope, Span)> = None;
    let mut short_names = Vec::new();
    let mut categories = Vec::new();
    let mut print_columns = Vec::new();
    let mut scale = None;
    let mut max_description_len = None;
    let mut storage = false;
    let mut given = BTreeSet::new();

    let parsed = attr.parse_nested_meta(|meta| {
        let key = key_of(&meta, "#[kind(...)]", &KIND_KEYS)?;
        // Columns are listed one marker each, like kubebuilder's.
        if key != "printcolumn" {
            given_once(&meta, &key, "#[kind(...)]", &mut given)?;
        }
        match key.as_str() {
            "group" => group = Some(string_value(&meta)?.value()),
            "version" => version = Some(string_value(&meta)?.value()),
            "plural" => plural = Some(string_value(&meta)?.value()),
            "singular" => singular = Some(string_value(&meta)?.value()),
            "namespaced" | "cluster_scoped" => {
                let this = if key == "namespaced" {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                };
                if scope.is_some_and(|(previous, _)| previous != this) {
                    return Err(
                        meta.error("`namespaced` and `cluster_scoped` contradict each other; keep one")
                    );
                }
                flag(&meta)?;
                scope = Some((this, meta.path.span()));
            }
            "shortnames" => short_names = string_list(&meta)?,
            "categories" => categories = string_list(&meta)?,
            "printcolumn" => print_columns.push(parse_print_column(&meta)?),
            "scale" => scale = Some(parse_scale(&meta)?),
            "storage" => {
                flag(&meta)?;
                storage = true;
            }
            "max_description_len" => {
                let value: syn::LitInt = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`max_description_len` takes a whole number of bytes, e.g. max_description_len = 0",
                    )
                })?;
                max_description_len = Some(value.base10_parse::<usize>().map_err(|_| {
                    syn::Error::new(
                        value.span(),
                        "`max_description_len` must be a whole number of bytes, 0 or more",
                    )
                })?);
            }
            _ => unreachable_key(&meta)?,
        }
        Ok(())
    });
    if let Err(err) = parsed {
        errors.push(err);
        return None;
    }

    let mut ok = true;
    let group = group.unwrap_or_else(|| {
        ok = false;
        errors.push(syn::Error::new_spanned(
            attr,
            "#[kind(...)] is missing `group`; add `group = \"<api group>\"`, e.g. `group = \"samples.knative.dev\"`",
        ));
        String::new()
    });
    let version = version.unwrap_or_else(|| {
        ok = false;
        errors.push(syn::Error::new_spanned(
            attr,
            "#[kind(...)] is missing `version`; add `version = \"<version>\"`, e.g. `version = \"v1alpha1\"`",
        ));
        String::new()
    });
    let Some((scope, _)) = scope else {
        errors.push(syn::Error::new_spanned(
            attr,
            "#[kind(...)] does not say the kind's scope; add `namespaced` or `cluster_scoped`",
        ));
        return None;
    };
    if !ok {
        return None;
    }
    if !is_dns1123_subdomain(&group).is_empty() {
        errors.push(syn::Error::new_spanned(
            attr,
            format!("group {group:?} is not a DNS subdomain; use lower-case words joined by dots, e.g. \"samples.knative.dev\""),
        ));
    }
    if !is_kube_version(&version).is_empty() {
        errors.push(syn::Error::new_spanned(
            attr,
            format!("version {version:?} is not a Kubernetes API version; use v<N>, v<N>alpha<M> or v<N>beta<M>, e.g. \"v1alpha1\""),
        ));
    }
    let kind = ident.to_string();
    let plural = plural.unwrap_or_else(|| pluralize(&kind));
    let singular = singular.unwrap_or_else(|| kind.to_lowercase());
    for (what, name) in [("plural", &plural), ("singular", &singular)]
        .into_iter()
        .chain(short_names.iter().map(|s| ("short name", s)))
        .chain(categories.iter().map(|s| ("category", s)))
    {
        if !is_dns1123_label(name).is_empty() {
            errors.push(syn::Error::new_spanned(
                attr,
                format!(
                    "{what} {name:?} is not a lower-case DNS label; use lower-case letters, digits and '-'"
                ),
            ));
        }
    }
    Some(KindAttr {
        group,
        version,
        plural,
        singular,
        scope,
        short_names,
        categories,
        print_columns,
        scale,
        max_description_len,
        storage,
    })
}

const PRINT_COLUMN_KEYS: [&str; 6] = ["name", "type", "json_path", "description", "format", "priority"];
/// The column types kube-apiserver accepts.
const PRINT_COLUMN_TYPES: [&str; 5] = ["integer", "number", "string", "boolean", "date"];
/// The column formats kube-apiserver accepts.
const PRINT_COLUMN_FORMATS: [&str; 8] = [
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
];

fn parse_print_column(meta: &ParseNestedMeta<'_>) -> syn::Result<PrintColumn> {
    let (mut name, mut type_, mut json_path, mut description, mut format) = (None, None, None, None, None);
    let mut priority = 0;
    let mut given = BTreeSet::new();
    meta.parse_nested_meta(|inner| {
        let key = key_of(&inner, "printcolumn(...) of #[kind]", &PRINT_COLUMN_KEYS)?;
        given_once(&inner, &key, "printcolumn(...) of #[kind]", &mut given)?;
        match key.as_str() {
            "name" => name = Some(string_value(&inner)?),
            "type" => type_ = Some(string_value(&inner)?),
            "json_path" => json_path = Some(string_value(&inner)?),
            "description" => description = Some(string_value(&inner)?.value()),
            "format" => format = Some(string_value(&inner)?),
            "priority" => {
                let value: syn::LitInt = inner.value()?.parse().map_err(|e| {
                    syn::Error::new(e.span(), "`priority` takes a whole number, e.g. priority = 1")
                })?;
                priority = value
                    .base10_parse::<i32>()
                    .ok()
                    .filter(|p| *p >= 0)
                    .ok_or_else(|| {
                        syn::Error::new(value.span(), "`priority` must be between 0 and 2147483647")
                    })?;
            }
            _ => unreachable_key(&inner)?,
        }
        Ok(())
    })?;
    let missing = |what: &str, example: &str| {
        meta.error(format!(
            "printcolumn(...) is missing `{what}`; add `{what} = {example}`"
        ))
    };
    let name = name.ok_or_else(|| missing("name", "\"Replicas\""))?;
    let type_ = type_.ok_or_else(|| missing("type", "\"integer\""))?;
    let json_path = json_path.ok_or_else(|| missing("json_path", "\".spec.replicas\""))?;
    if name.value().trim().is_empty() {
        return Err(syn::Error::new(
            name.span(),
            "the column `name` is empty; give it a header, e.g. \"Replicas\"",
        ));
    }
    if !PRINT_COLUMN_TYPES.contains(&type_.value().as_str()) {
        return Err(syn::Error::new(
            type_.span(),
            format!(
                "column type {:?} is not one kube-apiserver accepts; use one of {}",
                type_.value(),
                PRINT_COLUMN_TYPES.join(", ")
            ),
        ));
    }
    check_json_path(&json_path, ".", "the object")?;
    let format = match format {
        Some(f) if !PRINT_COLUMN_FORMATS.contains(&f.value().as_str()) => {
            return Err(syn::Error::new(
                f.span(),
                format!(
                    "column format {:?} is not one kube-apiserver accepts; use one of {}",
                    f.value(),
                    PRINT_COLUMN_FORMATS.join(", ")
                ),
            ));
        }
        f => f.map(|f| f.value()),
    };
    Ok(PrintColumn {
        name: name.value(),
        type_: type_.value(),
        json_path: json_path.value(),
        description,
        format,
        priority,
    })
}

const SCALE_KEYS: [&str; 3] = ["spec_replicas", "status_replicas", "label_selector"];

fn parse_scale(meta: &ParseNestedMeta<'_>) -> syn::Result<Scale> {
    let (mut spec, mut status, mut selector) = (None, None, None);
    let mut given = BTreeSet::new();
    meta.parse_nested_meta(|inner| {
        let key = key_of(&inner, "scale(...) of #[kind]", &SCALE_KEYS)?;
        given_once(&inner, &key, "scale(...) of #[kind]", &mut given)?;
        let value = string_value(&inner)?;
        match key.as_str() {
            "spec_replicas" => spec = Some(value),
            "status_replicas" => status = Some(value),
            "label_selector" => selector = Some(value),
            _ => unreachable_key(&inner)?,
        }
        Ok(())
    })?;
    let missing = |what: &str, example: &str| {
        meta.error(format!(
            "scale(...) is missing `{what}`; add `{what} = {example}`"
        ))
    };
    let spec = spec.ok_or_else(|| missing("spec_replicas", "\".spec.replicas\""))?;
    let status = status.ok_or_else(|| missing("status_replicas", "\".status.replicas\""))?;
    check_json_path(&spec, ".spec.", "the spec")?;
    check_json_path(&status, ".status.", "the status")?;
    if let Some(selector) = &selector
        && !selector.value().starts_with(".status.")
    {
        check_json_path(selector, ".spec.", "the spec or the status")?;
    }
    Ok(Scale {
        spec_replicas: spec.value(),
        status_replicas: status.value(),
        label_selector: selector.map(|s| s.value()),
    })
}

/// A printer column's path starts at the object (`.`); the scale
/// subresource's are plain fields under `.spec` or `.status`, as
/// kube-apiserver requires. The CRD check of `hack/update-codegen.sh` reads
/// the rest of a printer column's JSONPath.
fn check_json_path(path: &LitStr, prefix: &str, what: &str) -> syn::Result<()> {
    let value = path.value();
    let example = if prefix == "." {
        ".spec.replicas".to_owned()
    } else {
        format!("{prefix}replicas")
    };
    if !value.starts_with(prefix) || value.len() <= prefix.len().max(1) {
        return Err(syn::Error::new(
            path.span(),
            format!("{value:?} must be a path into {what} starting with `{prefix}`, e.g. \"{example}\""),
        ));
    }
    let plain = value[1..].split('.').all(|field| {
        !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    if prefix != "." && !plain {
        return Err(syn::Error::new(
            path.span(),
            format!(
                "{value:?} is not a plain field path; write fields joined by dots, without indexes or filters, e.g. \"{example}\""
            ),
        ));
    }
    Ok(())
}

const GENCLIENT_KEYS: [&str; 5] = [
    "no_status",
    "no_verbs",
    "only_verbs",
    "skip_verbs",
    "non_namespaced",
];

fn parse_genclient(
    attr: &Attribute,
    scope: Option<Scope>,
    fields: &Option<FieldsInfo>,
    errors: &mut Errors,
) -> Option<GenClient> {
    let mut no_status = false;
    let mut no_verbs = false;
    let mut only: Option<Vec<Verb>> = None;
    let mut skip: Vec<Verb> = Vec::new();
    let mut given = BTreeSet::new();

    if !matches!(attr.meta, syn::Meta::Path(_)) {
        let parsed = attr.parse_nested_meta(|meta| {
            let key = key_of(&meta, "#[genclient(...)]", &GENCLIENT_KEYS)?;
            given_once(&meta, &key, "#[genclient(...)]", &mut given)?;
            match key.as_str() {
                "no_status" => {
                    flag(&meta)?;
                    no_status = true;
                }
                "no_verbs" => {
                    flag(&meta)?;
                    no_verbs = true;
                }
                "only_verbs" => only = Some(verb_list(&meta)?),
                "skip_verbs" => skip = verb_list(&meta)?,
                "non_namespaced" => {
                    flag(&meta)?;
                    if scope == Some(Scope::Namespaced) {
                        return Err(meta
                            .error("`non_namespaced` contradicts #[kind(namespaced)]; remove one of them"));
                    }
                }
                _ => unreachable_key(&meta)?,
            }
            Ok(())
        });
        if let Err(err) = parsed {
            errors.push(err);
            return None;
        }
    }
    if only.is_some() && !skip.is_empty() {
        errors.push(syn::Error::new_spanned(
            attr,
            "#[genclient] takes `only_verbs` or `skip_verbs`, not both; keep one",
        ));
        return None;
    }
    let has_status = fields.as_ref().is_some_and(|f| f.status.is_some());
    let mut verbs: BTreeSet<Verb> = match (no_verbs, only) {
        (true, _) => BTreeSet::new(),
        (false, Some(only)) => only.into_iter().collect(),
        (false, None) => Verb::ALL.into_iter().collect(),
    };
    for v in skip {
        verbs.remove(&v);
    }
    if no_status || !has_status {
        verbs.retain(|v| !v.is_status());
    }
    Some(GenClient { verbs, no_status })
}

const GENRECONCILER_KEYS: [&str; 3] = ["class", "krshapedlogic", "finalizer"];

fn parse_genreconciler(
    attr: &Attribute,
    ident: &Ident,
    fields: &Option<FieldsInfo>,
    errors: &mut Errors,
) -> Option<GenReconciler> {
    let mut classes = Vec::new();
    let mut krshapedlogic = true;
    let mut finalizer = None;
    let mut given = BTreeSet::new();
    if !matches!(attr.meta, syn::Meta::Path(_)) {
        let parsed = attr.parse_nested_meta(|meta| {
            let key = key_of(&meta, "#[genreconciler(...)]", &GENRECONCILER_KEYS)?;
            given_once(&meta, &key, "#[genreconciler(...)]", &mut given)?;
            match key.as_str() {
                "class" => {
                    let value = meta.value()?;
                    let list = if value.peek(syn::token::Bracket) {
                        strings_of(&value.parse::<ExprArray>()?)?
                    } else {
                        vec![value.parse::<LitStr>()?]
                    };
                    for lit in list {
                        let key = lit.value();
                        if !is_qualified_name(&key).is_empty() {
                            return Err(syn::Error::new(
                                lit.span(),
                                format!("class annotation key {key:?} is not a qualified name; use e.g. \"networking.knative.dev/ingress.class\""),
                            ));
                        }
                        classes.push(key);
                    }
                }
                "krshapedlogic" => {
                    let lit: syn::LitBool = meta.value()?.parse()?;
                    krshapedlogic = lit.value;
                }
                "finalizer" => {
                    let lit = string_value(&meta)?;
                    if !is_qualified_name(&lit.value()).is_empty() {
                        return Err(syn::Error::new(
                            lit.span(),
                            "finalizer names are qualified names, e.g. \"addressableservices.samples.knative.dev\"",
                        ));
                    }
                    finalizer = Some(lit.value());
                }
                _ => unreachable_key(&meta)?,
            }
            Ok(())
        });
        if let Err(err) = parsed {
            errors.push(err);
            return None;
        }
    }
    let has_status = fields.as_ref().is_some_and(|f| f.status.is_some());
    if krshapedlogic && fields.is_some() && !has_status {
        errors.push(syn::Error::new_spanned(
            attr,
            format!(
                "#[genreconciler] on `{ident}`, which has no `status` field: the generated reconciler keeps \
                 status conditions and observedGeneration up to date. Add `pub status: Option<{ident}Status>` \
                 (a struct embedding kinject_types::duck::v1::Status), or write \
                 #[genreconciler(krshapedlogic = false)] to reconcile without status"
            ),
        ));
        return None;
    }
    Some(GenReconciler {
        classes,
        krshapedlogic,
        finalizer,
    })
}

/// The key of a nested meta, or an error naming the attribute, the unknown key,
/// the closest known key and the full list.
fn key_of(meta: &ParseNestedMeta<'_>, attr: &str, known: &[&str]) -> syn::Result<String> {
    let key = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
    if known.contains(&key.as_str()) {
        return Ok(key);
    }
    let shown = if key.is_empty() {
        let path = &meta.path;
        quote::quote!(#path).to_string().replace(' ', "")
    } else {
        key.clone()
    };
    let suggestion = known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| format!("did you mean `{k}`? "))
        .unwrap_or_default();
    Err(meta.error(format!(
        "unknown key `{shown}` in {attr}; {suggestion}known keys: {}",
        known.join(", ")
    )))
}

/// A key given twice in one attribute is an error, not "the last one wins".
fn given_once(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    attr: &str,
    given: &mut BTreeSet<String>,
) -> syn::Result<()> {
    if given.insert(key.to_owned()) {
        return Ok(());
    }
    Err(meta.error(format!("`{key}` is given twice in {attr}; keep one")))
}

fn unreachable_key(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    Err(meta.error("internal error: a known key has no parser"))
}

fn flag(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren) {
        let key = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
        return Err(meta.error(format!(
            "`{key}` is a flag and takes no value; write just `{key}`"
        )));
    }
    Ok(())
}

fn string_value(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    let key = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
    let value = meta.value()?;
    match value.parse::<Lit>()? {
        Lit::Str(s) => Ok(s),
        other => Err(syn::Error::new(
            other.span(),
            format!("`{key}` takes a string, e.g. {key} = \"...\""),
        )),
    }
}

fn string_list(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<String>> {
    let array: ExprArray = meta.value()?.parse()?;
    Ok(strings_of(&array)?.iter().map(LitStr::value).collect())
}

fn strings_of(array: &ExprArray) -> syn::Result<Vec<LitStr>> {
    not_empty(array)?;
    array
        .elems
        .iter()
        .map(|e| match e {
            Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Ok(s.clone()),
            other => Err(syn::Error::new(
                other.span(),
                "expected a string literal, e.g. [\"asvc\"]",
            )),
        })
        .collect()
}

/// An empty list says nothing a missing key would not, and usually hides a
/// mistake.
fn not_empty(array: &ExprArray) -> syn::Result<()> {
    if array.elems.is_empty() {
        return Err(syn::Error::new(
            array.span(),
            "the list is empty; list at least one value, or leave the key out",
        ));
    }
    Ok(())
}

fn verb_list(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<Verb>> {
    let array: ExprArray = meta.value()?.parse()?;
    not_empty(&array)?;
    array
        .elems
        .iter()
        .map(|e| {
            let name = match e {
                Expr::Path(p) => p.path.get_ident().map(Ident::to_string),
                _ => None,
            };
            name.as_deref().and_then(Verb::from_name).ok_or_else(|| {
                let known: Vec<&str> = Verb::ALL.iter().map(|v| v.name()).collect();
                syn::Error::new(
                    e.span(),
                    format!("unknown verb; known verbs: {}", known.join(", ")),
                )
            })
        })
        .collect()
}

fn doc_lines(attrs: &[Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => {
                    let line = s.value();
                    Some(line.strip_prefix(' ').unwrap_or(&line).trim_end().to_owned())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn parse(input: DeriveInput) -> Result<KindModel, String> {
        KindModel::from_derive_input(&input).map_err(|e| {
            e.into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        let generic = parse(parse_quote! {
            #[kind(group = "example.dev", version = "v1", namespaced)]
            pub struct Widget<T> { pub metadata: ObjectMeta, pub spec: T, pub status: Option<WidgetStatus> }
        });
        assert!(
            generic
                .unwrap_err()
                .starts_with("`Widget` derives Kind but is generic")
        );

        let private = parse(parse_quote! {
            #[kind(group = "example.dev", version = "v1", namespaced)]
            struct Widget { pub metadata: ObjectMeta, pub spec: WidgetSpec, pub status: Option<WidgetStatus> }
        });
        assert!(
            private.unwrap_err().contains("is not `pub`"),
            "a private kind cannot be used by the generated crate"
        );

        let twice = parse(parse_quote! {
            #[kind(group = "example.dev", version = "v1", version = "v2", namespaced)]
            pub struct Widget { pub metadata: ObjectMeta, pub spec: WidgetSpec, pub status: Option<WidgetStatus> }
        });
        assert_eq!(
            twice.unwrap_err(),
            "`version` is given twice in #[kind(...)]; keep one"
        );

        let empty_class = parse(parse_quote! {
            #[kind(group = "example.dev", version = "v1", namespaced)]
            #[genclient]
            #[genreconciler(class = [])]
            pub struct Widget { pub metadata: ObjectMeta, pub spec: WidgetSpec, pub status: Option<WidgetStatus> }
        });
        assert_eq!(
            empty_class.unwrap_err(),
            "the list is empty; list at least one value, or leave the key out"
        );

        let no_verbs = parse(parse_quote! {
            #[kind(group = "example.dev", version = "v1", namespaced)]
            #[genclient(only_verbs = [])]
            pub struct Widget { pub metadata: ObjectMeta, pub spec: WidgetSpec, pub status: Option<WidgetStatus> }
        });
        assert_eq!(
            no_verbs.unwrap_err(),
            "the list is empty; list at least one value, or leave the key out"
        );

        let an_enum = parse(parse_quote! {
            #[kind(group = "example.dev", version = "v1", namespaced)]
            pub enum Widget { A, B }
        });
        assert!(an_enum.unwrap_err().contains("can only be derived for a struct"));
    }

    #[test]
    fn reads_a_full_kind() {
        let model = parse(parse_quote! {
            /// AddressableService exposes a Service as an Addressable.
            ///
            /// Second paragraph.
            #[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced,
                   shortnames = ["asvc"], categories = ["all", "knative"])]
            #[genclient]
            #[genreconciler(class = "samples.knative.dev/class", finalizer = "example.com/fin")]
            pub struct AddressableService {
                pub metadata: ObjectMeta,
                pub spec: AddressableServiceSpec,
                pub status: Option<AddressableServiceStatus>,
            }
        })
        .unwrap();
        assert_eq!(model.kind(), "AddressableService");
        assert_eq!(
            (model.plural.as_str(), model.singular.as_str()),
            ("addressableservices", "addressableservice")
        );
        assert_eq!(model.scope, Scope::Namespaced);
        assert_eq!(model.short_names, ["asvc"]);
        assert_eq!(model.categories, ["all", "knative"]);
        assert_eq!(
            model.docs,
            [
                "AddressableService exposes a Service as an Addressable.",
                "",
                "Second paragraph."
            ]
        );
        assert!(model.status.is_some() && model.spec.is_some());
        let client = model.genclient.as_ref().unwrap();
        assert_eq!(client.verbs.len(), Verb::ALL.len());
        assert!(client.has_informer());
        let rec = model.genreconciler.as_ref().unwrap();
        assert_eq!(rec.classes, ["samples.knative.dev/class"]);
        assert!(rec.krshapedlogic);
        assert_eq!(model.finalizer_name(), "example.com/fin");
        assert_eq!(model.crd_name(), "addressableservices.samples.knative.dev");
    }

    #[test]
    fn reads_printer_columns_in_order_and_the_scale_subresource() {
        let model = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", namespaced,
                   printcolumn(name = "Replicas", type = "integer", json_path = ".spec.replicas"),
                   printcolumn(name = "Image", type = "string", json_path = ".spec.template.spec.containers[*].image",
                               description = "The images.", priority = 1),
                   scale(spec_replicas = ".spec.replicas", status_replicas = ".status.replicas",
                         label_selector = ".status.selector"))]
            pub struct Pool { metadata: ObjectMeta, spec: Spec, status: Option<Status> }
        })
        .unwrap();
        let names: Vec<_> = model
            .print_columns
            .iter()
            .map(|c| (c.name.as_str(), c.priority))
            .collect();
        assert_eq!(names, [("Replicas", 0), ("Image", 1)]);
        assert_eq!(model.print_columns[1].description.as_deref(), Some("The images."));
        assert_eq!(
            model.scale,
            Some(Scale {
                spec_replicas: ".spec.replicas".to_owned(),
                status_replicas: ".status.replicas".to_owned(),
                label_selector: Some(".status.selector".to_owned()),
            })
        );
    }

    #[test]
    fn refuses_bad_printer_columns_and_scale_paths_saying_how_to_fix_them() {
        let cases: [(DeriveInput, &str); 8] = [
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, printcolumn(name = "R", json_path = ".spec.r"))]
                pub struct P { metadata: ObjectMeta, spec: S, status: Option<T> } },
                "printcolumn(...) is missing `type`; add `type = \"integer\"`",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, printcolumn(name = "R", type = "int", json_path = ".spec.r"))]
                pub struct P { metadata: ObjectMeta, spec: S, status: Option<T> } },
                "column type \"int\" is not one kube-apiserver accepts; use one of integer, number, string, boolean, date",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, printcolumn(name = "R", type = "string", json_path = "spec.r"))]
                pub struct P { metadata: ObjectMeta, spec: S, status: Option<T> } },
                "\"spec.r\" must be a path into the object starting with `.`, e.g. \".spec.replicas\"",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, printcolumn(name = "R", type = "string", json_path = ".spec.r", priority = -1))]
                pub struct P { metadata: ObjectMeta, spec: S, status: Option<T> } },
                "`priority` must be between 0 and 2147483647",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, printcolumn(name = "R", type = "string", jsonpath = ".spec.r"))]
                pub struct P { metadata: ObjectMeta, spec: S, status: Option<T> } },
                "unknown key `jsonpath` in printcolumn(...) of #[kind]; did you mean `json_path`?",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, scale(spec_replicas = ".status.replicas", status_replicas = ".status.replicas"))]
                pub struct P { metadata: ObjectMeta, spec: S, status: Option<T> } },
                "\".status.replicas\" must be a path into the spec starting with `.spec.`, e.g. \".spec.replicas\"",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, scale(spec_replicas = ".spec.r[0]", status_replicas = ".status.replicas"))]
                pub struct P { metadata: ObjectMeta, spec: S, status: Option<T> } },
                "\".spec.r[0]\" is not a plain field path",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, scale(spec_replicas = ".spec.replicas", status_replicas = ".status.replicas"))]
                pub struct P { metadata: ObjectMeta, spec: S } },
                "scale(...) on `P` reads replicas from the status, but the kind has no `status` field",
            ),
        ];
        for (input, want) in cases {
            let err = parse(input).unwrap_err();
            assert!(err.contains(want), "{err}\n  does not contain: {want}");
        }
    }

    #[test]
    fn default_finalizer_is_plural_dot_group() {
        let model = parse(parse_quote! {
            #[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced)]
            #[genclient]
            #[genreconciler]
            pub struct SimpleDeployment { metadata: ObjectMeta, spec: Spec, status: Option<Status> }
        })
        .unwrap();
        assert_eq!(model.finalizer_name(), "simpledeployments.samples.knative.dev");
    }

    #[test]
    fn verbs_follow_only_skip_and_status() {
        let model = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", cluster_scoped)]
            #[genclient(non_namespaced, only_verbs = [get, list, watch, update_status])]
            pub struct Thing { metadata: ObjectMeta, spec: Spec }
        })
        .unwrap();
        assert_eq!(model.scope, Scope::Cluster);
        let verbs: Vec<_> = model.genclient.unwrap().verbs.into_iter().collect();
        assert_eq!(
            verbs,
            [Verb::Get, Verb::List, Verb::Watch],
            "no status field, so no status verbs"
        );

        let model = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", namespaced)]
            #[genclient(no_status, skip_verbs = [delete_collection])]
            pub struct Thing { metadata: ObjectMeta, spec: Spec, status: Option<S> }
        })
        .unwrap();
        let client = model.genclient.unwrap();
        assert!(!client.verbs.contains(&Verb::DeleteCollection));
        assert!(!client.verbs.contains(&Verb::UpdateStatus));
        assert!(client.no_status);
    }

    #[test]
    fn unknown_keys_name_the_attribute_and_suggest_a_fix() {
        let err = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", namespacd)]
            pub struct Thing { metadata: ObjectMeta }
        })
        .unwrap_err();
        assert!(
            err.contains("unknown key `namespacd` in #[kind(...)]; did you mean `namespaced`?"),
            "{err}"
        );

        let err = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", namespaced)]
            #[genreconciler(finaliser = "a.b/c")]
            pub struct Thing { metadata: ObjectMeta, status: Option<S> }
        })
        .unwrap_err();
        assert!(
            err.contains("unknown key `finaliser` in #[genreconciler(...)]; did you mean `finalizer`?"),
            "{err}"
        );
    }

    #[test]
    fn missing_group_version_and_scope_are_reported_together() {
        let err = parse(parse_quote! {
            #[kind(plural = "things")]
            pub struct Thing { metadata: ObjectMeta }
        })
        .unwrap_err();
        assert!(err.contains("missing `group`"), "{err}");
        assert!(err.contains("missing `version`"), "{err}");
        assert!(err.contains("add `namespaced` or `cluster_scoped`"), "{err}");
    }

    #[test]
    fn genreconciler_needs_an_informer() {
        for input in [
            parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] #[genreconciler] struct T { metadata: M, status: Option<S> } },
            parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] #[genclient(skip_verbs = [watch])] #[genreconciler] struct T { metadata: M, status: Option<S> } },
        ] {
            let err = parse(input).unwrap_err();
            assert!(
                err.contains("#[genreconciler] on `T` needs the client, informer and lister"),
                "{err}"
            );
        }
    }

    #[test]
    fn genreconciler_needs_status_unless_krshapedlogic_is_off() {
        let err = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", namespaced)]
            #[genreconciler]
            pub struct Thing { metadata: ObjectMeta, spec: Spec }
        })
        .unwrap_err();
        assert!(err.contains("has no `status` field"), "{err}");
        assert!(err.contains("krshapedlogic = false"), "{err}");

        let model = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", namespaced)]
            #[genclient]
            #[genreconciler(krshapedlogic = false)]
            pub struct Thing { metadata: ObjectMeta, spec: Spec }
        })
        .unwrap();
        assert!(!model.genreconciler.unwrap().krshapedlogic);
    }

    #[test]
    fn malformed_values_are_rejected_with_the_fix() {
        for (input, expected) in [
            (
                parse_quote! { #[kind(group = 1, version = "v1", namespaced)] struct T { metadata: M } },
                "`group` takes a string",
            ),
            (
                parse_quote! { #[kind(group = "Bad_Group", version = "v1", namespaced)] struct T { metadata: M } },
                "is not a DNS subdomain",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "1.0", namespaced)] struct T { metadata: M } },
                "is not a Kubernetes API version",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced = true)] struct T { metadata: M } },
                "`namespaced` is a flag",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced, cluster_scoped)] struct T { metadata: M } },
                "contradict each other",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] #[genclient(non_namespaced)] struct T { metadata: M } },
                "`non_namespaced` contradicts",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] #[genclient(only_verbs = [fetch])] struct T { metadata: M } },
                "unknown verb",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] struct T { metadata: M, status: S } },
                "`status` must be an `Option<...>`",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] struct T { metadata: M, data: D } },
                "unsupported field `data`",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] struct T { spec: S } },
                "has no `metadata` field",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] #[kind(plural = "ts")] struct T { metadata: M } },
                "given more than once",
            ),
            (
                parse_quote! { struct T { metadata: M } },
                "has no #[kind(...)] attribute",
            ),
            (
                parse_quote! { #[kind(group = "x.dev", version = "v1", namespaced)] #[genreconciler(class = "not a key")] struct T { metadata: M, status: Option<S> } },
                "is not a qualified name",
            ),
        ] {
            let err = parse(input).unwrap_err();
            assert!(err.contains(expected), "expected {expected:?} in {err:?}");
        }
    }

    #[test]
    fn pluralizes_like_kubernetes_generators() {
        for (kind, plural) in [
            ("AddressableService", "addressableservices"),
            ("SimpleDeployment", "simpledeployments"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Ingress", "ingresses"),
            ("Box", "boxes"),
            ("Patch", "patches"),
            ("Graph", "graphs"),
            ("Knife", "knives"),
            ("Leaf", "leaves"),
            ("Endpoints", "endpoints"),
        ] {
            assert_eq!(pluralize(kind), plural, "{kind}");
        }
    }

    #[test]
    fn detects_the_derive() {
        let input: DeriveInput = parse_quote! { #[derive(Clone, kinject_macros::Kind)] struct T {} };
        assert!(derives_kind(&input.attrs));
        let input: DeriveInput = parse_quote! { #[derive(Clone)] struct T {} };
        assert!(!derives_kind(&input.attrs));
    }

    #[test]
    fn validates_names() {}
}
