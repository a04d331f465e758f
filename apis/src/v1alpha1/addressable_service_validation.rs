use kinject_types::validation::is_dns1035_label;
use kinject_types::{FieldError, Validatable};

use super::{AddressableService, AddressableServiceSpec};

impl Validatable for AddressableService {
    fn validate(&self) -> Result<(), FieldError> {
        self.spec.validate().map_err(|e| e.via_field("spec"))
    }
}

impl AddressableServiceSpec {
    /// `serviceName` is required and must be a Service name (a DNS-1035
    /// label), since it becomes part of the address.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.service_name.is_empty() {
            return Err(FieldError::missing_field(["serviceName"]));
        }
        let problems = is_dns1035_label(&self.service_name);
        if !problems.is_empty() {
            return Err(FieldError::invalid_value(&self.service_name, "serviceName")
                .with_details(problems.join("; ")));
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
    fn a_service_name_must_be_a_dns1035_label() {
        let asvc = AddressableService::new(
            "rut",
            AddressableServiceSpec {
                service_name: "Bad_Name".into(),
            },
        );
        let err = asvc.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("invalid value: Bad_Name: spec.serviceName\na DNS-1035 label must consist of"),
            "{err}"
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
