//! The spec fields of a scaffolded kind: `--field replicas:int32` (as many
//! as wanted), or, without any, one example field, `description`, with a
//! length limit that shows a validation rule end to end. Every file that
//! names a spec field (the types, the defaults test, the validation, the
//! table test, the example object) takes them from here, so the fields are
//! given once, on the command line.

use crate::model::validation::is_dns1123_label;

/// One `--field NAME:TYPE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    /// The Rust name, snake_case (`min_replicas`).
    pub(crate) name: String,
    pub(crate) ty: FieldType,
}

/// The types a field can be given on the command line, by their OpenAPI
/// (and Go) names or their Rust ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldType {
    String,
    Int32,
    Int64,
    Bool,
    Float64,
    Strings,
}

impl FieldType {
    const NAMES: [(&'static str, &'static str, FieldType); 6] = [
        ("string", "String", FieldType::String),
        ("int32", "i32", FieldType::Int32),
        ("int64", "i64", FieldType::Int64),
        ("bool", "bool", FieldType::Bool),
        ("float64", "f64", FieldType::Float64),
        ("[]string", "Vec<String>", FieldType::Strings),
    ];

    fn parse(text: &str) -> Option<FieldType> {
        Self::NAMES
            .iter()
            .find(|(go, rust, _)| *go == text || *rust == text)
            .map(|(_, _, ty)| *ty)
    }

    fn rust(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, _, ty)| *ty == self)
            .map_or("String", |(_, rust, _)| rust)
    }

    /// An example value as Rust code.
    fn example_rust(self) -> &'static str {
        match self {
            FieldType::String => "\"example\".into()",
            FieldType::Int32 | FieldType::Int64 => "1",
            FieldType::Bool => "true",
            FieldType::Float64 => "0.5",
            FieldType::Strings => "vec![\"example\".into()]",
        }
    }

    /// The same example value in YAML.
    fn example_yaml(self) -> &'static str {
        match self {
            FieldType::String => "example",
            FieldType::Int32 | FieldType::Int64 => "1",
            FieldType::Bool => "true",
            FieldType::Float64 => "0.5",
            FieldType::Strings => "[example]",
        }
    }
}

/// Parses every `--field`; each malformed one is a problem of its own.
pub(crate) fn parse(fields: &[String], problems: &mut Vec<String>) -> Vec<Field> {
    let mut parsed: Vec<Field> = Vec::new();
    let types = FieldType::NAMES
        .iter()
        .map(|(go, _, _)| *go)
        .collect::<Vec<_>>()
        .join(", ");
    for given in fields {
        let Some((name, ty)) = given.split_once(':') else {
            problems.push(format!(
                "--field {given:?} has no type; write NAME:TYPE, e.g. replicas:int32 (types: {types})"
            ));
            continue;
        };
        let (name, ty) = (name.trim(), ty.trim());
        let Some(ty) = FieldType::parse(ty) else {
            problems.push(format!(
                "--field {given:?}: {ty:?} is not one of the types {types}"
            ));
            continue;
        };
        // A snake_case identifier whose camelCase JSON name is a valid one.
        let label = name.replace('_', "-");
        if !is_dns1123_label(&label).is_empty()
            || !name.starts_with(|c: char| c.is_ascii_lowercase())
            || name.contains("__")
            || syn::parse_str::<syn::Ident>(name).is_err()
        {
            problems.push(format!(
                "--field {given:?}: {name:?} is not a snake_case field name; e.g. min_replicas (JSON minReplicas)"
            ));
            continue;
        }
        if parsed.iter().any(|f| f.name == name) {
            problems.push(format!("--field {name:?} is given twice"));
            continue;
        }
        parsed.push(Field {
            name: name.to_owned(),
            ty,
        });
    }
    parsed
}

/// What the templates say about the spec's fields.
pub(crate) struct SpecText {
    /// The fields of `<Kind>Spec`, as Rust.
    pub(crate) declarations: String,
    /// A `<Kind>Spec` literal with an example value in every field.
    pub(crate) example: String,
    /// The example object's `spec:` lines.
    pub(crate) sample: String,
}

/// The example field's text when `fields` is empty.
pub(crate) fn spec_text(kind: &str, fields: &[Field], max_description: usize) -> SpecText {
    if fields.is_empty() {
        return SpecText {
            declarations: format!(
                "    /// What this {kind} is for, in words, for the people who read it; at\n    \
                 /// most {max_description} characters.\n    \
                 #[serde(default, skip_serializing_if = \"String::is_empty\")]\n    \
                 #[schemars(length(max = {max_description}))]\n    \
                 pub description: String,\n"
            ),
            example: format!("{kind}Spec {{\n        description: \"written by its user\".into(),\n    }}"),
            sample: format!("  description: An example {kind}, from hack/new-kind.sh.\n"),
        };
    }
    let declarations = fields
        .iter()
        .map(|f| {
            format!(
                "    /// `{}`: what it asks of the {kind}. This comment is the field's\n    \
                 /// description in the CRD.\n    \
                 #[serde(default)]\n    \
                 pub {}: {},\n",
                camel_json(&f.name),
                f.name,
                f.ty.rust()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let values: String = fields
        .iter()
        .map(|f| format!("        {}: {},\n", f.name, f.ty.example_rust()))
        .collect();
    let sample: String = fields
        .iter()
        .map(|f| format!("  {}: {}\n", camel_json(&f.name), f.ty.example_yaml()))
        .collect();
    SpecText {
        declarations,
        example: format!("{kind}Spec {{\n{values}    }}"),
        sample,
    }
}

/// `min_replicas` → `minReplicas`, as `#[serde(rename_all = "camelCase")]`.
fn camel_json(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_parse_by_go_or_rust_type_and_bad_ones_say_how_to_fix() {
        let mut problems = Vec::new();
        let fields = parse(
            &[
                "replicas:int32".into(),
                "min_ready:i64".into(),
                "tags:[]string".into(),
            ],
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(fields[1].ty, FieldType::Int64);
        assert_eq!(fields[2].ty.rust(), "Vec<String>");
        parse(
            &[
                "replicas".into(),
                "Replicas:int32".into(),
                "size:uint8".into(),
                "a:bool".into(),
                "a:bool".into(),
            ],
            &mut problems,
        );
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(
            problems[0].contains("write NAME:TYPE, e.g. replicas:int32"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].contains("is not a snake_case field name"),
            "{}",
            problems[1]
        );
        assert!(
            problems[2].contains("is not one of the types string, int32"),
            "{}",
            problems[2]
        );
        assert!(problems[3].contains("given twice"), "{}", problems[3]);
    }

    #[test]
    fn every_file_gets_the_same_fields() {
        let fields = parse(&["min_replicas:int32".into()], &mut Vec::new());
        let text = spec_text("Cart", &fields, 256);
        assert!(
            text.declarations.contains("    pub min_replicas: i32,\n"),
            "{}",
            text.declarations
        );
        assert!(
            text.declarations.contains("`minReplicas`"),
            "{}",
            text.declarations
        );
        assert_eq!(text.example, "CartSpec {\n        min_replicas: 1,\n    }");
        assert_eq!(text.sample, "  minReplicas: 1\n");
        let example = spec_text("Cart", &[], 256);
        assert!(example.declarations.contains("pub description: String"));
    }
}
