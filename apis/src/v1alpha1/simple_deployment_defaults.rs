use kinject_types::Defaultable;

use super::SimpleDeployment;

impl Defaultable for SimpleDeployment {
    /// SimpleDeployment has no defaulted fields; the hook exists so the
    /// reconciler and the admission webhook treat every kind the same way.
    fn set_defaults(&mut self) {}
}
