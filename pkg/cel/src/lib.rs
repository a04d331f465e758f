//! CRD validation rules (`x-kubernetes-validations`), checked and evaluated
//! as kube-apiserver does, so that testenv, `kinject validate` and the CRD
//! generator refuse what a cluster refuses.
//!
//! Two moments, as in kube-apiserver:
//!
//! - **When a CRD is written** ([`check_rules`]): every rule and
//!   `messageExpression` must compile, the fields a rule reads must be in the
//!   schema, `optionalOldSelf` needs a rule that reads `oldSelf`, a
//!   `fieldPath` must name a field, and the estimated cost of each rule, and
//!   of all of them, must stay within kube-apiserver's limits.
//! - **When an object is written** ([`Rules::evaluate`]): each rule runs
//!   against its node of the object (and, on an update, the stored object
//!   as `oldSelf`), and a failure becomes kube-apiserver's field error.
//!
//! Programs are the `cel` crate's, run with the Kubernetes CEL libraries of
//! [`kube_cel`]; a function they lack is an error that names the function,
//! never a rule that silently passes. What those crates do not do is here:
//! the checks kube-apiserver makes when it compiles a rule against the
//! schema's types (the `cel` crate parses without a type checker), an
//! estimate of the rule cost in kube-apiserver's model, values typed and
//! named by their schema as kube-apiserver types them, `oldSelf` correlated
//! by list type, ratcheting, and the error shapes.
#![warn(missing_docs)]

mod check;
mod convert;
mod cost;
mod evaluate;
mod functions;
mod names;

pub use check::{ProblemKind, RuleProblem, check_rules};
pub use cost::{RULE_COST_LIMIT, SCHEMA_COST_LIMIT};
pub use evaluate::{FailureKind, RuleFailure, Rules};
