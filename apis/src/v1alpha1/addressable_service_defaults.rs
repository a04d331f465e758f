use kinject_types::Defaultable;

use super::AddressableService;

impl Defaultable for AddressableService {
    /// AddressableService has no defaulted fields; the hook exists so the
    /// reconciler and the admission webhook treat every kind the same way.
    fn set_defaults(&mut self) {}
}
