//! [`KindModel`]: what one kind's struct and markers say, read and checked
//! once for the derive and the generator.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, DeriveInput, Ident, Type};

use crate::attr::{Errors, doc_lines, find_single};
use crate::fields::{KindFields, check_declaration, read_fields};
use crate::genclient::{self, GenClient};
use crate::genreconciler::{self, GenReconciler};
use crate::kind::{self, Group, Hub, KindMarker, Plural, Scope, Singular, Storage, Variant, Version};

/// The marker attributes this crate owns.
pub const MARKERS: [&str; 3] = ["kind", "genclient", "genreconciler"];

/// Everything the derive and the generator know about one kind.
#[derive(Clone, Debug)]
pub struct KindModel {
    /// The struct's name, which is also the Kubernetes kind.
    pub ident: Ident,
    /// The `#[kind(...)]` markers, defaults filled in, in the order
    /// [`KindMarker`] lists their types (repeated ones in the order written).
    markers: Vec<KindMarker>,
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

    /// The `#[kind(...)]` markers, defaults filled in (a plural and a
    /// singular are always there).
    pub fn markers(&self) -> &[KindMarker] {
        &self.markers
    }

    /// The first marker of type `M`: the only one, but for `printcolumn`.
    pub fn marker<M: Variant>(&self) -> Option<&M> {
        self.markers.iter().find_map(M::of)
    }

    /// Every marker of type `M`, in the order written.
    pub fn markers_of<M: Variant>(&self) -> impl Iterator<Item = &M> {
        self.markers.iter().filter_map(M::of)
    }

    /// The API group (`samples.knative.dev`; empty for the core group).
    pub fn group(&self) -> &str {
        self.marker::<Group>().map_or("", |group| &group.0)
    }

    /// The API version (`v1alpha1`).
    pub fn version(&self) -> &str {
        self.marker::<Version>().map_or("", |version| &version.0)
    }

    /// The resource name (`addressableservices`).
    pub fn plural(&self) -> &str {
        self.marker::<Plural>().map_or("", |plural| &plural.0)
    }

    /// The lower-case singular name (`addressableservice`).
    pub fn singular(&self) -> &str {
        self.marker::<Singular>().map_or("", |singular| &singular.0)
    }

    /// Namespaced or cluster-scoped.
    pub fn scope(&self) -> Scope {
        self.marker::<Scope>().copied().unwrap_or(Scope::Namespaced)
    }

    /// `storage`: of the kind's versions, this one is what the API server
    /// stores.
    pub fn storage(&self) -> bool {
        self.marker::<Storage>().is_some()
    }

