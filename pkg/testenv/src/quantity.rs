//! Resource quantities (`resource.Quantity`) as kube-apiserver reads them: whether a
//! text parses, with Go's messages when it does not, its sign, and how two compare.

use std::cmp::Ordering;

use serde_json::Value;

/// apimachinery's message for a text that is not a quantity at all.
pub(crate) const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const BAD_SUFFIX: &str = "unable to parse quantity's suffix";
const BAD_NUMBER: &str = "unable to parse numeric part of quantity";

/// A parsed quantity: sign, digits before and after the point, and the power its
/// suffix scales them by.
#[derive(Debug)]
pub(crate) struct Quantity {
    negative: bool,
    num: String,
    denom: String,
    scale: Scale,
}

#[derive(Debug, Clone, Copy)]
enum Scale {
    /// A power of ten: SI suffixes (`m`, `k`, `M`, …) and exponents (`e3`).
    Decimal(i32),
    /// A power of two: `Ki`, `Mi`, …
    Binary(i32),
}

/// The text a JSON value holds as a quantity: a string, or a number as written
/// (Go's decoder reads both); `null` is no quantity (zero).
pub(crate) fn text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn scale(suffix: &str) -> Option<Scale> {
    let decimal = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
    if let Some(i) = decimal.iter().position(|s| *s == suffix) {
        return i32::try_from(i).ok().map(|i| Scale::Decimal(3 * i - 9));
    }
    let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some(i) = binary.iter().position(|s| *s == suffix) {
        return i32::try_from(i).ok().map(|i| Scale::Binary(10 * (i + 1)));
    }
    let exp = suffix.strip_prefix(['e', 'E']).filter(|e| !e.is_empty())?;
    exp.parse::<i64>()
        .ok()
        .map(|e| Scale::Decimal(i32::try_from(e).unwrap_or(if e < 0 { i32::MIN } else { i32::MAX })))
}

/// Parses as `resource.ParseQuantity` does (after the decoder trims spaces), with its
/// error messages.
pub(crate) fn parse(text: &str) -> Result<Quantity, &'static str> {
    let s = text.trim();
    let b = s.as_bytes();
    if b.is_empty() {
        return Err(FORMAT_WRONG);
    }
    let (negative, start) = match b[0] {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let zero = || Quantity {
        negative,
        num: String::new(),
        denom: String::new(),
        scale: Scale::Decimal(0),
    };
    // Go reads a sign followed by nothing but zeros as zero, suffix and all.
    if b[start..].iter().all(|c| *c == b'0') {
        return Ok(zero());
    }
    let digits = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let num_end = digits(start);
    let mut pos = num_end;
    let mut denom = "";
    if b.get(pos) == Some(&b'.') {
        let end = digits(pos + 1);
        denom = &s[pos + 1..end];
        pos = end;
    }
    let suffix_start = pos;
    pos += b[pos..]
        .iter()
        .take_while(|c| b"eEinumkKMGTP".contains(c))
        .count();
    if matches!(b.get(pos), Some(b'-' | b'+')) {
        pos += 1;
    }
    if digits(pos) != b.len() {
        return Err(FORMAT_WRONG);
    }
    let scale = scale(&s[suffix_start..]).ok_or(BAD_SUFFIX)?;
    let num = &s[start..num_end];
    if num.is_empty() && denom.is_empty() {
        return Err(BAD_NUMBER);
    }
    Ok(Quantity {
        negative,
        num: num.to_owned(),
        denom: denom.to_owned(),
        scale,
    })
}

impl Quantity {
    fn is_zero(&self) -> bool {
        self.num.bytes().chain(self.denom.bytes()).all(|c| c == b'0')
    }

    /// Below zero: a minus sign and a digit that is not zero.
    pub(crate) fn is_negative(&self) -> bool {
        self.negative && !self.is_zero()
    }

    /// The value as a double. The decimal part is read in one correctly rounded step,
    /// so two texts of the same value (`1.5`, `1500m`) give the same double; a binary
    /// suffix multiplies by a power of two, which is exact.
    fn value(&self) -> f64 {
        let num = if self.num.is_empty() { "0" } else { &self.num };
        let denom = if self.denom.is_empty() { "0" } else { &self.denom };
        let sign = if self.negative { "-" } else { "" };
        let (exp10, exp2) = match self.scale {
            Scale::Decimal(e) => (e, 0),
            Scale::Binary(e) => (0, e),
        };
        let v: f64 = format!("{sign}{num}.{denom}e{exp10}").parse().unwrap_or(f64::NAN);
        v * 2f64.powi(exp2)
    }

    /// Orders two quantities by value, as `Quantity.Cmp` does.
    pub(crate) fn cmp_value(&self, other: &Self) -> Ordering {
        self.value()
            .partial_cmp(&other.value())
            .unwrap_or(Ordering::Equal)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_what_go_parses_with_its_errors() {
        for ok in [
            "1",
            "0",
            "-",
            "+0",
            "500m",
            "1.5",
            ".5",
            "1.",
            "1Gi",
            "2e3",
            "1E-3",
            "128974848",
            "0.1Ki",
        ] {
            assert!(parse(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", FORMAT_WRONG),
            ("abc", FORMAT_WRONG),
            ("1 Gi", FORMAT_WRONG),
            ("1Xi", FORMAT_WRONG),
            ("1mi", BAD_SUFFIX),
            ("1e", BAD_SUFFIX),
            (".", BAD_NUMBER),
        ] {
            assert_eq!(parse(bad).unwrap_err(), why, "{bad}");
        }
    }

    #[test]
    fn compares_by_value() {
        let q = |s: &str| parse(s).unwrap();
        assert_eq!(q("1.5").cmp_value(&q("1500m")), Ordering::Equal);
        assert_eq!(q("1Gi").cmp_value(&q("1000M")), Ordering::Greater);
        assert_eq!(q("1Ki").cmp_value(&q("1024")), Ordering::Equal);
        assert_eq!(q("-1").cmp_value(&q("0")), Ordering::Less);
        assert!(q("-1m").is_negative());
        assert!(!q("-0.0").is_negative());
    }
}
