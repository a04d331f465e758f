//! Timestamps as kube-apiserver writes and reads them: `metav1.Time` (whole seconds,
//! UTC) for the times it sets, and `metav1.MicroTime` fields decoded as Go's
//! `time.Parse("2006-01-02T15:04:05.000000Z07:00", s)` does, which wants exactly six
//! fractional digits, then re-encoded in UTC, so an offset is normalised to `Z`.

use serde_json::Value;

use crate::go_format::go_json_type;

const LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// The current time as a `metav1.Time`.
pub(crate) fn now() -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", jiff::Timestamp::now()).unwrap_or_default()
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
    let lit = |v: &'static str, c: char, rest: &str| -> Result<usize, String> {
        if rest.starts_with(c) {
            Ok(1)
        } else {
            Err(bad(value, v, rest))
        }
    };
    let mut rest = value;
    // 2006
    let year = match rest.get(..4) {
        Some(y) if digit(rest, 0).is_some() && y.bytes().all(|b| b.is_ascii_digit()) => {
            y.parse::<i32>().map_err(|_| bad(value, "2006", rest))?
        }
        _ => return Err(bad(value, "2006", rest)),
    };
    rest = &rest[4..];
    rest = &rest[lit("-", '-', rest)?..];
    let (month, r) = getnum(rest, true).ok_or_else(|| bad(value, "01", rest))?;
    if !(1..=12).contains(&month) {
        return Err(out_of_range(value, "month"));
    }
    rest = r;
    rest = &rest[lit("-", '-', rest)?..];
    let (day, r) = getnum(rest, true).ok_or_else(|| bad(value, "02", rest))?;
    rest = r;
    rest = &rest[lit("T", 'T', rest)?..];
    let (hour, r) = getnum(rest, false).ok_or_else(|| bad(value, "15", rest))?;
    if hour >= 24 {
        return Err(out_of_range(value, "hour"));
    }
    rest = r;
    rest = &rest[lit(":", ':', rest)?..];
    let (minute, r) = getnum(rest, true).ok_or_else(|| bad(value, "04", rest))?;
    if minute >= 60 {
        return Err(out_of_range(value, "minute"));
    }
    rest = r;
    rest = &rest[lit(":", ':', rest)?..];
    let (second, r) = getnum(rest, true).ok_or_else(|| bad(value, "05", rest))?;
    if second >= 60 {
        return Err(out_of_range(value, "second"));
    }
    rest = r;
    // .000000: exactly six digits after the point.
    let frac = rest
        .get(..7)
        .filter(|f| f.starts_with(['.', ',']))
        .and_then(|f| {
            f[1..]
                .parse::<u32>()
                .ok()
                .filter(|_| f[1..].bytes().all(|b| b.is_ascii_digit()))
        })
        .ok_or_else(|| bad(value, ".000000", rest))?;
    rest = &rest[7..];
    // Z07:00
    let offset_secs: i32 = if let Some(r) = rest.strip_prefix('Z') {
        rest = r;
        0
    } else {
        let tz = rest;
        let b = tz.as_bytes();
        if b.len() < 6 || b.get(3) != Some(&b':') {
            return Err(bad(value, "Z07:00", tz));
        }
        let field = |r: std::ops::Range<usize>| tz.get(r).and_then(|f| getnum(f, true)).map(|(n, _)| n);
        let (Some(hh), Some(mm), Some(after)) = (field(1..3), field(4..6), tz.get(6..)) else {
            return Err(bad(value, "Z07:00", tz));
        };
        if hh > 24 {
            return Err(out_of_range(value, "time zone offset hour"));
        }
        if mm > 60 {
            return Err(out_of_range(value, "time zone offset minute"));
        }
        let magnitude = i32::try_from(hh * 3600 + mm * 60).unwrap_or(0);
        rest = after;
        match b.first() {
            Some(b'+') => magnitude,
            Some(b'-') => -magnitude,
            _ => return Err(bad(value, "Z07:00", tz)),
        }
    };
    if !rest.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            quote(value),
            quote(rest)
        ));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(out_of_range(value, "day"));
    }
    render_utc(year, month, day, hour, minute, second, frac, offset_secs)
        .ok_or_else(|| out_of_range(value, "year"))
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
