//! `#[rule("<CEL>", message = "...", ...)]`: a validation rule the API server
//! enforces, on a struct or a field of an API type, read into a
//! [`RuleMarker`].
//!
//! What can be known without the schema is checked here, so it fails the
//! build at the marker: an empty rule or message, a message over several
//! lines (kube-apiserver refuses it), a reason it does not know, a field
//! path that is not a path, `optional_old_self` on a rule that never reads
//! `oldSelf`. The CEL itself is compiled against the schema when the CRD is
//! generated (`kinject-cel`), where the fields it reads are known.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::parse::{ParseStream, Parser};
use syn::{Attribute, LitStr, Token};

use crate::attr::{Errors, key_of, string_value};

/// The reasons kube-apiserver takes for a rule's field error.
pub const REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

const KEYS: &[&str] = &[
    "message",
    "message_expression",
    "reason",
    "field_path",
    "optional_old_self",
];

/// One `#[rule(...)]` marker.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleMarker {
    /// The CEL expression.
    pub rule: String,
    /// `message = "..."`.
    pub message: Option<String>,
    /// `message_expression = "..."`.
    pub message_expression: Option<String>,
    /// `reason = "FieldValueForbidden"`.
    pub reason: Option<String>,
    /// `field_path = ".max"`.
    pub field_path: Option<String>,
    /// `optional_old_self` (a flag, or `= true`/`= false`).
    pub optional_old_self: Option<bool>,
    /// The line of the marker, for the generator's errors.
    pub line: usize,
}

/// True for a `#[rule(...)]` attribute.
pub fn is_rule(attr: &Attribute) -> bool {
    attr.path().is_ident("rule")
}

/// Every `#[rule(...)]` among `attrs`, in order; all their errors together.
pub fn rule_markers(attrs: &[Attribute]) -> syn::Result<Vec<RuleMarker>> {
    let mut errors = Errors::default();
    let mut rules = Vec::new();
    for attr in attrs.iter().filter(|a| is_rule(a)) {
        match attr.parse_args_with(|input: ParseStream<'_>| parse_rule(input, attr)) {
            Ok(rule) => rules.push(rule),
            Err(e) => errors.push(e),
        }
    }
    errors.finish().map(|()| rules)
}

fn parse_rule(input: ParseStream<'_>, attr: &Attribute) -> syn::Result<RuleMarker> {
    let rule: LitStr = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "a rule starts with its CEL expression, as a string: \
             #[rule(\"self.min <= self.max\", message = \"min must not be above max\")]",
        )
    })?;
    let mut marker = RuleMarker {
        rule: rule.value(),
        message: None,
        message_expression: None,
        reason: None,
        field_path: None,
        optional_old_self: None,
        line: attr_line(attr),
    };
    if marker.rule.trim().is_empty() {
        return Err(syn::Error::new(
            rule.span(),
            "the rule is empty; write a CEL expression that is true for a valid value",
        ));
    }
    if !input.is_empty() {
        input.parse::<Token![,]>()?;
        let rest: TokenStream = input.parse()?;
        let mut given = std::collections::BTreeSet::new();
        syn::meta::parser(|meta| {
            let key = key_of(&meta, "#[rule]", KEYS)?;
            crate::attr::given_once(&meta, &key, "#[rule]", &mut given)?;
            read_key(&meta, &key, &mut marker)
        })
        .parse2(rest)?;
    }
    if marker.optional_old_self.is_some() && !marker.rule.contains("oldSelf") {
        return Err(syn::Error::new(
            rule.span(),
            "`optional_old_self` is for transition rules, which read `oldSelf`; this rule does not: \
             remove `optional_old_self`",
        ));
    }
    Ok(marker)
}

