//! Kubernetes JSONPath, parsed and evaluated as client-go's `util/jsonpath` does for
//! CustomResourceDefinition printer columns.
//!
//! Written here rather than taken from a crate: the Rust JSONPath crates follow RFC 9535,
//! and Kubernetes' dialect is another language. It is a template (`{…}` actions between
//! text), `['a.b']` names two fields, `.*` over a string yields its bytes, `..` yields
//! only the non-empty containers, a missing key is no result rather than an error, an
//! index out of bounds fails the whole path, and filters compare with Go template rules
//! (an integer never equals a float, and a comparison of mismatched types fails the whole
//! path). A printer column shows every one of these differences.
//!
//! Two things are not as in client-go. Go visits a map in random order, so `[*]` and `..`
//! over a map pick a random first value there; here they go by key order, so a cell does
//! not change between two reads. `range` and `end` fail the path here; in client-go they
//! rewrite the parsed template while it is evaluated, which a printer column, evaluated
//! once per row with the same template, cannot rely on.

use std::borrow::Cow;

use serde_json::Value;

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JsonPath {
    root: Vec<Node>,
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    List(Vec<Node>),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        op: String,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    Identifier(String),
}

/// One bound of a slice (`[start:end:step]`), as client-go's `ParamsEntry`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Param {
    value: i64,
    known: bool,
    derived: bool,
}

/// The key of `['key']`: client-go's `^'([^']*)'$`.
fn dict_key(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    (!inner.contains('\'')).then_some(inner)
}

/// The up to three bounds of a slice, each without its colon: client-go's
/// `^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$`, where an absent group is `None`.
fn slice_bounds(text: &str) -> Option<[Option<&str>; 3]> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() > 3 {
        return None;
    }
    let number_like = |p: &str| {
        let digits = p.strip_prefix('-').unwrap_or(p);
        digits.bytes().all(|b| b.is_ascii_digit())
    };
    if !parts.iter().all(|p| number_like(p)) {
        return None;
    }
    Some([
        parts.first().copied(),
        parts.get(1).copied(),
        parts.get(2).copied(),
    ])
}

/// A comparison's left side, operator and right side: client-go's
/// `^([^!<>=]+)([!<>=]+)(.+?)$`, which gives the right side one operator character
/// when nothing else follows the operator.
fn comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |b: u8| matches!(b, b'!' | b'<' | b'>' | b'=');
    let bytes = text.as_bytes();
    let i = bytes.iter().position(|&b| is_op(b)).filter(|&i| i > 0)?;
    let j = i + bytes[i..].iter().take_while(|&&b| is_op(b)).count();
    if j < bytes.len() {
        Some((&text[..i], &text[i..j], &text[j..]))
    } else if j - i >= 2 {
        Some((&text[..i], &text[i..j - 1], &text[j - 1..]))
    } else {
        None
    }
}

fn is_terminator(r: Option<char>) -> bool {
    matches!(
        r,
        None | Some(' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}')
    )
}

// Go's unicode.IsLetter and unicode.IsDigit; Rust's nearest properties differ only for a
// few letter-like numerals and combining marks.
fn is_alphanumeric(r: char) -> bool {
    r == '_' || r.is_alphabetic() || r.is_numeric()
}

fn is_digit(r: char) -> bool {
    r.is_ascii_digit() || (!r.is_ascii() && r.is_numeric())
}

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    width: usize,
}

impl<'a> Parser<'a> {
    fn next(&mut self) -> Option<char> {
        let r = self.input[self.pos..].chars().next();
        self.width = r.map_or(0, char::len_utf8);
        self.pos += self.width;
        r
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    fn peek(&mut self) -> Option<char> {
        let r = self.next();
        self.backup();
        r
    }

    fn consume(&mut self) -> &'a str {
        let v = &self.input[self.start..self.pos];
        self.start = self.pos;
        v
    }

    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn byte_before(&self, back: usize) -> Option<u8> {
        self.pos
            .checked_sub(back)
            .and_then(|i| self.input.as_bytes().get(i).copied())
    }

