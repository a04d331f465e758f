//! Label selectors (equality- and set-based) and field selectors, parsed with
//! apimachinery's grammar and error messages.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::validation::{check_label_value, check_qualified_name};

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

    fn requirement(&mut self) -> Result<Requirement, String> {
        let negated = if self.peek() == &Tok::Not {
            self.pos += 1;
            true
        } else {
            false
        };
        let key = match self.next() {
            Tok::Ident(k) => k,
            t => {
                return Err(
                    format!("found '{}', expected: identifier after '!'", t.text())
                        .replace(" after '!'", if negated { " after '!'" } else { "" }),
                );
            }
        };
        if let Err(e) = check_qualified_name(&key) {
            return Err(format!(
                "unable to parse requirement: key: Invalid value: \"{key}\": {e}"
            ));
        }
        if negated {
            return match self.peek() {
                Tok::Comma | Tok::End => Ok(Requirement {
                    key,
                    op: Op::DoesNotExist,
                    values: Vec::new(),
                }),
                t => Err(format!(
                    "found '{}', expected: ',' or 'end of string'",
                    t.text()
                )),
            };
        }
        let op = match self.peek() {
            Tok::Comma | Tok::End => {
                return Ok(Requirement {
                    key,
                    op: Op::Exists,
                    values: Vec::new(),
                });
            }
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
        self.pos += 1;
        let values = if matches!(op, Op::In | Op::NotIn) {
            if self.next() != Tok::Open {
                return Err("found '', expected: '('".to_owned());
            }
            let mut vals = Vec::new();
            loop {
                match self.next() {
                    Tok::Ident(v) => {
                        vals.push(v);
                        match self.next() {
                            Tok::Comma => {}
                            Tok::Close => break,
                            t => {
                                return Err(format!("found '{}', expected: ',' or ')'", t.text()));
                            }
                        }
                    }
                    Tok::Close if vals.is_empty() => {
                        vals.push(String::new());
                        break;
                    }
                    Tok::Comma => vals.push(String::new()),
                    t => {
                        return Err(format!(
                            "found '{}', expected: ',', or identifier",
                            t.text()
                        ));
                    }
                }
            }
            vals
        } else {
            match self.peek().clone() {
                Tok::Ident(v) => {
                    self.pos += 1;
                    vec![v]
                }
                Tok::Comma | Tok::End => vec![String::new()],
                t => return Err(format!("found '{}', expected: identifier", t.text())),
            }
        };
        for v in &values {
            if matches!(op, Op::Gt | Op::Lt) {
                if v.parse::<i64>().is_err() {
                    return Err(format!(
                        "unable to parse requirement: values[0]: Invalid value: \"{v}\": for 'Gt', 'Lt' operators, the value must be an integer"
                    ));
                }
            } else if let Err(e) = check_label_value(v) {
                return Err(format!(
                    "unable to parse requirement: values[0][{key}]: Invalid value: \"{v}\": {e}"
                ));
            }
        }
        Ok(Requirement { key, op, values })
    }
}

impl LabelSelector {
    /// Parses `app=web,tier in (a,b),!canary`.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut p = Parser {
            toks: lex(s),
            pos: 0,
        };
        let mut reqs = Vec::new();
        if p.peek() == &Tok::End {
            return Ok(Self { reqs });
        }
        loop {
            reqs.push(p.requirement()?);
            match p.next() {
                Tok::End => break,
                Tok::Comma => {
                    if p.peek() == &Tok::End {
                        return Err("found '', expected: identifier after ','".to_owned());
                    }
                }
                t => {
                    return Err(format!(
                        "found '{}', expected: ',' or 'end of string'",
                        t.text()
                    ));
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
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{e}"
                    ));
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
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
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
        self.terms
            .iter()
            .all(|t| (get(&t.field) == t.value) != t.negate)
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
