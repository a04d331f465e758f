//! Condition sets: the rules that keep a resource's happy condition (`Ready` or
//! `Succeeded`) consistent with its dependent conditions.

use thiserror::Error;

use super::condition::{Condition, ConditionSeverity, ConditionStatus, ConditionType, VolatileTime};

/// The happy condition of a kind plus the conditions it depends on.
///
/// A living set (`Ready`) suits long-running resources; a batch set (`Succeeded`)
/// suits run-to-completion ones. Dependents are deduplicated and never include
/// the happy condition itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionSet {
    happy: ConditionType,
    dependents: Vec<ConditionType>,
}

/// Clearing `Ready`, `Succeeded` or a dependent would leave the set inconsistent.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("clearing terminal condition {0} is not supported")]
pub struct ClearTerminalConditionError(pub ConditionType);

impl ConditionSet {
    /// `Ready` plus the given dependents.
    pub fn living(dependents: impl IntoIterator<Item = ConditionType>) -> Self {
        Self::new(ConditionType::READY, dependents)
    }

    /// `Succeeded` plus the given dependents.
    pub fn batch(dependents: impl IntoIterator<Item = ConditionType>) -> Self {
        Self::new(ConditionType::SUCCEEDED, dependents)
    }

    fn new(happy: ConditionType, dependents: impl IntoIterator<Item = ConditionType>) -> Self {
        let mut deps: Vec<ConditionType> = Vec::new();
        for d in dependents {
            if d != happy && !deps.contains(&d) {
                deps.push(d);
            }
        }
        ConditionSet {
            happy,
            dependents: deps,
        }
    }

    /// The happy (top-level) condition type.
    pub fn happy(&self) -> &ConditionType {
        &self.happy
    }

    /// The dependent condition types, in declaration order.
    pub fn dependents(&self) -> &[ConditionType] {
        &self.dependents
    }

    /// A manager applying this set's rules to a list of conditions.
    pub fn manage<'a>(&'a self, conditions: &'a mut Vec<Condition>) -> ConditionManager<'a> {
        ConditionManager {
            set: self,
            conditions,
        }
    }

    fn is_terminal(&self, t: &ConditionType) -> bool {
        *t == self.happy || self.dependents.contains(t)
    }

    fn severity(&self, t: &ConditionType) -> ConditionSeverity {
        if self.is_terminal(t) {
            ConditionSeverity::Error
        } else {
            ConditionSeverity::Info
        }
    }
}

/// Applies a [`ConditionSet`]'s rules to one resource's conditions.
#[derive(Debug)]
pub struct ConditionManager<'a> {
    set: &'a ConditionSet,
    conditions: &'a mut Vec<Condition>,
}

