//! Label selectors (equality- and set-based) and field selectors, parsed with
//! apimachinery's grammar and error messages.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::object_meta::validation::{label_value_errors, qualified_name_errors};

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Clone, Debug, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed label selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LabelSelector {
    reqs: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Comma,
    Open,
    Close,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    In,
    NotIn,
    Gt,
    Lt,
    End,
}

impl Tok {
    fn text(&self) -> String {
        match self {
            Self::Ident(s) => s.clone(),
            Self::Comma => ",".into(),
            Self::Open => "(".into(),
            Self::Close => ")".into(),
            Self::Not => "!".into(),
            Self::Eq => "=".into(),
            Self::DoubleEq => "==".into(),
            Self::NotEq => "!=".into(),
            Self::In => "in".into(),
            Self::NotIn => "notin".into(),
            Self::Gt => ">".into(),
            Self::Lt => "<".into(),
            Self::End => String::new(),
        }
    }
}

fn lex(s: &str) -> Vec<Tok> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            '(' => {
                out.push(Tok::Open);
                i += 1;
            }
            ')' => {
                out.push(Tok::Close);
                i += 1;
            }
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::NotEq);
                i += 2;
            }
            '!' => {
                out.push(Tok::Not);
                i += 1;
            }
            '=' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::DoubleEq);
                i += 2;
            }
            '=' => {
                out.push(Tok::Eq);
                i += 1;
            }
            '>' => {
                out.push(Tok::Gt);
                i += 1;
            }
            '<' => {
                out.push(Tok::Lt);
                i += 1;
            }
            _ => {
                let start = i;
                while i < chars.len() && !" \t\n\r,()!=<>".contains(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push(match word.as_str() {
                    "in" => Tok::In,
                    "notin" => Tok::NotIn,
                    _ => Tok::Ident(word),
                });
            }
        }
    }
    out.push(Tok::End);
    out
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).unwrap_or(&Tok::End)
    }

    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }

    /// One requirement; errors are apimachinery's, without the "unable to parse
    /// requirement" prefix the caller adds.
    fn requirement(&mut self) -> Result<Requirement, String> {
        let negated = if self.peek() == &Tok::Not {
            self.pos += 1;
            true
        } else {
            false
        };
        let key = match self.next() {
            Tok::Ident(k) => k,
            t => return Err(format!("found '{}', expected: identifier", t.text())),
        };
        let key_errors = qualified_name_errors(&key);
        if !key_errors.is_empty() {
            return Err(format!(
                "key: Invalid value: \"{key}\": {}",
                key_errors.join("; ")
            ));
        }
        if negated || matches!(self.peek(), Tok::Comma | Tok::End) {
            let op = if negated { Op::DoesNotExist } else { Op::Exists };
            return Ok(Requirement {
                key,
                op,
                values: Vec::new(),
            });
        }
        let op = match self.next() {
            Tok::Eq | Tok::DoubleEq => Op::Equals,
            Tok::NotEq => Op::NotEquals,
            Tok::In => Op::In,
            Tok::NotIn => Op::NotIn,
            Tok::Gt => Op::Gt,
            Tok::Lt => Op::Lt,
            t => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    t.text()
                ));
            }
        };
        let values = if matches!(op, Op::In | Op::NotIn) {
            self.value_set()?
        } else {
            match self.peek().clone() {
                Tok::Comma | Tok::End => vec![String::new()],
                Tok::Ident(v) => {
                    self.pos += 1;
                    vec![v]
                }
                t => return Err(format!("found '{}', expected: identifier", t.text())),
            }
        };
        for (i, v) in values.iter().enumerate() {
            if matches!(op, Op::Gt | Op::Lt) {
                if v.parse::<i64>().is_err() {
                    return Err(format!(
                        "values[{i}]: Invalid value: \"{v}\": for 'Gt', 'Lt' operators, the value must be an integer"
                    ));
                }
            } else {
                let value_errors = label_value_errors(v);
                if !value_errors.is_empty() {
                    return Err(format!(
                        "values[{i}][{key}]: Invalid value: \"{v}\": {}",
                        value_errors.join("; ")
                    ));
                }
            }
        }
        Ok(Requirement { key, op, values })
    }

    /// `( v1, v2 )`.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let open = self.next();
        if open != Tok::Open {
            return Err(format!("found '{}' expected: '('", open.text()));
        }
        match self.peek().clone() {
            Tok::Close => {
                self.pos += 1;
                return Ok(vec![String::new()]);
            }
            Tok::Ident(_) | Tok::Comma => {}
            t => {
                return Err(format!("found '{}', expected: ',', ')' or identifier", t.text()));
            }
        }
        let mut vals = Vec::new();
        let mut expect_value = true;
        loop {
            match self.peek().clone() {
                Tok::Ident(v) if expect_value => {
                    self.pos += 1;
                    vals.push(v);
                    expect_value = false;
                }
                Tok::Comma => {
                    self.pos += 1;
                    if expect_value {
                        vals.push(String::new());
                    }
                    expect_value = true;
                }
                Tok::Close => {
                    self.pos += 1;
                    if expect_value {
                        vals.push(String::new());
                    }
                    return Ok(vals);
                }
                t => return Err(format!("found '{}', expected: ',' or ')'", t.text())),
            }
        }
    }
}