    fn parse(mut self) -> Result<Vec<Node>, String> {
        let mut root = Vec::new();
        loop {
            match self.rest().find('{') {
                Some(at) => {
                    self.pos += at;
                    if self.pos > self.start {
                        root.push(Node::Text(self.consume().to_owned()));
                    }
                    self.pos += 1;
                    self.consume();
                    let mut list = Vec::new();
                    self.inside_action(&mut list)?;
                    root.push(Node::List(list));
                }
                None => {
                    self.pos = self.input.len();
                    if self.pos > self.start {
                        root.push(Node::Text(self.consume().to_owned()));
                    }
                    return Ok(root);
                }
            }
        }
    }

    /// Nodes up to the closing `}`, which it consumes.
    fn inside_action(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            let rest = self.rest();
            if rest.starts_with('}') {
                self.pos += 1;
                self.consume();
                return Ok(());
            }
            if rest.starts_with("[?(") {
                self.filter(cur)?;
                continue;
            }
            if rest.starts_with("..") {
                if cur.last() == Some(&Node::Recursive) {
                    return Err("invalid multiple recursive descent".into());
                }
                self.pos += 2;
                self.consume();
                cur.push(Node::Recursive);
                if self.peek().is_some_and(is_alphanumeric) {
                    self.field(cur);
                }
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return Err("unclosed action".into()),
                Some(' ' | '@' | '$') => {
                    self.consume();
                }
                Some('[') => self.array(cur)?,
                Some(q @ ('"' | '\'')) => self.quote(cur, q)?,
                Some('.') => self.field(cur),
                Some(r) if r == '+' || r == '-' || is_digit(r) => {
                    self.backup();
                    self.number(cur)?;
                }
                Some(r) if is_alphanumeric(r) => {
                    self.backup();
                    self.identifier(cur);
                }
                Some(r) => {
                    return Err(format!(
                        "unrecognized character in action: U+{:04X} {r:?}",
                        u32::from(r)
                    ));
                }
            }
        }
    }

    fn identifier(&mut self, cur: &mut Vec<Node>) {
        while !is_terminator(self.next()) {}
        self.backup();
        match self.consume() {
            "true" => cur.push(Node::Bool(true)),
            "false" => cur.push(Node::Bool(false)),
            other => cur.push(Node::Identifier(other.to_owned())),
        }
    }

    fn number(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        loop {
            match self.next() {
                Some(r) if r == '.' || is_digit(r) => {}
                _ => {
                    self.backup();
                    break;
                }
            }
        }
        let value = self.consume();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
        } else if value.bytes().any(|b| b.is_ascii_digit())
            && let Ok(f) = value.parse::<f64>()
        {
            cur.push(Node::Float(f));
        } else {
            return Err(format!("cannot parse number {value}"));
        }
        Ok(())
    }

    fn field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            let r = self.next();
            if r == Some('\\') {
                self.next();
            } else if is_terminator(r) {
                self.backup();
                break;
            }
        }
        match self.consume() {
            "*" => cur.push(Node::Wildcard),
            name => cur.push(Node::Field(name.replace('\\', ""))),
        }
    }

    fn array(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated array".into()),
                Some(']') => break,
                Some(_) => {}
            }
        }
        let text = self.consume();
        let mut text = &text[1..text.len() - 1];
        if text == "*" {
            text = ":";
        }
        if text.contains(',') {
            let mut union = Vec::new();
            for part in text.split(',') {
                union.push(parse_action(&format!("[{}]", part.trim_matches(' ')))?);
            }
            cur.push(Node::Union(union));
            return Ok(());
        }
        if let Some(key) = dict_key(text) {
            cur.extend(parse_action(&format!(".{key}"))?);
            return Ok(());
        }
        let Some(bounds) = slice_bounds(text) else {
            return Err(format!("invalid array index {text}"));
        };
        let mut params = [Param::default(); 3];
        for (i, bound) in bounds.into_iter().enumerate() {
            // A present group keeps its colon, as the regular expression's groups do.
            let raw = match bound {
                Some(b) if i > 0 => format!(":{b}"),
                Some(b) => b.to_owned(),
                None => String::new(),
            };
            if raw.is_empty() {
                if i == 1 {
                    params[1] = Param {
                        value: params[0].value.wrapping_add(1),
                        known: true,
                        derived: true,
                    };
                }
                continue;
            }
            let raw = if i > 0 { &raw[1..] } else { raw.as_str() };
            if i > 0 && raw.is_empty() {
                continue;
            }
            let value = raw
                .parse::<i64>()
                .map_err(|_| format!("array index {raw} is not a number"))?;
            params[i] = Param {
                value,
                known: true,
                derived: false,
            };
        }
        cur.push(Node::Array(params));
        Ok(())
    }

    fn filter(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        self.pos += 3;
        self.consume();
        let (mut begin, mut end) = (false, false);
        let mut pair = '"';
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated filter".into()),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if self.byte_before(2) != Some(b'\\') && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                Some(_) => {}
            }
        }
        if self.next() != Some(']') {
            return Err("unclosed array expect ]".into());
        }
        let text = self.consume();
        let text = &text[..text.len() - 2];
        let node = match comparison(text) {
            None => Node::Filter {
                left: parse_action(text)?,
                right: Vec::new(),
                op: "exists".into(),
            },
            Some((left, op, right)) => Node::Filter {
                left: parse_action(left)?,
                right: parse_action(right)?,
                op: op.to_owned(),
            },
        };
        cur.push(node);
        Ok(())
    }

    fn quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated quoted string".into()),
                Some(r) if r == end && self.byte_before(2) != Some(b'\\') => break,
                Some(_) => {}
            }
        }
        let value = self.consume();
        let text = unquote(value).ok_or_else(|| format!("unquote string {value} error invalid syntax"))?;
        cur.push(Node::Text(text));
        Ok(())
    }
}

