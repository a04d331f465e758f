//! Timestamps as kube-apiserver writes and reads them: `metav1.Time` (whole seconds,
//! UTC) for the times it sets, and `metav1.MicroTime` fields decoded as Go's
//! `time.Parse("2006-01-02T15:04:05.000000Z07:00", s)` does, which wants exactly six
//! fractional digits, then re-encoded in UTC, so an offset is normalised to `Z`.

use serde_json::Value;

use crate::go_format::go_json_type;

const LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// The current time as a `metav1.Time`.
pub(crate) fn now() -> String {
    time(jiff::Timestamp::now())
}

/// A time as a `metav1.Time`: whole seconds, UTC.
pub(crate) fn time(t: jiff::Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", t).unwrap_or_default()
}

/// Checks the MicroTimes of `obj` at `paths` (JSON pointers) and rewrites each as
/// kube-apiserver stores it; the error is the decoder's message for the first one
/// that does not parse.
pub(crate) fn normalize_micro_times(obj: &mut Value, paths: &[&str]) -> Result<(), String> {
    for path in paths {
        let Some(v) = obj.pointer_mut(path) else {
            continue;
        };
        let text = match v {
            Value::Null => continue,
            Value::String(s) => s.clone(),
            // MicroTime's UnmarshalJSON decodes into a Go string first.
            other => return Err(not_a_string(go_json_type(other))),
        };
        *v = Value::String(parse_micro_time(&text)?);
    }
    Ok(())
}

fn not_a_string(what: &str) -> String {
    format!("json: cannot unmarshal {what} into Go value of type string")
}

/// Go's `time` package quoting in parse errors.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if (c as u32) < 0x20 || (c as u32) >= 0x80 {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// A `*time.ParseError`: the layout element that failed and the value left at it.
fn bad(value: &str, layout_elem: &str, value_elem: &str) -> String {
    format!(
        "parsing time {} as {}: cannot parse {} as {}",
        quote(value),
        quote(LAYOUT),
        quote(value_elem),
        quote(layout_elem)
    )
}

fn out_of_range(value: &str, what: &str) -> String {
    format!("parsing time {}: {what} out of range", quote(value))
}

fn digit(s: &str, i: usize) -> Option<u32> {
    s.as_bytes()
        .get(i)
        .filter(|b| b.is_ascii_digit())
        .map(|b| u32::from(b - b'0'))
}

/// Go's `getnum`: one or two digits, or exactly two when `fixed`.
fn getnum(s: &str, fixed: bool) -> Option<(u32, &str)> {
    let first = digit(s, 0)?;
    match digit(s, 1) {
        Some(second) => Some((first * 10 + second, &s[2..])),
        None if fixed => None,
        None => Some((first, &s[1..])),
    }
}

fn days_in(month: u32, year: i32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `time.Parse(RFC3339Micro, value)`, then `MarshalJSON`'s UTC rendering.
pub(crate) fn parse_micro_time(value: &str) -> Result<String, String> {
    let mut p = Layout { value, rest: value };
    let year = p.year()?;
    p.literal("-", '-')?;
    let month = p.number("01", true)?;
    if !(1..=12).contains(&month) {
        return Err(out_of_range(value, "month"));
    }
    p.literal("-", '-')?;
    let day = p.number("02", true)?;
    p.literal("T", 'T')?;
    let hour = p.number("15", false)?;
    if hour >= 24 {
        return Err(out_of_range(value, "hour"));
    }
    p.literal(":", ':')?;
    let minute = p.number("04", true)?;
    if minute >= 60 {
        return Err(out_of_range(value, "minute"));
    }
    p.literal(":", ':')?;
    let second = p.number("05", true)?;
    if second >= 60 {
        return Err(out_of_range(value, "second"));
    }
    let micros = p.fraction()?;
    let offset_secs = p.offset()?;
    if !p.rest.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            quote(value),
            quote(p.rest)
        ));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(out_of_range(value, "day"));
    }
    render_utc(year, month, day, hour, minute, second, micros, offset_secs)
        .ok_or_else(|| out_of_range(value, "year"))
}

/// Go's `time.Parse` walking `LAYOUT` over a value: each step reads the element of the
/// layout it names from what is left, or fails with the error Go gives there.
struct Layout<'a> {
    value: &'a str,
    rest: &'a str,
}