    /// `hub`: of the kind's versions, this one is what the others convert
    /// to and from.
    pub fn hub(&self) -> bool {
        self.marker::<Hub>().is_some()
    }

    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group().is_empty() {
            self.version().to_owned()
        } else {
            format!("{}/{}", self.group(), self.version())
        }
    }

    /// The default finalizer name, `<plural>.<group>`, unless overridden.
    pub fn finalizer_name(&self) -> String {
        self.genreconciler
            .as_ref()
            .and_then(|r| r.finalizer.clone())
            .unwrap_or_else(|| format!("{}.{}", self.plural(), self.group()))
    }

    /// The name of the kind's CRD (`addressableservices.samples.knative.dev`).
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }

    /// The `kinject_types::CrdMarker` values of the kind, as the derive emits
    /// them for `KindInfo::MARKERS`: each marker's (see
    /// [`Marker::crd_marker`](kind::Marker::crd_marker)), then the status subresource when the struct
    /// has a `status` field.
    pub fn crd_markers(&self) -> Vec<TokenStream> {
        let status = self
            .status
            .is_some()
            .then(|| quote!(::kinject_types::CrdMarker::StatusSubresource));
        self.markers
            .iter()
            .filter_map(KindMarker::crd_marker)
            .chain(status)
            .collect()
    }

    /// Reads the model from a struct carrying `#[derive(Kind)]` and its markers.
    ///
    /// All problems found are returned together, each spanning the attribute or
    /// field at fault and saying how to fix it.
    pub fn from_derive_input(input: &DeriveInput) -> syn::Result<KindModel> {
        let mut errors = Errors::default();
        check_declaration(input, &mut errors);
        let fields = read_fields(input, &mut errors);
        let has_status = fields.as_ref().map(|f| f.status.is_some());
        let context = kind::KindContext {
            ident: &input.ident,
            has_status,
        };
        let markers = read_kind(input, &context, &mut errors);
        let scope = markers
            .as_ref()
            .and_then(|markers| markers.iter().find_map(Scope::of).copied());
        let genclient = find_single(&input.attrs, "genclient", &mut errors)
            .map(|attr| genclient::parse_genclient(attr, scope, has_status == Some(true), &mut errors));
        let genreconciler = genreconciler::read_genreconciler(
            input,
            has_status,
            genclient.as_ref().map(Option::as_ref),
            &mut errors,
        );
        errors.finish()?;
        let (Some(markers), Some(KindFields { spec, status })) = (markers, fields) else {
            // Both are only None when an error was recorded above.
            return Err(syn::Error::new(
                input.ident.span(),
                "invalid #[derive(Kind)] input",
            ));
        };
        Ok(KindModel {
            ident: input.ident.clone(),
            markers,
            docs: doc_lines(&input.attrs),
            spec,
            status,
            genclient: genclient.flatten(),
            genreconciler,
        })
    }
}

/// The markers of the `#[kind(...)]` of `input`, which every kind needs.
fn read_kind(
    input: &DeriveInput,
    context: &kind::KindContext<'_>,
    errors: &mut Errors,
) -> Option<Vec<KindMarker>> {
    let Some(attr) = find_single(&input.attrs, "kind", errors) else {
        errors.push(syn::Error::new(
            input.ident.span(),
            format!(
                "`{}` derives Kind but has no #[kind(...)] attribute; add \
                 #[kind(group = \"<api group>\", version = \"<version>\", namespaced)]",
                input.ident
            ),
        ));
        return None;
    };
    kind::parse_kind(attr, context, errors)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genclient::ClientVerb;
    use crate::kind::{Categories, PrintColumn, Scale, ShortNames, pluralize};
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
            (model.plural(), model.singular()),
            ("addressableservices", "addressableservice")
        );
        assert_eq!(model.scope(), Scope::Namespaced);
        assert_eq!(model.marker::<ShortNames>().unwrap().0, ["asvc"]);
        assert_eq!(model.marker::<Categories>().unwrap().0, ["all", "knative"]);
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
        assert_eq!(client.verbs.len(), ClientVerb::ALL.len());
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
        let columns: Vec<&PrintColumn> = model.markers_of::<PrintColumn>().collect();
        let names: Vec<_> = columns.iter().map(|c| (c.name.as_str(), c.priority)).collect();
        assert_eq!(names, [("Replicas", 0), ("Image", 1)]);
        assert_eq!(columns[1].description.as_deref(), Some("The images."));
        assert_eq!(
            model.marker::<Scale>(),
            Some(&Scale {
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
        assert_eq!(model.scope(), Scope::Cluster);
        let verbs: Vec<_> = model.genclient.unwrap().verbs.into_iter().collect();
        assert_eq!(
            verbs,
            [ClientVerb::Get, ClientVerb::List, ClientVerb::Watch],
            "no status field, so no status verbs"
        );

        let model = parse(parse_quote! {
            #[kind(group = "x.dev", version = "v1", namespaced)]
            #[genclient(no_status, skip_verbs = [delete_collection])]
            pub struct Thing { metadata: ObjectMeta, spec: Spec, status: Option<S> }
        })
        .unwrap();
        let client = model.genclient.unwrap();
        assert!(!client.verbs.contains(&ClientVerb::DeleteCollection));
        assert!(!client.verbs.contains(&ClientVerb::UpdateStatus));
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
