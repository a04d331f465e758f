//! `printcolumn(...)`: the columns `kubectl get` shows.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::quote;
use syn::LitStr;
use syn::meta::ParseNestedMeta;

use super::marker::{Marker, check_json_path};
use crate::attr::{given_once, key_of, string_value, unreachable_key};

/// `printcolumn(name = .., type = .., json_path = ..)` in `#[kind]`: a column
/// `kubectl get` shows (kubebuilder's `+kubebuilder:printcolumn`). Columns are
/// listed one marker each, like kubebuilder's, and shown in marker order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

const KEYS: [&str; 6] = ["name", "type", "json_path", "description", "format", "priority"];
/// The column types kube-apiserver accepts.
const TYPES: [&str; 5] = ["integer", "number", "string", "boolean", "date"];
/// The column formats kube-apiserver accepts.
const FORMATS: [&str; 8] = [
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
];

impl Marker for PrintColumn {
    const KEYS: &'static [&'static str] = &["printcolumn"];
    const REPEATABLE: bool = true;

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        let given = Given::parse(meta)?;
        let missing = |what: &str, example: &str| {
            meta.error(format!(
                "printcolumn(...) is missing `{what}`; add `{what} = {example}`"
            ))
        };
        let name = given.name.ok_or_else(|| missing("name", "\"Replicas\""))?;
        let type_ = given.type_.ok_or_else(|| missing("type", "\"integer\""))?;
        let json_path = given
            .json_path
            .ok_or_else(|| missing("json_path", "\".spec.replicas\""))?;
        if name.value().trim().is_empty() {
            return Err(syn::Error::new(
                name.span(),
                "the column `name` is empty; give it a header, e.g. \"Replicas\"",
            ));
        }
        one_of(&type_, "column type", &TYPES)?;
        check_json_path(&json_path, ".", "the object")?;
        if let Some(format) = &given.format {
            one_of(format, "column format", &FORMATS)?;
        }
        Ok(PrintColumn {
            name: name.value(),
            type_: type_.value(),
            json_path: json_path.value(),
            description: given.description,
            format: given.format.map(|f| f.value()),
            priority: given.priority,
        })
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        let (name, type_, json_path, priority) = (&self.name, &self.type_, &self.json_path, self.priority);
        let description = self.description.as_deref().unwrap_or_default();
        let format = self.format.as_deref().unwrap_or_default();
        Some(quote! {
            ::kinject_types::CrdMarker::PrintColumn(::kinject_types::PrinterColumn {
                name: #name, type_: #type_, json_path: #json_path,
                description: #description, format: #format, priority: #priority,
            })
        })
    }
}

/// The keys of one `printcolumn(...)` as written, before the required ones
/// are known to be there.
#[derive(Default)]
struct Given {
    name: Option<LitStr>,
    type_: Option<LitStr>,
    json_path: Option<LitStr>,
    description: Option<String>,
    format: Option<LitStr>,
    priority: i32,
}

impl Given {
    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Given> {
        let mut given = Given::default();
        let mut keys = BTreeSet::new();
        meta.parse_nested_meta(|inner| {
            let key = key_of(&inner, "printcolumn(...) of #[kind]", &KEYS)?;
            given_once(&inner, &key, "printcolumn(...) of #[kind]", &mut keys)?;
            match key.as_str() {
                "name" => given.name = Some(string_value(&inner)?),
                "type" => given.type_ = Some(string_value(&inner)?),
                "json_path" => given.json_path = Some(string_value(&inner)?),
                "description" => given.description = Some(string_value(&inner)?.value()),
                "format" => given.format = Some(string_value(&inner)?),
                "priority" => given.priority = priority(&inner)?,
                _ => unreachable_key(&inner)?,
            }
            Ok(())
        })?;
        Ok(given)
    }
}

fn priority(meta: &ParseNestedMeta<'_>) -> syn::Result<i32> {
    let value: syn::LitInt = meta
        .value()?
        .parse()
        .map_err(|e| syn::Error::new(e.span(), "`priority` takes a whole number, e.g. priority = 1"))?;
    value
        .base10_parse::<i32>()
        .ok()
        .filter(|p| *p >= 0)
        .ok_or_else(|| syn::Error::new(value.span(), "`priority` must be between 0 and 2147483647"))
}

/// An error spanning `value` unless it is one of `accepted`.
fn one_of(value: &LitStr, what: &str, accepted: &[&str]) -> syn::Result<()> {
    if accepted.contains(&value.value().as_str()) {
        return Ok(());
    }
    Err(syn::Error::new(
        value.span(),
        format!(
            "{what} {:?} is not one kube-apiserver accepts; use one of {}",
            value.value(),
            accepted.join(", ")
        ),
    ))
}
