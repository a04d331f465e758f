//! The resources a stored CRD serves, and serving them or no longer.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::jsonpath::JsonPath;
use crate::registry::Registry;
use crate::registry::resource::{
    CREATION_TIMESTAMP_DESCRIPTION, Column, KindImpl, ResourceDef, ScalePaths, json_path_pointer,
};
use crate::registry::schema::Schema;
use crate::store::{ObjKey, ResKey};

use super::s;

/// The columns kube-apiserver's table convertor serves for a version: Age when the
/// version has none; otherwise the columns up to the first whose JSONPath does not
/// parse, as kube-apiserver keeps the convertor it had built when it gave up.
fn printer_columns(version: &Value) -> Vec<Column> {
    let given = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if given.is_empty() {
        return JsonPath::parse("{.metadata.creationTimestamp}")
            .map(|path| Column {
                name: "Age".into(),
                ty: "date".into(),
                format: String::new(),
                description: CREATION_TIMESTAMP_DESCRIPTION.into(),
                priority: 0,
                path,
            })
            .into_iter()
            .collect();
    }
    given
        .iter()
        .map_while(|c| {
            let json_path = s(c, "/jsonPath");
            let path = JsonPath::parse(&format!("{{{json_path}}}")).ok()?;
            let description = match s(c, "/description") {
                "" => format!("Custom resource definition column (in JSONPath format): {json_path}"),
                d => d.to_owned(),
            };
            Some(Column {
                name: s(c, "/name").to_owned(),
                ty: s(c, "/type").to_owned(),
                format: s(c, "/format").to_owned(),
                description,
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path,
            })
        })
        .collect()
}

/// The resource definitions a CRD serves, one per served version.
pub(crate) fn defs(crd: &Value, converter: Option<Arc<dyn crate::Converter>>) -> Vec<ResourceDef> {
    let group = s(crd, "/spec/group");
    let kind = s(crd, "/spec/names/kind");
    let plural = s(crd, "/spec/names/plural");
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        x => x.to_owned(),
    };
    let list_kind = match s(crd, "/spec/names/listKind") {
        "" => format!("{kind}List"),
        x => x.to_owned(),
    };
    let strings = |ptr: &str| -> Vec<String> {
        crd.pointer(ptr)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // kube-apiserver stores every object in the storage version; with the
    // `None` strategy converting is rewriting `apiVersion`. A webhook's
    // conversion testenv makes through the CRD's registered converter, or
    // else by calling the webhook.
    let converts_by_webhook = s(crd, "/spec/conversion/strategy") == "Webhook";
    let webhook_conversion = converts_by_webhook && converter.is_none();
    let converter = converts_by_webhook.then(|| {
        let converter = converter.unwrap_or_else(|| {
            Arc::new(crate::conversion::WebhookConverter(
                crate::conversion::ConversionWebhook::of(crd),
            ))
        });
        let served = versions
            .iter()
            .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
            .map(|v| format!("{group}/{}", s(v, "/name")))
            .collect();
        (converter, served)
    });
    let storage_api_version = super::storage_version(crd).map(|v| format!("{group}/{}", s(v, "/name")));
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
        .map(|v| {
            let columns = printer_columns(v);
            ResourceDef {
                group: group.to_owned(),
                version: s(v, "/name").to_owned(),
                plural: plural.to_owned(),
                singular: singular.clone(),
                kind: kind.to_owned(),
                list_kind: list_kind.clone(),
                namespaced: s(crd, "/spec/scope") == "Namespaced",
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status: v.pointer("/subresources/status").is_some(),
                generation: true,
                allow_create_on_update: false,
                allow_unconditional_update: false,
                return_deleted_object: false,
                deletecollection: true,
                create_only: false,
                token_request: false,
                imp: KindImpl::Custom(Arc::new(Schema::new(
                    v.pointer("/schema/openAPIV3Schema").cloned().unwrap_or_else(
                        || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                    ),
                ))),
                columns,
                scale: v.pointer("/subresources/scale").map(|sc| ScalePaths {
                    spec_replicas: json_path_pointer(s(sc, "/specReplicasPath")),
                    status_replicas: json_path_pointer(s(sc, "/statusReplicasPath")),
                    label_selector: Some(s(sc, "/labelSelectorPath"))
                        .filter(|p| !p.is_empty())
                        .map(json_path_pointer),
                }),
                storage_api_version: storage_api_version.clone(),
                converter: converter.clone(),
                webhook_conversion,
            }
        })
        .collect()
}

impl Registry {
    /// Serves what a stored CRD defines, replacing what it defined before.
    pub(crate) fn sync_crd(&mut self, crd: &Value) {
        let group = s(crd, "/spec/group").to_owned();
        let plural = s(crd, "/spec/names/plural").to_owned();
        self.resources
            .retain(|d| !(d.is_custom() && d.group == group && d.plural == plural));
        let converter = self.converters.get(s(crd, "/metadata/name")).cloned();
        self.resources
            .extend(defs(crd, converter).into_iter().map(Arc::new));
        self.store.open_window(&ResKey::new(&group, &plural));
    }

    /// Deletes every instance of a CRD's resource and stops serving it.
    pub(crate) fn drop_crd(&mut self, crd: &Value) {
        let group = s(crd, "/spec/group").to_owned();
        let plural = s(crd, "/spec/names/plural").to_owned();
        let res = ResKey::new(&group, &plural);
        let keys: Vec<ObjKey> = self.store.iter(&res).map(|(k, _)| k.clone()).collect();
        for k in keys {
            self.store.remove(&res, &k);
        }
        self.store.drop_resource(&res);
        self.resources
            .retain(|d| !(d.is_custom() && d.group == group && d.plural == plural));
    }
}
