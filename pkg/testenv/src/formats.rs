//! The string `format`s kube-apiserver checks in a custom resource (those of
//! kube-openapi's `strfmt` registry), each as that registry checks it. A
//! format it does not know is not checked, as there. `isbn`, `isbn10`,
//! `isbn13` and `creditcard` are not checked here (see the README).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;

/// Whether `text` is a valid `format` string; true for a format kube-apiserver
/// does not check. Names are matched as kube-openapi matches them, without
/// dashes and underscores (`date-time` is `datetime`).
pub(crate) fn is_valid(format: &str, text: &str) -> bool {
    let name: String = format
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    match name.as_str() {
        "datetime" => is_date_time(text),
        "date" => is_date(text),
        "duration" => is_duration(text),
        "byte" => base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text).is_ok(),
        "uuid" => matches(&UUID, text),
        "uuid3" => matches(&UUID, text) && version(text) == Some('3'),
        "uuid4" => matches(&UUID, text) && version(text) == Some('4') && variant_ok(text),
        "uuid5" => matches(&UUID, text) && version(text) == Some('5') && variant_ok(text),
        "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => text.contains(':') && text.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(text),
        "mac" => is_mac(text),
        "hostname" => is_hostname(text),
        "email" => matches(&EMAIL, text),
        "uri" => !text.is_empty() && !text.chars().any(|c| c.is_whitespace() || c.is_control()),
        "hexcolor" => matches(&HEX_COLOR, text),
        "rgbcolor" => is_rgb_color(text),
        "ssn" => matches(&SSN, text),
        "bsonobjectid" => text.len() == 24 && text.chars().all(|c| c.is_ascii_hexdigit()),
        _ => true,
    }
}

fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static UUID: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"));
static EMAIL: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"^[^@\s]+@[^@\s]+\.[^@\s]+$"));
static HEX_COLOR: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static SSN: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static RGB: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$"));
static TIME: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(z|[+-][0-9]{2}:[0-9]{2})$"));
static DURATION_PART: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"(\d+)\s*([A-Za-zµ]+)"));

fn matches(pattern: &LazyLock<Option<Regex>>, text: &str) -> bool {
    pattern.as_ref().is_some_and(|re| re.is_match(text))
}

fn version(uuid: &str) -> Option<char> {
    uuid.chars().nth(14)
}

fn variant_ok(uuid: &str) -> bool {
    uuid.chars()
        .nth(19)
        .is_some_and(|c| matches!(c.to_ascii_lowercase(), '8' | '9' | 'a' | 'b'))
}

/// `2006-01-02`, a real day.
fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let [year, month, day] = parts.as_slice() else {
        return false;
    };
    if year.len() != 4 || month.len() != 2 || day.len() != 2 {
        return false;
    }
    match (year.parse::<i16>(), month.parse::<i8>(), day.parse::<i8>()) {
        (Ok(y), Ok(m), Ok(d)) => jiff::civil::Date::new(y, m, d).is_ok(),
        _ => false,
    }
}

/// A date, `T`, and a time of day with seconds and a zone (any case).
fn is_date_time(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let Some((date, time)) = lower.split_once('t') else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let Some(Some(caps)) = TIME.as_ref().map(|re| re.captures(time)) else {
        return false;
    };
    let part = |i: usize| caps.get(i).map_or("", |m| m.as_str());
    part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
}

/// kube-openapi's durations: numbers with units, `30s`, `1h30m`, `2 days`.
fn is_duration(text: &str) -> bool {
    const UNITS: &[&str] = &[
        "ns", "us", "µs", "ms", "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute",
        "minutes", "h", "hr", "hrs", "hour", "hours", "d", "day", "days", "w", "wk", "wks", "week", "weeks",
    ];
    let Some(re) = DURATION_PART.as_ref() else {
        return false;
    };
    let mut found = false;
    for caps in re.captures_iter(text) {
        let unit = caps.get(2).map_or("", |m| m.as_str());
        if !UNITS.contains(&unit) {
            return false;
        }
        found = true;
    }
    found
}

fn is_cidr(text: &str) -> bool {
    let Some((address, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match address.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets, by `:` or `-`, or in dotted groups of four.
fn is_mac(text: &str) -> bool {
    let hex = |part: &str, len: usize| part.len() == len && part.chars().all(|c| c.is_ascii_hexdigit());
    for separator in [':', '-'] {
        let parts: Vec<&str> = text.split(separator).collect();
        if [6, 8, 20].contains(&parts.len()) && parts.iter().all(|p| hex(p, 2)) {
            return true;
        }
    }
    let groups: Vec<&str> = text.split('.').collect();
    [3, 4, 10].contains(&groups.len()) && groups.iter().all(|g| hex(g, 4))
}

/// RFC 1123 host names: labels of letters, digits and inner dashes, at most
/// 63 each and 255 in all.
fn is_hostname(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 255
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

fn is_rgb_color(text: &str) -> bool {
    let Some(Some(caps)) = RGB.as_ref().map(|re| re.captures(text)) else {
        return false;
    };
    (1..=3).all(|i| {
        caps.get(i)
            .and_then(|m| m.as_str().parse::<u16>().ok())
            .is_some_and(|v| v <= 255)
    })
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn each_format_takes_what_kube_openapi_takes() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "date-time",
                &["2026-12-07T04:13:50Z", "2026-12-07t04:13:50.5+01:00"],
                &["2026-12-07", "2026-13-01T00:00:00Z", "2026-12-07T24:00:00Z"],
            ),
            ("date", &["2024-02-29"], &["2023-02-29", "24-02-29", "2024-2-9"]),
            (
                "duration",
                &["30s", "1h30m", "2 days"],
                &["soon", "30", "5 fortnights"],
            ),
            ("byte", &["aGk=", ""], &["not base64!"]),
            (
                "uuid",
                &["123e4567-e89b-12d3-a456-426614174000"],
                &["123e4567e89b12d3a456426614174000"],
            ),
            (
                "uuid4",
                &["123e4567-e89b-42d3-a456-426614174000"],
                &["123e4567-e89b-12d3-a456-426614174000"],
            ),
            ("ipv4", &["10.0.0.1"], &["10.0.0.256", "::1"]),
            ("ipv6", &["::1", "fe80::1"], &["10.0.0.1"]),
            ("cidr", &["10.0.0.0/8", "fd00::/64"], &["10.0.0.0/33", "10.0.0.0"]),
            (
                "mac",
                &["00:1a:2b:3c:4d:5e", "00-1A-2B-3C-4D-5E"],
                &["00:1a:2b:3c:4d"],
            ),
            (
                "hostname",
                &["example.com", "a-b.c"],
                &["-bad.com", "a..b", "under_score.com"],
            ),
            ("email", &["me@example.com"], &["me.example.com", "me@example"]),
            ("uri", &["https://example.com/x?y=1"], &["has space", ""]),
            ("hexcolor", &["#fff", "a0b1c2"], &["#ffff"]),
            ("rgbcolor", &["rgb(255, 0, 10)"], &["rgb(256,0,0)"]),
            ("int32", &["anything"], &[]),
        ];
        for (format, good, bad) in cases {
            for text in *good {
                assert!(is_valid(format, text), "{format}: {text} should be valid");
            }
            for text in *bad {
                assert!(!is_valid(format, text), "{format}: {text} should be invalid");
            }
        }
    }
}
