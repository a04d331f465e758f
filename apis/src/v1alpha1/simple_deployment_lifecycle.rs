use std::sync::LazyLock;

use kinject_types::{ConditionSet, ConditionType, KRShaped};

use super::{SimpleDeployment, SimpleDeploymentStatus};

/// Ready is True once as many pods are ready as the spec asks for.
pub const SIMPLE_DEPLOYMENT_CONDITION_READY: ConditionType = ConditionType::READY;

static CONDITION_SET: LazyLock<ConditionSet> = LazyLock::new(|| ConditionSet::living([]));

impl KRShaped for SimpleDeployment {
    fn condition_set() -> &'static ConditionSet {
        &CONDITION_SET
    }
}

impl SimpleDeploymentStatus {
    /// Sets Ready to Unknown if it is missing.
    pub fn initialize_conditions(&mut self) {
        CONDITION_SET
            .manage(&mut self.status.conditions)
            .initialize_conditions();
    }

    /// Ready=False, `PodsNotReady`: `<n> pods are not ready yet`.
    pub fn mark_pods_not_ready(&mut self, n: i32) {
        CONDITION_SET.manage(&mut self.status.conditions).mark_false(
            &SIMPLE_DEPLOYMENT_CONDITION_READY,
            "PodsNotReady",
            format!("{n} pods are not ready yet"),
        );
    }

    /// Ready=False, `InvalidSpec`, with the validation error: the spec cannot be
    /// acted on until it is fixed.
    pub fn mark_invalid_spec(&mut self, message: &str) {
        CONDITION_SET.manage(&mut self.status.conditions).mark_false(
            &SIMPLE_DEPLOYMENT_CONDITION_READY,
            "InvalidSpec",
            message,
        );
    }

    /// Ready=True.
    pub fn mark_pods_ready(&mut self) {
        CONDITION_SET
            .manage(&mut self.status.conditions)
            .mark_true(&SIMPLE_DEPLOYMENT_CONDITION_READY);
    }

    /// True when Ready is True.
    pub fn is_ready(&self) -> bool {
        self.status
            .get_condition(&SIMPLE_DEPLOYMENT_CONDITION_READY)
            .is_some_and(|c| c.is_true())
    }
}

#[cfg(test)]
mod tests {
    use kinject_types::ConditionStatus;

    use super::*;

    #[test]
    fn initialize_sets_ready_unknown() {
        let mut s = SimpleDeploymentStatus::default();
        s.initialize_conditions();
        assert_eq!(
            s.status.get_condition(&ConditionType::READY).unwrap().status,
            ConditionStatus::Unknown
        );
    }

    #[test]
    fn pods_not_ready_has_knatives_reason_and_message() {
        let mut s = SimpleDeploymentStatus::default();
        s.mark_pods_not_ready(2);
        let ready = s.status.get_condition(&ConditionType::READY).unwrap();
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason, "PodsNotReady");
        assert_eq!(ready.message, "2 pods are not ready yet");
    }

    #[test]
    fn pods_ready_is_ready() {
        let mut s = SimpleDeploymentStatus::default();
        s.mark_pods_not_ready(1);
        s.mark_pods_ready();
        assert!(s.is_ready());
        assert_eq!(s.status.get_condition(&ConditionType::READY).unwrap().reason, "");
    }
}