fn read_key(meta: &syn::meta::ParseNestedMeta<'_>, key: &str, marker: &mut RuleMarker) -> syn::Result<()> {
    if key == "optional_old_self" {
        marker.optional_old_self = Some(if meta.input.peek(Token![=]) {
            meta.value()?.parse::<syn::LitBool>()?.value
        } else {
            true
        });
        return Ok(());
    }
    let value = string_value(meta)?;
    let text = value.value();
    let problem = match key {
        "message" | "message_expression" if text.trim().is_empty() => {
            Some(format!("`{key}` is empty; leave it out or say what is wrong"))
        }
        "message" if text.contains(['\n', '\r']) => Some(
            "the message has a line break, which the API server refuses; write it on one line".to_owned(),
        ),
        "reason" if !REASONS.contains(&text.as_str()) => Some(format!(
            "unknown reason `{text}`; the API server takes {}",
            REASONS.join(", ")
        )),
        "field_path" if !(text.starts_with('.') || text.starts_with("['")) => Some(format!(
            "`{text}` is not a field path; it starts at the rule's value with a dot: `.{text}`"
        )),
        _ => None,
    };
    if let Some(problem) = problem {
        return Err(syn::Error::new(value.span(), problem));
    }
    let slot = match key {
        "message" => &mut marker.message,
        "message_expression" => &mut marker.message_expression,
        "reason" => &mut marker.reason,
        _ => &mut marker.field_path,
    };
    *slot = Some(text);
    Ok(())
}

/// The line of an attribute where spans know it (in a proc-macro on Rust
/// 1.88 and later, and in the generator), else 0.
fn attr_line(attr: &Attribute) -> usize {
    let span: Span = attr.pound_token.span;
    span.start().line
}

impl RuleMarker {
    /// The `kinject_types::Rule` the marker stands for, with its place
    /// (`file!()` of the expansion and the marker's line).
    pub fn to_tokens(&self) -> TokenStream {
        let rule = &self.rule;
        let mut value = quote!(::kinject_types::Rule::new(#rule));
        let mut add = |method: TokenStream, text: &Option<String>| {
            if let Some(text) = text {
                value = quote!(#value.#method(#text));
            }
        };
        add(quote!(message), &self.message);
        add(quote!(message_expression), &self.message_expression);
        add(quote!(reason), &self.reason);
        add(quote!(field_path), &self.field_path);
        if let Some(optional) = self.optional_old_self {
            value = quote!(#value.optional_old_self(#optional));
        }
        let line = self.line;
        quote!(#value.defined_at(::core::concat!(::core::file!(), ":", #line)))
    }
}

#[cfg(test)]
mod tests {
    use super::rule_markers;

    fn errors(attr: syn::Attribute) -> String {
        rule_markers(&[attr]).unwrap_err().to_string()
    }

    #[test]
    fn a_rule_reads_its_expression_and_keys() {
        let attr: syn::Attribute = syn::parse_quote! {
            #[rule("self == oldSelf", message = "immutable", reason = "FieldValueForbidden",
                   field_path = ".size", optional_old_self)]
        };
        let rules = rule_markers(&[attr]).unwrap();
        assert_eq!(rules[0].rule, "self == oldSelf");
        assert_eq!(rules[0].message.as_deref(), Some("immutable"));
        assert_eq!(rules[0].reason.as_deref(), Some("FieldValueForbidden"));
        assert_eq!(rules[0].field_path.as_deref(), Some(".size"));
        assert_eq!(rules[0].optional_old_self, Some(true));
        let tokens = rules[0].to_tokens().to_string();
        assert!(tokens.contains(". optional_old_self (true)"), "{tokens}");
    }

    #[test]
    fn what_the_api_server_would_refuse_fails_at_the_marker() {
        assert!(errors(syn::parse_quote!(#[rule(message = "x")])).contains("starts with its CEL expression"));
        assert!(errors(syn::parse_quote!(#[rule(" ")])).contains("the rule is empty"));
        assert!(
            errors(syn::parse_quote!(#[rule("self > 0", reason = "Bad")])).contains("unknown reason `Bad`")
        );
        assert!(errors(syn::parse_quote!(#[rule("self > 0", field_path = "max")])).contains("`.max`"));
        assert!(errors(syn::parse_quote!(#[rule("self > 0", message = "a\nb")])).contains("line break"));
        assert!(errors(syn::parse_quote!(#[rule("self > 0", optional_old_self)])).contains("oldSelf"));
        assert!(
            errors(syn::parse_quote!(#[rule("self > 0", mesage = "x")])).contains("did you mean `message`")
        );
        assert!(
            errors(syn::parse_quote!(#[rule("self > 0", message = "x", message = "y")]))
                .contains("given twice")
        );
    }
}
