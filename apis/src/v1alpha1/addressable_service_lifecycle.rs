use std::sync::LazyLock;

use kinject_types::{ConditionSet, ConditionType, FieldError, KRShaped, go_quote};

use super::{AddressableService, AddressableServiceStatus};

/// Ready is True once the Service exists and the address is set.
pub const ADDRESSABLE_SERVICE_CONDITION_READY: ConditionType = ConditionType::READY;

static CONDITION_SET: LazyLock<ConditionSet> = LazyLock::new(|| ConditionSet::living([]));

impl KRShaped for AddressableService {
    fn condition_set() -> &'static ConditionSet {
        &CONDITION_SET
    }
}

impl AddressableServiceStatus {
    /// Sets Ready to Unknown if it is missing.
    pub fn initialize_conditions(&mut self) {
        CONDITION_SET
            .manage(&mut self.status.conditions)
            .initialize_conditions();
    }

    /// Ready=False, `ServiceUnavailable`: `Service "<name>" wasn't found.`
    pub fn mark_service_unavailable(&mut self, name: &str) {
        CONDITION_SET.manage(&mut self.status.conditions).mark_false(
            &ADDRESSABLE_SERVICE_CONDITION_READY,
            "ServiceUnavailable",
            format!("Service {} wasn't found.", go_quote(name)),
        );
    }

    /// Ready=False, `InvalidServiceName`: the spec names no valid Service, and
    /// `problem` says which field and why.
    pub fn mark_invalid_service_name(&mut self, problem: &FieldError) {
        CONDITION_SET.manage(&mut self.status.conditions).mark_false(
            &ADDRESSABLE_SERVICE_CONDITION_READY,
            "InvalidServiceName",
            problem.to_string(),
        );
    }

    /// Ready=True.
    pub fn mark_service_available(&mut self) {
        CONDITION_SET
            .manage(&mut self.status.conditions)
            .mark_true(&ADDRESSABLE_SERVICE_CONDITION_READY);
    }

    /// True when Ready is True.
    pub fn is_ready(&self) -> bool {
        self.status
            .get_condition(&ADDRESSABLE_SERVICE_CONDITION_READY)
            .is_some_and(|c| c.is_true())
    }
}

#[cfg(test)]
mod tests {
    use kinject_types::ConditionStatus;

    use super::*;

    #[test]
    fn initialize_sets_ready_unknown() {
        let mut s = AddressableServiceStatus::default();
        s.initialize_conditions();
        let ready = s.status.get_condition(&ConditionType::READY).unwrap();
        assert_eq!(ready.status, ConditionStatus::Unknown);
        assert!(!s.is_ready());
    }

    #[test]
    fn service_unavailable_has_knatives_reason_and_message() {
        let mut s = AddressableServiceStatus::default();
        s.mark_service_unavailable("webhook");
        let ready = s.status.get_condition(&ConditionType::READY).unwrap();
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason, "ServiceUnavailable");
        assert_eq!(ready.message, "Service \"webhook\" wasn't found.");
    }

    #[test]
    fn service_available_is_ready_without_reason() {
        let mut s = AddressableServiceStatus::default();
        s.mark_service_unavailable("webhook");
        s.mark_service_available();
        let ready = s.status.get_condition(&ConditionType::READY).unwrap();
        assert_eq!(
            (ready.status, ready.reason.as_str(), ready.message.as_str()),
            (ConditionStatus::True, "", "")
        );
        assert!(s.is_ready());
        assert_eq!(s.status.conditions.len(), 1);
    }
}
