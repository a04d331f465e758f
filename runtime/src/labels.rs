//! Label selector matching against the compact label lists the informer cache
//! keeps, without building a map per object.
//!
//! The public selector type is kube's [`Selector`](kube::core::Selector) (built
//! from a map, a `LabelSelector` or expressions); it is compiled once per query.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::Selector;

/// An object's labels as the cache holds them: sorted by key.
pub(crate) type Labels = Box<[(Box<str>, Box<str>)]>;

/// Converts an object's labels into the cache's compact form.
pub(crate) fn compact(labels: Option<&std::collections::BTreeMap<String, String>>) -> Labels {
    labels
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
                .collect()
        })
        .unwrap_or_default()
}

fn get<'a>(labels: &'a [(Box<str>, Box<str>)], key: &str) -> Option<&'a str> {
    labels
        .binary_search_by(|(k, _)| (**k).cmp(key))
        .ok()
        .map(|i| &*labels[i].1)
}

#[derive(Debug, Clone)]
enum Requirement {
    Equal(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A label selector ready to test many label sets.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompiledSelector(Vec<Requirement>);

impl CompiledSelector {
    pub(crate) fn new(selector: &Selector) -> Self {
        let label_selector: LabelSelector = selector.clone().into();
        let mut reqs: Vec<Requirement> = label_selector
            .match_labels
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| Requirement::Equal(k, v))
            .collect();
        for expr in label_selector.match_expressions.unwrap_or_default() {
            let values = expr.values.unwrap_or_default();
            reqs.push(match expr.operator.as_str() {
                "In" => Requirement::In(expr.key, values),
                "NotIn" => Requirement::NotIn(expr.key, values),
                "Exists" => Requirement::Exists(expr.key),
                // kube writes `!=` as NotIn with one value and only these four
                // operators exist; anything else would be a kube bug, and matching
                // nothing is the safe reading of it.
                "DoesNotExist" => Requirement::DoesNotExist(expr.key),
                _ => Requirement::In(expr.key, Vec::new()),
            });
        }
        CompiledSelector(reqs)
    }

    pub(crate) fn selects_all(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn matches(&self, labels: &[(Box<str>, Box<str>)]) -> bool {
        self.0.iter().all(|req| match req {
            Requirement::Equal(k, v) => get(labels, k) == Some(v.as_str()),
            Requirement::In(k, vs) => get(labels, k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => get(labels, k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => get(labels, k).is_some(),
            Requirement::DoesNotExist(k) => get(labels, k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::core::Expression;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        compact(Some(&map))
    }

    #[test]
    fn equality_and_set_based_requirements() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let sel = |s: Selector| CompiledSelector::new(&s).matches(&l);
        assert!(sel(Selector::default()));
        assert!(sel(Selector::from_iter([("app", "web")])));
        assert!(!sel(Selector::from_iter([("app", "db")])));
        assert!(sel(Expression::In(
            "tier".into(),
            ["front".into(), "back".into()].into()
        )
        .into()));
        assert!(!sel(
            Expression::NotIn("tier".into(), ["front".into()].into()).into()
        ));
        assert!(sel(
            Expression::NotIn("missing".into(), ["x".into()].into()).into()
        ));
        assert!(sel(Expression::Exists("app".into()).into()));
        assert!(sel(Expression::DoesNotExist("owner".into()).into()));
        assert!(!sel(Expression::NotEqual("app".into(), "web".into()).into()));
        assert!(sel(Expression::NotEqual("app".into(), "db".into()).into()));
    }

    #[test]
    fn compact_labels_are_sorted_for_lookup() {
        let l = labels(&[("z", "1"), ("a", "2"), ("m", "3")]);
        assert_eq!(get(&l, "a"), Some("2"));
        assert_eq!(get(&l, "m"), Some("3"));
        assert_eq!(get(&l, "b"), None);
    }
}