/// The nodes of one action, as client-go's `parseAction`: `text` is parsed as `{text}`
/// and whatever follows its first closing brace is dropped.
fn parse_action(text: &str) -> Result<Vec<Node>, String> {
    let root = parse_nodes(&format!("{{{text}}}"))?;
    match root.into_iter().next() {
        Some(Node::List(nodes)) => Ok(nodes),
        _ => Err("invalid action".into()),
    }
}

fn parse_nodes(text: &str) -> Result<Vec<Node>, String> {
    Parser {
        input: text,
        pos: 0,
        start: 0,
        width: 0,
    }
    .parse()
}

/// Go's `strconv.Unquote`, with single quotes too (client-go's `UnquoteExtend`).
fn unquote(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let quote = *b.first()?;
    if b.len() < 2 || b[b.len() - 1] != quote || !matches!(quote, b'"' | b'\'') {
        return None;
    }
    let inner = &b[1..b.len() - 1];
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if c == quote {
            return None;
        }
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let esc = *inner.get(i + 1)?;
        i += 2;
        let simple = match esc {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'\\' => Some(b'\\'),
            b'\'' | b'"' if esc == quote => Some(esc),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            continue;
        }
        match esc {
            b'x' | b'u' | b'U' => {
                let n = match esc {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let hex = std::str::from_utf8(inner.get(i..i + n)?).ok()?;
                if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                    return None;
                }
                let v = u32::from_str_radix(hex, 16).ok()?;
                i += n;
                if esc == b'x' {
                    out.push(u8::try_from(v).ok()?);
                } else {
                    let ch = char::from_u32(v)?;
                    out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                }
            }
            b'0'..=b'7' => {
                let digits = inner.get(i..i + 2)?;
                let mut v = u32::from(esc - b'0');
                for d in digits {
                    if !(b'0'..=b'7').contains(d) {
                        return None;
                    }
                    v = (v << 3) | u32::from(d - b'0');
                }
                i += 2;
                out.push(u8::try_from(v).ok()?);
            }
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

impl JsonPath {
    /// Parses a template as client-go's `JSONPath.Parse`.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        Ok(Self {
            root: parse_nodes(text)?,
        })
    }

    /// The first value of the first result set, or `None` when the template fails on
    /// `data` or finds nothing there: what kube-apiserver's CRD table convertor shows
    /// (with missing keys allowed).
    pub(crate) fn first<'a>(&'a self, data: &'a Value) -> Option<Found<'a>> {
        self.find_results(data)
            .ok()?
            .into_iter()
            .next()?
            .into_iter()
            .next()
    }

    fn find_results<'a>(&'a self, data: &'a Value) -> Result<Vec<Vec<Found<'a>>>, ()> {
        let cur = vec![Found::Json(data)];
        self.root
            .iter()
            .map(|node| walk(&cur, node).map_err(drop))
            .collect()
    }
}

