use kinject_types::{FieldError, Validatable};

use super::{AddressableService, AddressableServiceSpec};

impl Validatable for AddressableService {
    fn validate(&self) -> Result<(), FieldError> {
        self.spec.validate().map_err(|e| e.via_field("spec"))
    }
}

impl AddressableServiceSpec {
    /// `serviceName` is required.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.service_name.is_empty() {
            return Err(FieldError::missing_field(["serviceName"]));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_name_is_required() {
        let asvc = AddressableService::new("rut", AddressableServiceSpec::default());
        assert_eq!(
            asvc.validate().unwrap_err().to_string(),
            "missing field(s): spec.serviceName"
        );
    }

    #[test]
    fn a_service_name_is_valid() {
        let asvc = AddressableService::new(
            "rut",
            AddressableServiceSpec {
                service_name: "webhook".into(),
            },
        );
        assert!(asvc.validate().is_ok());
    }
}