impl LabelSelector {
    /// Parses `app=web,tier in (a,b),!canary`.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut p = Parser { toks: lex(s), pos: 0 };
        let mut reqs = Vec::new();
        if p.peek() == &Tok::End {
            return Ok(Self { reqs });
        }
        loop {
            match p.peek() {
                Tok::Ident(_) | Tok::Not => {}
                t => {
                    return Err(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        t.text()
                    ));
                }
            }
            let r = p
                .requirement()
                .map_err(|e| format!("unable to parse requirement: {e}"))?;
            reqs.push(r);
            match p.next() {
                Tok::End => break,
                Tok::Comma => match p.peek() {
                    Tok::Ident(_) | Tok::Not => {}
                    t => {
                        return Err(format!("found '{}', expected: identifier after ','", t.text()));
                    }
                },
                t => {
                    return Err(format!("found '{}', expected: ',' or 'end of string'", t.text()));
                }
            }
        }
        Ok(Self { reqs })
    }

    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.reqs.iter().all(|r| {
            let got = labels.get(&r.key);
            match r.op {
                Op::Equals | Op::In => got.is_some_and(|g| r.values.contains(g)),
                Op::NotEquals | Op::NotIn => got.is_none_or(|g| !r.values.contains(g)),
                Op::Exists => got.is_some(),
                Op::DoesNotExist => got.is_none(),
                Op::Gt | Op::Lt => {
                    let (Some(g), Some(want)) = (
                        got.and_then(|g| g.parse::<i64>().ok()),
                        r.values.first().and_then(|w| w.parse::<i64>().ok()),
                    ) else {
                        return false;
                    };
                    if r.op == Op::Gt { g > want } else { g < want }
                }
            }
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}

/// One field selector term.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FieldTerm {
    pub(crate) field: String,
    pub(crate) value: String,
    pub(crate) negate: bool,
}

/// A parsed field selector (`metadata.name=foo,status.phase!=Running`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FieldSelector {
    pub(crate) terms: Vec<FieldTerm>,
}

/// Splits on unescaped separators, as apimachinery's `fields.ParseSelector` does.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    parts.push(cur);
    parts
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => {
                    return Err(format!("invalid field selector: invalid escape sequence: \\{e}"));
                }
                None => return Err("invalid field selector: unterminated escape sequence".into()),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

impl FieldSelector {
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        if s.is_empty() {
            return Ok(Self { terms });
        }
        for part in split_unescaped(s, ',') {
            let (field, value, negate) = if let Some(i) = find_unescaped(&part, "!=") {
                (&part[..i], &part[i + 2..], true)
            } else if let Some(i) = find_unescaped(&part, "==") {
                (&part[..i], &part[i + 2..], false)
            } else if let Some(i) = find_unescaped(&part, "=") {
                (&part[..i], &part[i + 1..], false)
            } else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            terms.push(FieldTerm {
                field: field.to_owned(),
                value: unescape(value)?,
                negate,
            });
        }
        Ok(Self { terms })
    }

    pub(crate) fn matches(&self, get: impl Fn(&str) -> String) -> bool {
        self.terms.iter().all(|t| (get(&t.field) == t.value) != t.negate)
    }

    /// The name a `metadata.name=<x>` term pins, used to watch a single object.
    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

fn find_unescaped(s: &str, pat: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
            continue;
        }
        if s[i..].starts_with(pat) {
            return Some(i);
        }
    }
    None
}

/// Reads a field-selector value from an object (`""` when absent, as Go's zero value).
pub(crate) fn field_value(obj: &Value, pointer: &str) -> String {
    match obj.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Labels of an object.
pub(crate) fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `labels` satisfy a LabelSelector object (`matchLabels` + `matchExpressions`).
pub(crate) fn label_selector_matches(sel: &Value, labels: &Map<String, Value>) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|es| {
            es.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                    Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                    Some("Exists") => label(key).is_some(),
                    Some("DoesNotExist") => label(key).is_none(),
                    _ => false,
                }
            })
        });
    by_labels && by_exprs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn set_based() {
        let s = LabelSelector::parse("env in (prod, staging),!canary,tier!=db,app").unwrap();
        assert!(s.matches(&labels(&[("env", "prod"), ("app", "x")])));
        assert!(!s.matches(&labels(&[("env", "prod")])));
        assert!(!s.matches(&labels(&[("env", "dev"), ("app", "x")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("app", "x"), ("canary", "")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("app", "x"), ("tier", "db")])));
        let n = LabelSelector::parse("env notin (prod)").unwrap();
        assert!(n.matches(&labels(&[])));
        let g = LabelSelector::parse("replicas>2").unwrap();
        assert!(g.matches(&labels(&[("replicas", "3")])));
        assert!(!g.matches(&labels(&[("replicas", "2")])));
    }

    #[test]
    fn parse_error_messages() {
        let e = |s: &str| LabelSelector::parse(s).unwrap_err();
        assert_eq!(e("a=b,"), "found '', expected: identifier after ','");
        assert_eq!(
            e("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert_eq!(e("=b"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(
            e("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(e("!a=b"), "found '=', expected: ',' or 'end of string'");
        assert!(e("a=-b").starts_with(
            "unable to parse requirement: values[0][a]: Invalid value: \"-b\": a valid label must be"
        ));
        let sel = LabelSelector::parse("a in (x,,y)").unwrap();
        assert_eq!(sel.reqs[0].values, ["x", "", "y"]);
    }

    #[test]
    fn parse_errors() {
        assert!(LabelSelector::parse("a=b,").is_err());
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("a=-b").is_err());
        assert!(LabelSelector::parse("=b").is_err());
        assert!(FieldSelector::parse("metadata.name").is_err());
    }

    #[test]
    fn field_escapes() {
        let f = FieldSelector::parse(r"metadata.name=a\,b,metadata.namespace!=x").unwrap();
        assert!(FieldSelector::parse("metadata.name=é=x,é").is_err());
        assert_eq!(f.terms[0].value, "a,b");
        assert!(f.terms[1].negate);
    }
}