/// One value a path found: a part of the object, or a literal of the template.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found<'a> {
    /// JSON `null` stands for Go's nil interface.
    Json(&'a Value),
    Text(Cow<'a, str>),
    /// A Go `int` literal: it compares as an integer but is no `int64` to a cell.
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A byte of a string that `[*]` or `..` stepped into.
    Byte(u8),
}

/// What Go's reflection sees behind a value, after indirection.
pub(crate) enum View<'a> {
    Nil,
    Map,
    Slice,
    Str(&'a str),
    /// An `int64` of an object (`Unstructured` decodes every integer it can to `int64`).
    I64(i64),
    /// A Go `int` literal of the template.
    GoInt(i64),
    F64(f64),
    Bool(bool),
    U8(u8),
}

impl<'a> Found<'a> {
    pub(crate) fn view(&self) -> View<'_> {
        match self {
            Found::Json(v) => json_view(v),
            Found::Text(t) => View::Str(t),
            Found::Int(i) => View::GoInt(*i),
            Found::Float(f) => View::F64(*f),
            Found::Bool(b) => View::Bool(*b),
            Found::Byte(b) => View::U8(*b),
        }
    }

    fn children(&self) -> Vec<Found<'a>> {
        match self {
            Found::Json(Value::Object(m)) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                entries.into_iter().map(|(_, v)| Found::Json(v)).collect()
            }
            Found::Json(Value::Array(a)) => a.iter().map(Found::Json).collect(),
            Found::Json(Value::String(s)) => s.bytes().map(Found::Byte).collect(),
            Found::Text(t) => t.bytes().map(Found::Byte).collect(),
            _ => Vec::new(),
        }
    }

    fn is_nil(&self) -> bool {
        matches!(self, Found::Json(Value::Null))
    }
}

pub(crate) fn json_view(v: &Value) -> View<'_> {
    match v {
        Value::Null => View::Nil,
        Value::Object(_) => View::Map,
        Value::Array(_) => View::Slice,
        Value::String(s) => View::Str(s),
        Value::Bool(b) => View::Bool(*b),
        // Integers beyond int64 decode to float64, as apimachinery's JSON decoding does.
        Value::Number(n) => n
            .as_i64()
            .map_or_else(|| View::F64(n.as_f64().unwrap_or_default()), View::I64),
    }
}

/// On failure Go hands back a partial result with its error, which an existence filter
/// still looks at; `Err` carries that partial result.
type Out<'a> = Result<Vec<Found<'a>>, Vec<Found<'a>>>;

fn walk<'a>(input: &[Found<'a>], node: &'a Node) -> Out<'a> {
    match node {
        Node::List(nodes) => eval_list(input, nodes),
        Node::Text(t) => Ok(vec![Found::Text(Cow::Borrowed(t))]),
        Node::Field(name) => Ok(input
            .iter()
            .filter_map(|v| match v {
                Found::Json(Value::Object(m)) => m.get(name).map(Found::Json),
                _ => None,
            })
            .collect()),
        Node::Array(params) => eval_array(input, params),
        Node::Filter { left, right, op } => eval_filter(input, left, right, op),
        Node::Int(i) => Ok(vec![Found::Int(*i); input.len()]),
        Node::Float(f) => Ok(vec![Found::Float(*f); input.len()]),
        Node::Bool(b) => Ok(vec![Found::Bool(*b); input.len()]),
        Node::Wildcard => Ok(input.iter().flat_map(Found::children).collect()),
        Node::Recursive => {
            let mut out = Vec::new();
            recursive(input, &mut out);
            Ok(out)
        }
        Node::Union(lists) => {
            let mut out = Vec::new();
            for list in lists {
                out.extend(eval_list(input, list).map_err(|_| input.to_vec())?);
            }
            Ok(out)
        }
        Node::Identifier(name) if name == "end" => Err(Vec::new()),
        Node::Identifier(_) => Err(input.to_vec()),
    }
}

