//! Label selector matching against the interned label ids the informer cache
//! keeps, without building a map per object.
//!
//! The public selector type is kube's [`Selector`](kube::core::Selector) (built
//! from a map, a `LabelSelector` or expressions); it is compiled once per query
//! and then resolved against the cache's [`Interner`], so testing one object
//! compares a few integers held in its cache entry: a list by label touches no
//! other memory per object than the entry it walks past anyway.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::Selector;

/// A label key or value, interned in one cache's [`Interner`].
pub(crate) type Sym = u32;

/// Every label key and value of one cache, each held once however many objects
/// carry it (`app=web` on ten thousand pods costs its bytes once), and counted,
/// so a string no object carries any more is freed.
#[derive(Default)]
pub(crate) struct Interner {
    ids: HashMap<Arc<str>, Sym>,
    /// By id: the string and how many label keys and values refer to it.
    slots: Vec<Option<(Arc<str>, u32)>>,
    free: Vec<Sym>,
}

impl Interner {
    fn intern(&mut self, text: &str) -> Sym {
        if let Some(&id) = self.ids.get(text) {
            if let Some((_, refs)) = &mut self.slots[id as usize] {
                *refs += 1;
            }
            return id;
        }
        let text: Arc<str> = text.into();
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(None);
                // Four billion distinct label strings in one cache would not
                // fit in memory long before the ids run out.
                Sym::try_from(self.slots.len() - 1).unwrap_or(Sym::MAX)
            }
        };
        self.slots[id as usize] = Some((text.clone(), 1));
        self.ids.insert(text, id);
        id
    }

    fn release(&mut self, id: Sym) {
        let Some(slot) = self.slots.get_mut(id as usize) else {
            return;
        };
        let last = match slot {
            Some((_, refs)) if *refs > 1 => {
                *refs -= 1;
                false
            }
            Some(_) => true,
            None => false,
        };
        if last && let Some((text, _)) = slot.take() {
            self.ids.remove(&*text);
            self.free.push(id);
        }
    }

    fn lookup(&self, text: &str) -> Option<Sym> {
        self.ids.get(text).copied()
    }

    /// An object's labels as the cache holds them.
    pub(crate) fn labels(&mut self, labels: Option<&BTreeMap<String, String>>) -> Labels {
        let mut pairs: Vec<(Sym, Sym)> = labels
            .into_iter()
            .flatten()
            .map(|(k, v)| (self.intern(k), self.intern(v)))
            .collect();
        pairs.sort_unstable();
        Labels::new(&pairs)
    }

    /// Gives back the strings of labels leaving the cache.
    pub(crate) fn release_labels(&mut self, labels: &Labels) {
        for &(k, v) in labels.pairs() {
            self.release(k);
            self.release(v);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// How many label pairs a cache entry holds without a separate allocation:
/// most objects carry a handful, and reading them in place is what keeps a
/// list by label from a cache miss per object.
const INLINE: usize = 4;

/// An object's labels as interned `(key, value)` ids, sorted by key id.
pub(crate) enum Labels {
    Inline { len: u8, pairs: [(Sym, Sym); INLINE] },
    Spilled(Box<[(Sym, Sym)]>),
}

impl Labels {
    fn new(pairs: &[(Sym, Sym)]) -> Self {
        match u8::try_from(pairs.len()) {
            Ok(len) if pairs.len() <= INLINE => {
                let mut inline = [(0, 0); INLINE];
                inline[..pairs.len()].copy_from_slice(pairs);
                Labels::Inline { len, pairs: inline }
            }
            _ => Labels::Spilled(pairs.into()),
        }
    }

    fn pairs(&self) -> &[(Sym, Sym)] {
        match self {
            Labels::Inline { len, pairs } => &pairs[..usize::from(*len)],
            Labels::Spilled(pairs) => pairs,
        }
    }

    fn get(&self, key: Sym) -> Option<Sym> {
        let pairs = self.pairs();
        pairs
            .binary_search_by_key(&key, |&(k, _)| k)
            .ok()
            .map(|i| pairs[i].1)
    }
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

    /// The selector in `interner`'s ids, or `None` when no object of the cache
    /// can match (it requires a key or value no object carries).
    pub(crate) fn resolve(&self, interner: &Interner) -> Option<ResolvedSelector> {
        let mut reqs = Vec::with_capacity(self.0.len());
        let known =
            |values: &[String]| -> Vec<Sym> { values.iter().filter_map(|v| interner.lookup(v)).collect() };
        for req in &self.0 {
            // A key no object carries: it cannot be required, and excluding it
            // excludes nothing.
            reqs.push(match req {
                Requirement::Equal(k, v) => Resolved::Equal(interner.lookup(k)?, interner.lookup(v)?),
                Requirement::In(k, vs) => Resolved::In(interner.lookup(k)?, known(vs)),
                Requirement::Exists(k) => Resolved::Exists(interner.lookup(k)?),
                Requirement::NotIn(k, vs) => match interner.lookup(k) {
                    Some(k) => Resolved::NotIn(k, known(vs)),
                    None => continue,
                },
                Requirement::DoesNotExist(k) => match interner.lookup(k) {
                    Some(k) => Resolved::DoesNotExist(k),
                    None => continue,
                },
            });
        }
        Some(ResolvedSelector(reqs))
    }
}

#[derive(Debug)]
enum Resolved {
    Equal(Sym, Sym),
    In(Sym, Vec<Sym>),
    NotIn(Sym, Vec<Sym>),
    Exists(Sym),
    DoesNotExist(Sym),
}

/// A selector in one cache's ids, valid while that cache is locked.
#[derive(Debug)]
pub(crate) struct ResolvedSelector(Vec<Resolved>);

impl ResolvedSelector {
    pub(crate) fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|req| match req {
            Resolved::Equal(k, v) => labels.get(*k) == Some(*v),
            Resolved::In(k, vs) => labels.get(*k).is_some_and(|l| vs.contains(&l)),
            Resolved::NotIn(k, vs) => labels.get(*k).is_none_or(|l| !vs.contains(&l)),
            Resolved::Exists(k) => labels.get(*k).is_some(),
            Resolved::DoesNotExist(k) => labels.get(*k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Expression;

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality_and_set_based_requirements() {
        let mut interner = Interner::default();
        let l = interner.labels(Some(&map(&[("app", "web"), ("tier", "front")])));
        // Strings another object carries, so they resolve.
        interner.labels(Some(&map(&[("app", "db"), ("owner", "x"), ("tier", "back")])));
        let sel = |s: Selector| {
            CompiledSelector::new(&s)
                .resolve(&interner)
                .is_some_and(|r| r.matches(&l))
        };
        assert!(sel(Selector::default()));
        assert!(sel(Selector::from_iter([("app", "web")])));
        assert!(!sel(Selector::from_iter([("app", "db")])));
        assert!(!sel(Selector::from_iter([("app", "nowhere")])));
        assert!(sel(Expression::In(
            "tier".into(),
            ["front".into(), "back".into()].into()
        )
        .into()));
        assert!(!sel(
            Expression::NotIn("tier".into(), ["front".into()].into()).into()
        ));
        assert!(sel(
            Expression::NotIn("tier".into(), ["nowhere".into()].into()).into()
        ));
        assert!(sel(
            Expression::NotIn("missing".into(), ["x".into()].into()).into()
        ));
        assert!(sel(Expression::Exists("app".into()).into()));
        assert!(!sel(Expression::Exists("missing".into()).into()));
        assert!(sel(Expression::DoesNotExist("owner".into()).into()));
        assert!(sel(Expression::DoesNotExist("missing".into()).into()));
        assert!(!sel(Expression::NotEqual("app".into(), "web".into()).into()));
        assert!(sel(Expression::NotEqual("app".into(), "db".into()).into()));
    }

    #[test]
    fn many_labels_spill_out_of_the_entry_and_still_match() {
        let mut interner = Interner::default();
        let pairs: Vec<(String, String)> = (0..9).map(|i| (format!("k{i}"), format!("v{i}"))).collect();
        let l = interner.labels(Some(&pairs.iter().cloned().collect()));
        assert!(matches!(l, Labels::Spilled(_)));
        for (k, v) in &pairs {
            let sel = CompiledSelector::new(&Expression::Equal(k.clone(), v.clone()).into());
            assert!(sel.resolve(&interner).is_some_and(|r| r.matches(&l)), "{k}={v}");
        }
    }

    #[test]
    fn strings_live_while_some_object_carries_them() {
        let mut interner = Interner::default();
        let web = map(&[("app", "web")]);
        let first = interner.labels(Some(&web));
        let second = interner.labels(Some(&web));
        assert_eq!(interner.len(), 2);
        interner.release_labels(&first);
        assert_eq!(interner.len(), 2, "the second object still carries app=web");
        interner.release_labels(&second);
        assert_eq!(interner.len(), 0);
        // Freed ids are reused, and a fresh string never matches a stale id.
        let db = interner.labels(Some(&map(&[("tier", "db")])));
        let sel = CompiledSelector::new(&Selector::from_iter([("tier", "db")]));
        assert!(sel.resolve(&interner).is_some_and(|r| r.matches(&db)));
        assert!(
            CompiledSelector::new(&Selector::from_iter([("app", "web")]))
                .resolve(&interner)
                .is_none()
        );
    }
}
