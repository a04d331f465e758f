//! Go's `time.Duration` text: Knative's ConfigMaps hold durations in Go's
//! syntax and its messages print them in Go's format, so both directions live
//! here, byte for byte as Go's `time` package does them. `humantime` and
//! friends accept and print other shapes (`1m 30s`, no `µs`), which would change
//! what a ConfigMap means and what a message says.

use std::time::Duration;

/// Formats a duration as Go's `time.Duration.String` does (`1m30s`, `1.5s`,
/// `5ms`, `0s`), so messages match Knative's byte for byte.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, scale, digits) = if nanos < 1_000 {
            ("ns", 1, 0)
        } else if nanos < 1_000_000 {
            ("µs", 1_000, 3)
        } else {
            ("ms", 1_000_000, 6)
        };
        return format!("{}{}{unit}", nanos / scale, fraction(nanos % scale, digits));
    }
    let secs = nanos / 1_000_000_000;
    let (hours, minutes, seconds) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h{minutes}m"));
    } else if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{seconds}{}s", fraction(nanos % 1_000_000_000, 9)));
    out
}

/// `.` and the `digits`-digit fraction without trailing zeros; empty for zero.
fn fraction(value: u128, digits: usize) -> String {
    if value == 0 || digits == 0 {
        return String::new();
    }
    let text = format!("{value:0digits$}");
    format!(".{}", text.trim_end_matches('0'))
}

/// Formats signed nanoseconds as Go's `time.Duration.String` does (`-1m0s`).
pub(crate) fn signed_go_duration(n: i128) -> String {
    let d = Duration::from_nanos(u64::try_from(n.unsigned_abs()).unwrap_or(u64::MAX));
    if n < 0 {
        format!("-{}", go_duration(d))
    } else {
        go_duration(d)
    }
}

/// Durations larger than this many nanoseconds overflow Go's `int64`.
const MAX_NANOS: u128 = 1 << 63;

/// Go's `time.ParseDuration`: signed nanoseconds, or its error text.
pub fn parse_go_duration(orig: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {}", time_quote(orig.as_bytes()));
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let (nanos, rest) = component(s, orig)?;
        s = rest;
        total += nanos;
        if total > MAX_NANOS {
            return Err(invalid());
        }
    }
    if neg {
        return Ok(-(total as i128));
    }
    if total > MAX_NANOS - 1 {
        return Err(invalid());
    }
    Ok(total as i128)
}

/// One `<number><unit>` of a duration at the start of `s`, in nanoseconds,
/// and what follows it; errors name the whole duration `orig`.
fn component<'a>(s: &'a [u8], orig: &str) -> Result<(u128, &'a [u8]), String> {
    let invalid = || format!("time: invalid duration {}", time_quote(orig.as_bytes()));
    if !(s[0] == b'.' || s[0].is_ascii_digit()) {
        return Err(invalid());
    }
    let (mut v, pre, s) = integer_part(s).ok_or_else(invalid)?;
    let (f, scale, post, s) = fraction_part(s);
    if !pre && !post {
        return Err(invalid());
    }
    let (unit, s) = unit(s, orig)?;
    if v > MAX_NANOS / unit {
        return Err(invalid());
    }
    v *= unit;
    if f > 0 {
        // Go computes the fraction in float64 and truncates.
        v += (f as f64 * (unit as f64 / scale)) as u128;
        if v > MAX_NANOS {
            return Err(invalid());
        }
    }
    Ok((v, s))
}

/// The leading digits of `s` as a number (`None` past Go's int64 range),
/// whether there were any, and the rest.
fn integer_part(s: &[u8]) -> Option<(u128, bool, &[u8])> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut v: u128 = 0;
    for &c in &s[..digits] {
        if v > MAX_NANOS / 10 {
            return None;
        }
        v = v * 10 + u128::from(c - b'0');
        if v > MAX_NANOS {
            return None;
        }
    }
    Some((v, digits > 0, &s[digits..]))
}