fn eval_list<'a>(input: &[Found<'a>], nodes: &'a [Node]) -> Out<'a> {
    let mut cur = input.to_vec();
    for node in nodes {
        cur = walk(&cur, node)?;
    }
    Ok(cur)
}

fn recursive<'a>(input: &[Found<'a>], out: &mut Vec<Found<'a>>) {
    for v in input {
        let children = v.children();
        if !children.is_empty() {
            out.push(v.clone());
            recursive(&children, out);
        }
    }
}

fn eval_array<'a>(input: &[Found<'a>], params: &[Param; 3]) -> Out<'a> {
    let mut result = Vec::new();
    for v in input {
        let items = match v {
            _ if v.is_nil() => continue,
            Found::Json(Value::Array(a)) => a,
            _ => return Err(input.to_vec()),
        };
        let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
        let mut p = *params;
        if !p[0].known {
            p[0].value = 0;
        }
        if p[0].value < 0 {
            p[0].value += len;
        }
        if !p[1].known {
            p[1].value = len;
        }
        if p[1].value < 0 || (p[1].value == 0 && p[1].derived) {
            p[1].value += len;
        }
        if p[1].value == p[0].value {
            return Ok(result);
        }
        if p[0].value >= len
            || p[0].value < 0
            || p[1].value > len
            || p[1].value < 0
            || p[0].value > p[1].value
        {
            return Err(input.to_vec());
        }
        let step = if p[2].known {
            if p[2].value <= 0 {
                return Err(input.to_vec());
            }
            usize::try_from(p[2].value).unwrap_or(usize::MAX)
        } else {
            1
        };
        let (from, to) = (
            usize::try_from(p[0].value).unwrap_or_default(),
            usize::try_from(p[1].value).unwrap_or_default(),
        );
        result.extend(items[from..to].iter().step_by(step).map(Found::Json));
    }
    Ok(result)
}

fn eval_filter<'a>(input: &[Found<'a>], left: &'a [Node], right: &'a [Node], op: &str) -> Out<'a> {
    let mut results = Vec::new();
    for v in input {
        let Found::Json(Value::Array(items)) = v else {
            return Err(input.to_vec());
        };
        for item in items {
            let temp = [Found::Json(item)];
            let lefts = eval_list(&temp, left);
            if op == "exists" {
                if !lefts.unwrap_or_else(|partial| partial).is_empty() {
                    results.push(Found::Json(item));
                }
                continue;
            }
            let lefts = lefts.map_err(|_| input.to_vec())?;
            let l = match lefts.as_slice() {
                [] => continue,
                [one] => one,
                _ => return Err(input.to_vec()),
            };
            let rights = eval_list(&temp, right).map_err(|_| input.to_vec())?;
            let r = match rights.as_slice() {
                [] => continue,
                [one] => one,
                _ => return Err(input.to_vec()),
            };
            let pass = match op {
                "<" => less(l, r),
                ">" => less_equal(l, r).map(|le| !le),
                "==" => equal(l, r),
                "!=" => equal(l, r).map(|eq| !eq),
                "<=" => less_equal(l, r),
                ">=" => less(l, r).map(|lt| !lt),
                _ => None,
            };
            match pass {
                None => return Err(results),
                Some(true) => results.push(Found::Json(item)),
                Some(false) => {}
            }
        }
    }
    Ok(results)
}

/// A value as Go's template comparisons classify it (`basicKind`).
enum Basic<'s> {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(&'s str),
}

fn basic<'s>(v: &'s Found<'_>) -> Option<Basic<'s>> {
    Some(match v.view() {
        View::Bool(b) => Basic::Bool(b),
        View::I64(i) | View::GoInt(i) => Basic::Int(i),
        View::U8(u) => Basic::Uint(u64::from(u)),
        View::F64(f) => Basic::Float(f),
        View::Str(s) => Basic::Str(s),
        View::Nil | View::Map | View::Slice => return None,
    })
}

/// Go template's `eq`; `None` where Go answers with an error.
fn equal(a: &Found<'_>, b: &Found<'_>) -> Option<bool> {
    Some(match (basic(a)?, basic(b)?) {
        (Basic::Bool(x), Basic::Bool(y)) => x == y,
        (Basic::Int(x), Basic::Int(y)) => x == y,
        (Basic::Uint(x), Basic::Uint(y)) => x == y,
        (Basic::Float(x), Basic::Float(y)) => x == y,
        (Basic::Str(x), Basic::Str(y)) => x == y,
        (Basic::Int(x), Basic::Uint(y)) | (Basic::Uint(y), Basic::Int(x)) => {
            u64::try_from(x).is_ok_and(|x| x == y)
        }
        _ => return None,
    })
}