impl Layout<'_> {
    fn bad(&self, layout_elem: &str) -> String {
        bad(self.value, layout_elem, self.rest)
    }

    /// `2006`: four digits.
    fn year(&mut self) -> Result<i32, String> {
        let year = match self.rest.get(..4) {
            Some(y) if y.bytes().all(|b| b.is_ascii_digit()) => {
                y.parse::<i32>().map_err(|_| self.bad("2006"))?
            }
            _ => return Err(self.bad("2006")),
        };
        self.rest = &self.rest[4..];
        Ok(year)
    }

    fn literal(&mut self, layout_elem: &str, c: char) -> Result<(), String> {
        match self.rest.strip_prefix(c) {
            Some(after) => {
                self.rest = after;
                Ok(())
            }
            None => Err(self.bad(layout_elem)),
        }
    }

    /// One or two digits, or exactly two when `fixed`.
    fn number(&mut self, layout_elem: &str, fixed: bool) -> Result<u32, String> {
        let (n, after) = getnum(self.rest, fixed).ok_or_else(|| self.bad(layout_elem))?;
        self.rest = after;
        Ok(n)
    }

    /// `.000000`: exactly six digits after the point, as microseconds.
    fn fraction(&mut self) -> Result<u32, String> {
        let micros = self
            .rest
            .get(..7)
            .filter(|f| f.starts_with(['.', ',']))
            .and_then(|f| {
                f[1..]
                    .parse::<u32>()
                    .ok()
                    .filter(|_| f[1..].bytes().all(|b| b.is_ascii_digit()))
            })
            .ok_or_else(|| self.bad(".000000"))?;
        self.rest = &self.rest[7..];
        Ok(micros)
    }

    /// `Z07:00`: `Z`, or a signed offset, in seconds east of UTC.
    fn offset(&mut self) -> Result<i32, String> {
        if let Some(after) = self.rest.strip_prefix('Z') {
            self.rest = after;
            return Ok(0);
        }
        let tz = self.rest;
        let b = tz.as_bytes();
        if b.len() < 6 || b.get(3) != Some(&b':') {
            return Err(self.bad("Z07:00"));
        }
        let field = |r: std::ops::Range<usize>| tz.get(r).and_then(|f| getnum(f, true)).map(|(n, _)| n);
        let (Some(hh), Some(mm), Some(after)) = (field(1..3), field(4..6), tz.get(6..)) else {
            return Err(self.bad("Z07:00"));
        };
        if hh > 24 {
            return Err(out_of_range(self.value, "time zone offset hour"));
        }
        if mm > 60 {
            return Err(out_of_range(self.value, "time zone offset minute"));
        }
        let magnitude = i32::try_from(hh * 3600 + mm * 60).unwrap_or(0);
        let offset = match b.first() {
            Some(b'+') => magnitude,
            Some(b'-') => -magnitude,
            _ => return Err(self.bad("Z07:00")),
        };
        self.rest = after;
        Ok(offset)
    }
}

#[allow(clippy::too_many_arguments)]
fn render_utc(
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    micros: u32,
    offset_secs: i32,
) -> Option<String> {
    let small = |n: u32| i8::try_from(n).ok();
    let dt = jiff::civil::DateTime::new(
        i16::try_from(year).ok()?,
        small(month)?,
        small(day)?,
        small(hour)?,
        small(minute)?,
        small(second)?,
        i32::try_from(micros).ok()?.checked_mul(1000)?,
    )
    .ok()?;
    let offset = jiff::tz::Offset::from_seconds(offset_secs).ok()?;
    let ts = offset.to_timestamp(dt).ok()?;
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%S.%6fZ", ts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        assert_eq!(
            parse_micro_time("2024-02-29T10:11:12.123456Z").unwrap(),
            "2024-02-29T10:11:12.123456Z"
        );
        assert_eq!(
            parse_micro_time("2024-01-01T01:00:00.000001+02:00").unwrap(),
            "2023-12-31T23:00:00.000001Z"
        );
        assert_eq!(
            parse_micro_time("2024-01-01T00:00:00.123Z").unwrap_err(),
            r#"parsing time "2024-01-01T00:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".123Z" as ".000000""#
        );
        assert_eq!(
            parse_micro_time("2024-01-01T00:00:00.123456789Z").unwrap_err(),
            r#"parsing time "2024-01-01T00:00:00.123456789Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "789Z" as "Z07:00""#
        );
        assert_eq!(
            parse_micro_time("2024-01-01T00:00:00Z").unwrap_err(),
            r#"parsing time "2024-01-01T00:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000""#
        );
        assert_eq!(
            parse_micro_time("2023-02-29T00:00:00.000000Z").unwrap_err(),
            r#"parsing time "2023-02-29T00:00:00.000000Z": day out of range"#
        );
        assert_eq!(
            parse_micro_time("2024-13-01T00:00:00.000000Z").unwrap_err(),
            r#"parsing time "2024-13-01T00:00:00.000000Z": month out of range"#
        );
        assert_eq!(
            parse_micro_time("yesterday").unwrap_err(),
            r#"parsing time "yesterday" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "yesterday" as "2006""#
        );
        assert!(parse_micro_time("2024-01-01T00:00:00.000000+01:5\u{20ac}").is_err());
        assert!(parse_micro_time("2024-01-01T00:00:00.000000\u{e9}1:00").is_err());
        assert!(parse_micro_time("\u{e9}\u{e9}\u{e9}\u{e9}").is_err());
        assert_eq!(
            parse_micro_time("2024-01-01T00:00:00.000000Zjunk").unwrap_err(),
            r#"parsing time "2024-01-01T00:00:00.000000Zjunk": extra text: "junk""#
        );
    }
}
