use kinject_types::{FieldError, Validatable};

use super::{SimpleDeployment, SimpleDeploymentSpec};

impl Validatable for SimpleDeployment {
    fn validate(&self) -> Result<(), FieldError> {
        self.spec.validate().map_err(|e| e.via_field("spec"))
    }
}

impl SimpleDeploymentSpec {
    /// `image` is required and `replicas` may not be negative.
    ///
    /// Knative's sample does not check `replicas`, and its controller crashes on a
    /// negative value; rejecting it here is a deliberate improvement.
    pub fn validate(&self) -> Result<(), FieldError> {
        let mut errs = FieldError::default();
        if self.image.is_empty() {
            errs = errs.also(FieldError::missing_field(["image"]));
        }
        if self.replicas < 0 {
            errs = errs.also(FieldError::invalid_value(self.replicas, "replicas"));
        }
        errs.into_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sd(image: &str, replicas: i32) -> SimpleDeployment {
        SimpleDeployment::new(
            "sd",
            SimpleDeploymentSpec {
                image: image.into(),
                replicas,
            },
        )
    }

    #[test]
    fn image_is_required() {
        assert_eq!(
            sd("", 1).validate().unwrap_err().to_string(),
            "missing field(s): spec.image"
        );
    }

    #[test]
    fn negative_replicas_are_invalid() {
        assert_eq!(
            sd("img:1", -1).validate().unwrap_err().to_string(),
            "invalid value: -1: spec.replicas"
        );
    }

    #[test]
    fn both_problems_are_reported() {
        assert_eq!(
            sd("", -3).validate().unwrap_err().to_string(),
            "invalid value: -3: spec.replicas\nmissing field(s): spec.image"
        );
    }

    #[test]
    fn zero_replicas_are_valid() {
        assert!(sd("img:1", 0).validate().is_ok());
    }
}