/// A `.<digits>` fraction at the start of `s`: its digits as a number (Go
/// stops adding digits once that would overflow), the power of ten that
/// divides it, whether there were digits, and the rest.
fn fraction_part(s: &[u8]) -> (u128, f64, bool, &[u8]) {
    let (mut f, mut scale) = (0u128, 1f64);
    let Some(s) = s.strip_prefix(b".") else {
        return (f, scale, false, s);
    };
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut overflow = false;
    for &c in &s[..digits] {
        if overflow {
            continue;
        }
        if f > (MAX_NANOS - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = f * 10 + u128::from(c - b'0');
        if y > MAX_NANOS {
            overflow = true;
            continue;
        }
        f = y;
        scale *= 10.0;
    }
    (f, scale, digits > 0, &s[digits..])
}

/// The unit at the start of `s` in nanoseconds, and the rest.
fn unit<'a>(s: &'a [u8], orig: &str) -> Result<(u128, &'a [u8]), String> {
    let unit_len = s
        .iter()
        .take_while(|&&c| c != b'.' && !c.is_ascii_digit())
        .count();
    if unit_len == 0 {
        return Err(format!(
            "time: missing unit in duration {}",
            time_quote(orig.as_bytes())
        ));
    }
    let nanos = match &s[..unit_len] {
        b"ns" => 1,
        // "µs" as U+00B5 (micro sign) or U+03BC (Greek mu).
        b"us" | [0xc2, 0xb5, b's'] | [0xce, 0xbc, b's'] => 1_000,
        b"ms" => 1_000_000,
        b"s" => 1_000_000_000,
        b"m" => 60_000_000_000,
        b"h" => 3_600_000_000_000,
        other => {
            return Err(format!(
                "time: unknown unit {} in duration {}",
                time_quote(other),
                time_quote(orig.as_bytes())
            ));
        }
    };
    Ok((nanos, &s[unit_len..]))
}

/// The `time` package's own quoting (not `strconv`'s): ASCII from space on as
/// is, with `"` and `\` escaped, and every other byte as `\xNN`.
fn time_quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(b));
            }
            0x20..=0x7f => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(5), "5ms"),
            (Duration::from_micros(5_250), "5.25ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(1000), "16m40s"),
            (Duration::from_secs(36 * 3600 + 1), "36h0m1s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn go_durations_parse_like_go() {
        for (s, want) in [
            ("0", 0i128),
            ("-0", 0),
            ("+0", 0),
            ("0s", 0),
            ("5s", 5_000_000_000),
            ("1h30m", 5_400_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("300ms", 300_000_000),
            ("-2s", -2_000_000_000),
            ("+5s", 5_000_000_000),
            ("1us", 1_000),
            ("1µs", 1_000),
            ("1μs", 1_000),
            ("7ns", 7),
            (".5s", 500_000_000),
            ("5.s", 5_000_000_000),
            ("1m0.5s", 60_500_000_000),
            ("1h1m1s1ms1us1ns", 3_661_001_001_001),
            ("0.3333333333333333333h", 1_200_000_000_000),
            ("9223372036854775807ns", 9_223_372_036_854_775_807),
            ("-9223372036854775808ns", -9_223_372_036_854_775_808),
        ] {
            assert_eq!(parse_go_duration(s), Ok(want), "{s}");
        }
        for (s, message) in [
            ("", "time: invalid duration \"\""),
            ("-", "time: invalid duration \"-\""),
            ("abc", "time: invalid duration \"abc\""),
            ("10", "time: missing unit in duration \"10\""),
            ("5x", "time: unknown unit \"x\" in duration \"5x\""),
            ("5S", "time: unknown unit \"S\" in duration \"5S\""),
            ("1..5s", "time: missing unit in duration \"1..5s\""),
            (".s", "time: invalid duration \".s\""),
            ("1s ", "time: unknown unit \"s \" in duration \"1s \""),
            (" 1s", "time: invalid duration \" 1s\""),
            ("٣s", "time: invalid duration \"\\xd9\\xa3s\""),
            (
                "5µx",
                "time: unknown unit \"\\xc2\\xb5x\" in duration \"5\\xc2\\xb5x\"",
            ),
            (
                "9223372036854775808ns",
                "time: invalid duration \"9223372036854775808ns\"",
            ),
            ("3000000h", "time: invalid duration \"3000000h\""),
            ("a\"b", "time: invalid duration \"a\\\"b\""),
        ] {
            assert_eq!(parse_go_duration(s), Err(message.to_owned()), "{s:?}");
        }
    }
}