/// Go template's `lt`; `None` where Go answers with an error.
fn less(a: &Found<'_>, b: &Found<'_>) -> Option<bool> {
    Some(match (basic(a)?, basic(b)?) {
        (Basic::Int(x), Basic::Int(y)) => x < y,
        (Basic::Uint(x), Basic::Uint(y)) => x < y,
        (Basic::Float(x), Basic::Float(y)) => x < y,
        (Basic::Str(x), Basic::Str(y)) => x < y,
        (Basic::Int(x), Basic::Uint(y)) => match u64::try_from(x) {
            Ok(x) => x < y,
            Err(_) => true,
        },
        (Basic::Uint(x), Basic::Int(y)) => u64::try_from(y).is_ok_and(|y| x < y),
        _ => return None,
    })
}

fn less_equal(a: &Found<'_>, b: &Found<'_>) -> Option<bool> {
    if less(a, b)? {
        return Some(true);
    }
    equal(a, b)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::go_format::{go_float_text, go_json};

    fn first(path: &str, v: &Value) -> Option<String> {
        let p = JsonPath::parse(&format!("{{{path}}}")).expect("parses");
        p.first(v).map(|f| match f.view() {
            View::Nil => "<nil>".to_owned(),
            View::Map | View::Slice => match f {
                Found::Json(j) => go_json(j),
                _ => unreachable!("only JSON values are containers"),
            },
            View::Str(s) => s.to_owned(),
            View::I64(i) | View::GoInt(i) => i.to_string(),
            View::F64(x) => go_float_text(x),
            View::Bool(b) => b.to_string(),
            View::U8(u) => u.to_string(),
        })
    }

    fn obj() -> Value {
        json!({
            "metadata": {"name": "x", "labels": {"b": "2", "a": "1"}},
            "spec": {"n": [1, 2, 3, 4, 5], "f": 1.5, "nul": null, "empty": []},
            "status": {
                "active": [{"name": "one", "n": 1}, {"name": "two", "n": 2, "ok": true}],
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Synced", "status": "False"}
                ]
            }
        })
    }

    #[test]
    fn fields_and_missing_keys() {
        let v = obj();
        assert_eq!(first(".metadata.name", &v).as_deref(), Some("x"));
        assert_eq!(first(".metadata.missing", &v), None);
        assert_eq!(first(".missing.deeper", &v), None);
        assert_eq!(first(".spec.nul", &v).as_deref(), Some("<nil>"));
        assert_eq!(first(".metadata.name.deeper", &v), None);
    }

    #[test]
    fn wildcards_take_the_first_of_many() {
        let v = obj();
        assert_eq!(first(".status.active[*].name", &v).as_deref(), Some("one"));
        assert_eq!(first(".status.active.*.name", &v).as_deref(), Some("one"));
        assert_eq!(first(".metadata.labels.*", &v).as_deref(), Some("1"));
        assert_eq!(first(".spec.empty[*]", &v), None);
        // `.*` steps into a string's bytes; `[*]`, a slice, fails on a string.
        assert_eq!(first(".metadata.name.*", &v).as_deref(), Some("120"));
        assert_eq!(first(".metadata.name[*]", &v), None);
    }

    #[test]
    fn indexes_and_slices() {
        let v = obj();
        assert_eq!(first(".spec.n[0]", &v).as_deref(), Some("1"));
        assert_eq!(first(".spec.n[-1]", &v).as_deref(), Some("5"));
        assert_eq!(first(".spec.n[-2]", &v).as_deref(), Some("4"));
        assert_eq!(first(".spec.n[1:3]", &v).as_deref(), Some("2"));
        assert_eq!(first(".spec.n[::2]", &v).as_deref(), Some("1"));
        assert_eq!(first(".spec.n[3:]", &v).as_deref(), Some("4"));
        assert_eq!(first(".spec.n[2:2]", &v), None);
        // Out of bounds fails the whole path rather than finding nothing.
        assert_eq!(first(".spec.n[9]", &v), None);
        assert_eq!(first(".spec.n[0:9]", &v), None);
        assert_eq!(first(".spec.n[::0]", &v), None);
        assert_eq!(first(".metadata[0]", &v), None);
    }

    #[test]
    fn filters_compare_as_go_templates() {
        let v = obj();
        let cond = |f: &str| first(&format!(".status.conditions[?({f})].status"), &v);
        assert_eq!(cond("@.type==\"Ready\"").as_deref(), Some("True"));
        assert_eq!(cond("@.type=='Synced'").as_deref(), Some("False"));
        assert_eq!(cond("@.type!=\"Ready\"").as_deref(), Some("False"));
        assert_eq!(cond("@.type>\"S\"").as_deref(), Some("False"));
        assert_eq!(cond("@.type<\"S\"").as_deref(), Some("True"));
        assert_eq!(cond("@.type==\"None\""), None);
        let active = |f: &str| first(&format!(".status.active[?({f})].name"), &v);
        assert_eq!(active("@.n>1").as_deref(), Some("two"));
        assert_eq!(active("@.n>=1").as_deref(), Some("one"));
        assert_eq!(active("@.n<=1").as_deref(), Some("one"));
        assert_eq!(active("@.ok").as_deref(), Some("two"));
        assert_eq!(active("@.ok==true").as_deref(), Some("two"));
        // An integer never equals a float, and the mismatch fails the path.
        assert_eq!(active("@.n==1.0"), None);
        assert_eq!(active("@.n==\"1\""), None);
        // An unknown operator fails the path.
        assert_eq!(active("@.n=1"), None);
        // A filter over a map fails the path.
        assert_eq!(first(".metadata.labels[?(@.a)]", &v), None);
    }

    #[test]
    fn recursive_descent_and_unions() {
        let v = obj();
        assert_eq!(first("..name", &v).as_deref(), Some("x"));
        assert_eq!(first(".status..name", &v).as_deref(), Some("one"));
        assert_eq!(first(".spec.n[4,0]", &v).as_deref(), Some("5"));
        assert_eq!(
            first(".metadata['labels','name']", &v).as_deref(),
            Some("{\"a\":\"1\",\"b\":\"2\"}")
        );
        // A quoted key with a dot names two fields.
        assert_eq!(first("['metadata.name']", &v).as_deref(), Some("x"));
        assert!(JsonPath::parse("{....a}").is_err());
    }

    #[test]
    fn literals_and_templates() {
        let v = obj();
        assert_eq!(first("\"lit\"", &v).as_deref(), Some("lit"));
        assert_eq!(first("'a\\'b'", &v).as_deref(), Some("a'b"));
        assert_eq!(first("5", &v).as_deref(), Some("5"));
        assert_eq!(first("true", &v).as_deref(), Some("true"));
        assert_eq!(first(&"9".repeat(400), &v).as_deref(), Some("+Inf"));
        // Only the first result set counts.
        assert_eq!(first(".metadata.name}{.spec.f", &v).as_deref(), Some("x"));
        // An identifier fails the path.
        assert_eq!(first("foo", &v), None);
        assert_eq!(first("end", &v), None);
    }

    #[test]
    fn parse_errors() {
        for bad in [
            "{.a",
            "{.a[}",
            "{.a[x]}",
            "{.a[?(@.b}",
            "{\"unterminated}",
            "{.a\n}",
            "{.a %}",
            "{.a[1:-]}",
            "{-}",
            "{'\\q'}",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad:?} should not parse");
        }
        for good in [
            "plain text",
            "{}",
            "{.}",
            "{.a[*]}",
            "{.a[?(@.b==\"x)\")]}",
            "{.a\\.b}",
        ] {
            assert!(JsonPath::parse(good).is_ok(), "{good:?} should parse");
        }
    }

    #[test]
    fn escaped_dots_stay_in_the_field_name() {
        let v = json!({"metadata": {"annotations": {"a.b/c": "v"}}});
        assert_eq!(first(".metadata.annotations.a\\.b/c", &v).as_deref(), Some("v"));
    }
}
