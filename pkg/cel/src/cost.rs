//! An estimate of a rule's worst-case cost in kube-apiserver's model, so a
//! CRD whose rules kube-apiserver would refuse as too expensive is refused
//! here too.
//!
//! kube-apiserver's estimator (cel-go's `checker.Cost`) charges each call,
//! selection and variable about 1, string and list work by a tenth of the
//! largest size the schema allows, and a comprehension its body once per
//! element of the largest list or map the schema allows. A list, map or
//! string without `maxItems`, `maxProperties` or `maxLength` is as large as
//! a 3 MiB request can make it. A rule runs once per node it sits on, so its
//! cost is multiplied by the largest number of such nodes (a rule on the
//! items of an unbounded list runs up to a million times). This follows
//! that model in its orders of magnitude, not to the unit: it catches the
//! rules kube-apiserver refuses (nested loops over unbounded lists, string
//! work inside one), and the figures it prints are its own.

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

use crate::names::{Scope, element_of, key_schema, schema_of};

/// kube-apiserver's limit on the estimated cost of one rule
/// (`StaticEstimatedCostLimit`).
pub const RULE_COST_LIMIT: u64 = 10_000_000;

/// kube-apiserver's limit on the estimated cost of all the rules of one
/// schema (`StaticEstimatedCRDCostLimit`).
pub const SCHEMA_COST_LIMIT: u64 = 100_000_000;

/// kube-apiserver's largest request body, which bounds every unbounded size.
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// The functions whose cost grows with the size of the string or list they
/// read.
const SIZED: &[&str] = &[
    "_==_",
    "_!=_",
    "_+_",
    "@in",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "join",
    "trim",
    "substring",
    "find",
    "findAll",
    "format",
    "isSorted",
    "sum",
    "min",
    "max",
];

/// The most elements (or characters) a value of `schema` can have.
pub(crate) fn max_size(schema: &Value) -> u64 {
    let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => bound("maxItems").unwrap_or_else(|| {
            let item = schema.get("items").map_or(1, min_serialized_size);
            MAX_REQUEST_BYTES / (item + 1)
        }),
        Some("object") => bound("maxProperties").unwrap_or_else(|| {
            // `"":` before each value, `,` after.
            let value = schema.get("additionalProperties").map_or(1, min_serialized_size);
            MAX_REQUEST_BYTES / (value + 4)
        }),
        Some("string") => bound("maxLength").unwrap_or(MAX_REQUEST_BYTES - 2),
        _ => 1,
    }
}

/// The fewest bytes a value of `schema` takes in JSON.
fn min_serialized_size(schema: &Value) -> u64 {
    match schema.get("type").and_then(Value::as_str) {
        Some("string" | "array" | "object") => 2,
        Some("boolean") => 4,
        _ => 1,
    }
}

/// The estimated worst-case cost of evaluating `expr` once.
pub(crate) fn estimate(expr: &IdedExpr, scope: &Scope<'_>) -> u64 {
    match &expr.expr {
        Expr::Literal(_) | Expr::Unspecified => 0,
        Expr::Ident(_) => 1,
        Expr::Select(select) => estimate(&select.operand, scope).saturating_add(1),
        Expr::List(list) => list
            .elements
            .iter()
            .fold(10, |sum, element| sum.saturating_add(estimate(element, scope))),
        Expr::Map(map) => entries_cost(&map.entries, scope),
        Expr::Struct(object) => entries_cost(&object.entries, scope),
        Expr::Call(call) => {
            let operands: Vec<&IdedExpr> = call.target.iter().map(|t| &**t).chain(call.args.iter()).collect();
            let inputs = operands
                .iter()
                .fold(0u64, |sum, operand| sum.saturating_add(estimate(operand, scope)));
            let work = if SIZED.contains(&call.func_name.as_str()) {
                let sizes = operands.iter().map(|operand| size_of(operand, scope));
                // Equality stops at the end of the shorter value; the other
                // functions read all of the largest.
                let size = if matches!(call.func_name.as_str(), "_==_" | "_!=_") {
                    sizes.map(|size| size.unwrap_or(1)).min()
                } else {
                    sizes.flatten().max()
                };
                size.unwrap_or(1).div_ceil(10).max(1)
            } else {
                1
            };
            inputs.saturating_add(work)
        }
        Expr::Comprehension(comprehension) => {
            let range = schema_of(&comprehension.iter_range, scope);
            let iterations = match (&comprehension.iter_range.expr, range) {
                (_, Some(schema)) => max_size(schema),
                (Expr::List(list), None) => list.elements.len() as u64,
                _ => 1,
            };
            let element = range.and_then(|schema| {
                if schema.get("type").and_then(Value::as_str) == Some("object") {
                    Some(key_schema())
                } else {
                    element_of(schema)
                }
            });
            let inner = scope
                .with(&comprehension.iter_var, element)
                .with(&comprehension.accu_var, None);
            let body = estimate(&comprehension.loop_cond, &inner)
                .saturating_add(estimate(&comprehension.loop_step, &inner));
            estimate(&comprehension.iter_range, scope)
                .saturating_add(estimate(&comprehension.accu_init, scope))
                .saturating_add(iterations.saturating_mul(body))
                .saturating_add(estimate(&comprehension.result, &inner))
        }
    }
}

fn entries_cost(entries: &[kube_cel::cel::common::ast::IdedEntryExpr], scope: &Scope<'_>) -> u64 {
    entries.iter().fold(30, |sum, entry| {
        let parts = match &entry.expr {
            EntryExpr::MapEntry(pair) => {
                estimate(&pair.key, scope).saturating_add(estimate(&pair.value, scope))
            }
            EntryExpr::StructField(field) => estimate(&field.value, scope),
        };
        sum.saturating_add(parts)
    })
}

/// The largest size of the string, list or map `expr` computes, when the
/// schema or a literal says.
fn size_of(expr: &IdedExpr, scope: &Scope<'_>) -> Option<u64> {
    match &expr.expr {
        Expr::Literal(kube_cel::cel::common::ast::LiteralValue::String(text)) => {
            Some(text.inner().len() as u64)
        }
        Expr::List(list) => Some(list.elements.len() as u64),
        _ => schema_of(expr, scope).map(max_size),
    }
}