impl ConditionManager<'_> {
    /// The condition of the given type, if present.
    pub fn get_condition(&self, t: &ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == *t)
    }

    /// The happy condition, if present.
    pub fn get_top_level_condition(&self) -> Option<&Condition> {
        self.get_condition(&self.set.happy)
    }

    /// True when the happy condition is `True`.
    pub fn is_happy(&self) -> bool {
        self.get_top_level_condition().is_some_and(Condition::is_true)
    }

    /// Sets a condition, replacing any of the same type.
    ///
    /// Nothing changes when an equal condition (transition time aside) is already
    /// there, so the transition time only moves on real transitions. The list is
    /// kept sorted by type.
    pub fn set_condition(&mut self, mut cond: Condition) {
        if let Some(existing) = self.get_condition(&cond.type_) {
            cond.last_transition_time = existing.last_transition_time.clone();
            if *existing == cond {
                return;
            }
        }
        cond.last_transition_time = VolatileTime::now();
        self.conditions.retain(|c| c.type_ != cond.type_);
        self.conditions.push(cond);
        self.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    }

    /// Removes a non-terminal condition.
    pub fn clear_condition(&mut self, t: &ConditionType) -> Result<(), ClearTerminalConditionError> {
        if self.set.is_terminal(t) {
            return Err(ClearTerminalConditionError(t.clone()));
        }
        self.conditions.retain(|c| c.type_ != *t);
        Ok(())
    }

    /// Marks a condition `True` and recomputes the happy condition.
    pub fn mark_true(&mut self, t: &ConditionType) {
        self.mark_true_with_reason(t, "", "");
    }

    /// Marks a condition `True` with a reason and message, then recomputes the
    /// happy condition.
    pub fn mark_true_with_reason(
        &mut self,
        t: &ConditionType,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.set_condition(self.condition(t, ConditionStatus::True, reason, message));
        self.recompute_happiness(t);
    }

    /// Marks a condition `Unknown`. A dependent going `Unknown` makes the happy
    /// condition `Unknown` too, unless another dependent is `False`, in which case
    /// the happy condition becomes `False`.
    pub fn mark_unknown(&mut self, t: &ConditionType, reason: impl Into<String>, message: impl Into<String>) {
        let (reason, message) = (reason.into(), message.into());
        self.set_condition(self.condition(t, ConditionStatus::Unknown, reason.clone(), message.clone()));

        let mut is_dependent = false;
        for dependent in &self.set.dependents {
            if self.get_condition(dependent).is_some_and(Condition::is_false) {
                if !self.get_top_level_condition().is_some_and(Condition::is_false) {
                    let happy = self.set.happy.clone();
                    self.mark_false(&happy, reason, message);
                }
                return;
            }
            if dependent == t {
                is_dependent = true;
            }
        }
        if is_dependent {
            let happy = self.set.happy.clone();
            self.set_condition(self.condition(&happy, ConditionStatus::Unknown, reason, message));
        }
    }

    /// Marks a condition `False`; a dependent going `False` takes the happy
    /// condition with it.
    pub fn mark_false(&mut self, t: &ConditionType, reason: impl Into<String>, message: impl Into<String>) {
        let (reason, message) = (reason.into(), message.into());
        let mut types = vec![t.clone()];
        if self.set.dependents.contains(t) {
            types.push(self.set.happy.clone());
        }
        for t in &types {
            self.set_condition(self.condition(t, ConditionStatus::False, reason.clone(), message.clone()));
        }
    }

    /// Adds the happy condition as `Unknown` when it is missing, and each missing
    /// dependent as `True` if the resource is happy, else `Unknown`.
    pub fn initialize_conditions(&mut self) {
        let happy_type = self.set.happy.clone();
        let happy_status = match self.get_top_level_condition() {
            Some(c) => c.status,
            None => {
                self.set_condition(Condition::new(happy_type, ConditionStatus::Unknown));
                ConditionStatus::Unknown
            }
        };
        let status = if happy_status == ConditionStatus::True {
            ConditionStatus::True
        } else {
            ConditionStatus::Unknown
        };
        for dependent in &self.set.dependents {
            if self.get_condition(dependent).is_none() {
                self.set_condition(Condition::new(dependent.clone(), status));
            }
        }
    }

    fn condition(
        &self,
        t: &ConditionType,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Condition {
        Condition {
            severity: self.set.severity(t),
            reason: reason.into(),
            message: message.into(),
            ..Condition::new(t.clone(), status)
        }
    }

    fn recompute_happiness(&mut self, t: &ConditionType) {
        let happy = self.set.happy.clone();
        if let Some(unhappy) = self.find_unhappy_dependent() {
            let cond = self.condition(&happy, unhappy.status, unhappy.reason, unhappy.message);
            self.set_condition(cond);
        } else if *t != happy {
            self.set_condition(self.condition(&happy, ConditionStatus::True, "", ""));
        }
    }

    /// The most recently changed `False` error-severity condition, else the most
    /// recent `Unknown` one; an `Unknown` placeholder when a dependent is missing.
    fn find_unhappy_dependent(&self) -> Option<Condition> {
        if self.set.dependents.is_empty() {
            return None;
        }
        let mut candidates: Vec<&Condition> = self
            .conditions
            .iter()
            .filter(|c| c.severity == ConditionSeverity::Error && c.type_ != self.set.happy)
            .collect();
        candidates.sort_by_key(|c| std::cmp::Reverse(c.last_transition_time.time()));

        if let Some(c) = candidates.iter().find(|c| c.is_false()) {
            return Some((*c).clone());
        }
        if let Some(c) = candidates.iter().find(|c| c.is_unknown()) {
            return Some((*c).clone());
        }
        if self.set.dependents.len() > candidates.len() {
            return Some(Condition::new(ConditionType::from(""), ConditionStatus::Unknown));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOO: ConditionType = ConditionType::from_static("Foo");
    const BAR: ConditionType = ConditionType::from_static("Bar");
    const INFO: ConditionType = ConditionType::from_static("Extra");
    const READY: ConditionType = ConditionType::READY;

    fn status_of(conds: &[Condition], t: &ConditionType) -> Option<ConditionStatus> {
        conds.iter().find(|c| c.type_ == *t).map(|c| c.status)
    }

    #[test]
    fn living_and_batch_sets_dedupe_dependents_and_drop_the_happy_type() {
        let set = ConditionSet::living([FOO, FOO, READY, BAR]);
        assert_eq!(set.happy(), &READY);
        assert_eq!(set.dependents(), &[FOO, BAR]);
        assert_eq!(ConditionSet::batch([]).happy(), &ConditionType::SUCCEEDED);
    }

    #[test]
    fn initialize_adds_unknown_happy_and_unknown_dependents() {
        let set = ConditionSet::living([FOO]);
        let mut conds = Vec::new();
        set.manage(&mut conds).initialize_conditions();
        assert_eq!(status_of(&conds, &READY), Some(ConditionStatus::Unknown));
        assert_eq!(status_of(&conds, &FOO), Some(ConditionStatus::Unknown));
        assert!(conds.iter().all(|c| c.severity == ConditionSeverity::Error));
    }

    #[test]
    fn initialize_adds_true_dependents_when_happy_and_keeps_existing() {
        let set = ConditionSet::living([FOO, BAR]);
        let mut conds = vec![
            Condition::new(READY, ConditionStatus::True),
            Condition::new(BAR, ConditionStatus::False),
        ];
        set.manage(&mut conds).initialize_conditions();
        assert_eq!(status_of(&conds, &FOO), Some(ConditionStatus::True));
        assert_eq!(status_of(&conds, &BAR), Some(ConditionStatus::False));
        assert_eq!(status_of(&conds, &READY), Some(ConditionStatus::True));
    }

    #[test]
    fn set_condition_keeps_transition_time_when_unchanged_and_sorts_by_type() {
        let set = ConditionSet::living([]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_true(&READY);
        mgr.set_condition(Condition::new(BAR, ConditionStatus::True));
        let first = mgr.get_condition(&READY).unwrap().last_transition_time.time();
        assert!(first.is_some());
        std::thread::sleep(std::time::Duration::from_millis(2));
        mgr.mark_true(&READY);
        assert_eq!(
            mgr.get_condition(&READY).unwrap().last_transition_time.time(),
            first
        );
        mgr.mark_false(&READY, "Why", "because");
        assert_ne!(
            mgr.get_condition(&READY).unwrap().last_transition_time.time(),
            first
        );
        let types: Vec<_> = conds.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Bar", "Ready"]);
    }

    #[test]
    fn mark_true_on_happy_without_dependents_changes_only_happy() {
        let set = ConditionSet::living([]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_true(&READY);
        assert!(mgr.is_happy());
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].reason, "");
    }

    #[test]
    fn mark_true_of_all_dependents_makes_happy_true() {
        let set = ConditionSet::living([FOO, BAR]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.initialize_conditions();
        mgr.mark_true(&FOO);
        assert_eq!(
            mgr.get_top_level_condition().unwrap().status,
            ConditionStatus::Unknown
        );
        mgr.mark_true(&BAR);
        assert!(mgr.is_happy());
    }

    #[test]
    fn mark_true_with_a_missing_dependent_leaves_happy_unknown() {
        let set = ConditionSet::living([FOO, BAR]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_true(&FOO);
        assert_eq!(
            mgr.get_top_level_condition().unwrap().status,
            ConditionStatus::Unknown
        );
    }

    #[test]
    fn mark_true_copies_a_false_dependents_reason_to_happy() {
        let set = ConditionSet::living([FOO, BAR]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_false(&BAR, "BarBroken", "bar is broken");
        mgr.mark_true(&FOO);
        let happy = mgr.get_top_level_condition().unwrap();
        assert_eq!(
            (happy.status, happy.reason.as_str()),
            (ConditionStatus::False, "BarBroken")
        );
        assert_eq!(happy.message, "bar is broken");
    }

    #[test]
    fn mark_false_of_a_dependent_makes_happy_false_with_its_reason() {
        let set = ConditionSet::living([FOO]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.initialize_conditions();
        mgr.mark_false(&FOO, "FooFailed", "foo failed: 3");
        let happy = mgr.get_top_level_condition().unwrap();
        assert_eq!(
            (happy.status, happy.reason.as_str()),
            (ConditionStatus::False, "FooFailed")
        );
        assert_eq!(happy.message, "foo failed: 3");
    }

    #[test]
    fn mark_false_of_a_non_dependent_leaves_happy_alone_and_is_info() {
        let set = ConditionSet::living([FOO]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.initialize_conditions();
        mgr.mark_false(&INFO, "Meh", "just so you know");
        assert_eq!(
            mgr.get_top_level_condition().unwrap().status,
            ConditionStatus::Unknown
        );
        assert_eq!(
            mgr.get_condition(&INFO).unwrap().severity,
            ConditionSeverity::Info
        );
    }

    #[test]
    fn mark_unknown_of_a_dependent_makes_happy_unknown() {
        let set = ConditionSet::living([FOO, BAR]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_true(&FOO);
        mgr.mark_true(&BAR);
        assert!(mgr.is_happy());
        mgr.mark_unknown(&FOO, "Waiting", "waiting for foo");
        let happy = mgr.get_top_level_condition().unwrap();
        assert_eq!(
            (happy.status, happy.reason.as_str()),
            (ConditionStatus::Unknown, "Waiting")
        );
    }

    #[test]
    fn mark_unknown_with_another_dependent_false_makes_happy_false() {
        let set = ConditionSet::living([FOO, BAR]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_true(&READY);
        mgr.set_condition(Condition::new(BAR, ConditionStatus::False));
        mgr.mark_unknown(&FOO, "Waiting", "waiting");
        let happy = mgr.get_top_level_condition().unwrap();
        assert_eq!(
            (happy.status, happy.reason.as_str()),
            (ConditionStatus::False, "Waiting")
        );
        // Once happy is False it stays as it is.
        mgr.mark_unknown(&FOO, "Again", "again");
        assert_eq!(mgr.get_top_level_condition().unwrap().reason, "Waiting");
    }

    #[test]
    fn mark_unknown_of_happy_without_dependents_sets_only_happy() {
        let set = ConditionSet::living([]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_unknown(
            &READY,
            "NewObservedGenFailure",
            "unsuccessfully observed a new generation",
        );
        let happy = mgr.get_top_level_condition().unwrap();
        assert_eq!(happy.status, ConditionStatus::Unknown);
        assert_eq!(happy.message, "unsuccessfully observed a new generation");
        assert_eq!(conds.len(), 1);
    }

    #[test]
    fn clear_refuses_terminal_conditions() {
        let set = ConditionSet::living([FOO]);
        let mut conds = Vec::new();
        let mut mgr = set.manage(&mut conds);
        mgr.mark_true(&INFO);
        assert_eq!(mgr.clear_condition(&FOO), Err(ClearTerminalConditionError(FOO)));
        assert!(mgr.clear_condition(&INFO).is_ok());
        assert!(mgr.get_condition(&INFO).is_none());
    }

    #[test]
    fn is_happy_is_false_without_conditions() {
        let set = ConditionSet::batch([]);
        let mut conds = Vec::new();
        assert!(!set.manage(&mut conds).is_happy());
    }
}
