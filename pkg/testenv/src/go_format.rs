//! How Go's standard library writes values, which kube-apiserver's messages and
//! client-go's printing quote: `fmt`'s verbs, `encoding/json`'s encoding and the type
//! names in its errors.

use serde_json::Value;

/// The JSON type names encoding/json uses in its errors (`UnmarshalTypeError`).
pub(crate) fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `%+v` of a decoded JSON value (`map[k:v ...]`, sorted keys).
pub(crate) fn go_map_string(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.as_f64().map(go_float_text).unwrap_or_default(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_map_string).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let parts: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_map_string(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// A decoded JSON value as Go's `%#v` prints it (how field errors show values of
/// no simpler type).
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => format!(
            "[]interface {{}}{{{}}}",
            a.iter().map(go_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "map[string]interface {{}}{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k:?}:{}", go_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// An `ObjectMeta` as Go's `%#v` prints the struct (how a field error shows
/// metadata that must be empty). Pointers Go would print as addresses
/// (`deletionGracePeriodSeconds`, an owner reference's flags) show `0xc000000000`.
pub(crate) fn go_object_meta(meta: &Value) -> String {
    let text = |k: &str| format!("{:?}", meta.get(k).and_then(Value::as_str).unwrap_or_default());
    let time = |k: &str| meta.get(k).and_then(Value::as_str).map(go_time);
    let map = |k: &str| match meta.get(k).and_then(Value::as_object) {
        Some(m) if !m.is_empty() => {
            let mut entries: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
                .collect();
            entries.sort();
            format!("map[string]string{{{}}}", entries.join(", "))
        }
        _ => "map[string]string(nil)".to_owned(),
    };
    let finalizers = match meta.get("finalizers").and_then(Value::as_array) {
        Some(f) if !f.is_empty() => format!(
            "[]string{{{}}}",
            f.iter()
                .map(|v| format!("{:?}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "[]string(nil)".to_owned(),
    };
    format!(
        "v1.ObjectMeta{{Name:{}, GenerateName:{}, Namespace:{}, SelfLink:{}, UID:{}, ResourceVersion:{}, \
         Generation:{}, CreationTimestamp:{}, DeletionTimestamp:{}, DeletionGracePeriodSeconds:{}, \
         Labels:{}, Annotations:{}, OwnerReferences:{}, Finalizers:{finalizers}, ManagedFields:[]v1.ManagedFieldsEntry(nil)}}",
        text("name"),
        text("generateName"),
        text("namespace"),
        text("selfLink"),
        text("uid"),
        text("resourceVersion"),
        meta.get("generation").and_then(Value::as_i64).unwrap_or_default(),
        time("creationTimestamp").unwrap_or_else(|| go_time("0001-01-01T00:00:00Z")),
        time("deletionTimestamp").unwrap_or_else(|| "<nil>".to_owned()),
        if meta
            .get("deletionGracePeriodSeconds")
            .is_some_and(|v| !v.is_null())
        {
            "(*int64)(0xc000000000)"
        } else {
            "(*int64)(nil)"
        },
        map("labels"),
        map("annotations"),
        go_owner_references(meta.get("ownerReferences")),
    )
}

fn go_owner_references(refs: Option<&Value>) -> String {
    let Some(refs) = refs.and_then(Value::as_array).filter(|r| !r.is_empty()) else {
        return "[]v1.OwnerReference(nil)".to_owned();
    };
    let one = |r: &Value| {
        let text = |k: &str| format!("{:?}", r.get(k).and_then(Value::as_str).unwrap_or_default());
        let flag = |k: &str| {
            if r.get(k).is_some_and(|v| !v.is_null()) {
                "(*bool)(0xc000000000)"
            } else {
                "(*bool)(nil)"
            }
        };
        format!(
            "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
            text("apiVersion"),
            text("kind"),
            text("name"),
            text("uid"),
            flag("controller"),
            flag("blockOwnerDeletion"),
        )
    };
    format!(
        "[]v1.OwnerReference{{{}}}",
        refs.iter().map(one).collect::<Vec<_>>().join(", ")
    )
}

/// An RFC 3339 time as Go's `%#v` prints a `time.Time` in UTC.
fn go_time(rfc3339: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let Ok(t) = rfc3339.parse::<jiff::Timestamp>() else {
        return format!("{rfc3339:?}");
    };
    let d = t.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    let month = MONTHS
        .get(usize::try_from(d.month() - 1).unwrap_or_default())
        .copied()
        .unwrap_or_default();
    format!(
        "time.Date({}, time.{month}, {}, {}, {}, {}, {}, time.UTC)",
        d.year(),
        d.day(),
        d.hour(),
        d.minute(),
        d.second(),
        d.subsec_nanosecond()
    )
}

/// A float as Go's `fmt` prints it with `%v` (`strconv.FormatFloat(f, 'g', -1, 64)`).
pub(crate) fn go_float_text(f: f64) -> String {
    // A number literal too long for a float64 parses to infinity.
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let (neg, digits, dp) = shortest_digits(f);
    let exp = dp - 1;
    if !(-4..6).contains(&exp) {
        exponent_form(neg, &digits, exp)
    } else {
        plain_form(neg, &digits, dp)
    }
}

/// A float as Go's `encoding/json` writes it.
pub(crate) fn go_float_json(f: f64) -> String {
    // JSON has no such numbers, and serde_json makes none.
    if !f.is_finite() {
        return "null".into();
    }
    let (neg, digits, dp) = shortest_digits(f);
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let mut s = exponent_form(neg, &digits, dp - 1);
        // encoding/json writes e-7 where strconv writes e-07.
        if let Some(at) = s.find("e-0") {
            s.remove(at + 2);
        }
        s
    } else {
        plain_form(neg, &digits, dp)
    }
}

/// The shortest decimal digits that read back as `f`, and where the point goes.
fn shortest_digits(f: f64) -> (bool, String, i64) {
    let e = format!("{:e}", f.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i64 = exp.parse().unwrap_or_default();
    (f.is_sign_negative(), digits, exp + 1)
}

fn exponent_form(neg: bool, digits: &str, exp: i64) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push_str(&digits[..1]);
    if digits.len() > 1 {
        s.push('.');
        s.push_str(&digits[1..]);
    }
    s.push_str(&format!(
        "e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.unsigned_abs()
    ));
    s
}

fn plain_form(neg: bool, digits: &str, dp: i64) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let n = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    if dp <= 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat(usize::try_from(-dp).unwrap_or_default()));
        s.push_str(digits);
    } else if dp >= n {
        s.push_str(digits);
        s.push_str(&"0".repeat(usize::try_from(dp - n).unwrap_or_default()));
    } else {
        let at = usize::try_from(dp).unwrap_or_default();
        s.push_str(&digits[..at]);
        s.push('.');
        s.push_str(&digits[at..]);
    }
    s
}

/// A JSON value as Go's `json.Marshal` writes the `Unstructured` form of it: sorted
/// keys, no spaces, `<`, `>` and `&` escaped, and numbers as `int64` or `float64`.
pub(crate) fn go_json(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, &mut out);
    out
}

fn write_go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&go_float_json(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => write_go_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(k, out);
                out.push(':');
                write_go_json(&m[k], out);
            }
            out.push('}');
        }
    }
}

fn write_go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn go_number_and_json_text() {
        assert_eq!(go_float_text(1.5), "1.5");
        assert_eq!(go_float_text(2.0), "2");
        assert_eq!(go_float_text(123_456.0), "123456");
        assert_eq!(go_float_text(1e6), "1e+06");
        assert_eq!(go_float_text(1_234_567.0), "1.234567e+06");
        assert_eq!(go_float_text(0.0001), "0.0001");
        assert_eq!(go_float_text(0.00001), "1e-05");
        assert_eq!(go_float_text(-0.5), "-0.5");
        assert_eq!(go_float_json(1e20), "100000000000000000000");
        assert_eq!(go_float_json(1e21), "1e+21");
        assert_eq!(go_float_json(1e-7), "1e-7");
        assert_eq!(go_float_json(0.000001), "0.000001");
        assert_eq!(
            go_json(&json!({"b": [1, 2.5, null], "a": "<x>&\u{1}\n"})),
            "{\"a\":\"\\u003cx\\u003e\\u0026\\u0001\\n\",\"b\":[1,2.5,null]}"
        );
    }

    #[test]
    fn object_meta_as_go_prints_the_struct() {
        assert_eq!(
            go_object_meta(
                &json!({"name": "x", "labels": {"b": "2", "a": "1"}, "creationTimestamp": "2024-03-05T06:07:08Z"})
            ),
            "v1.ObjectMeta{Name:\"x\", GenerateName:\"\", Namespace:\"\", SelfLink:\"\", UID:\"\", ResourceVersion:\"\", \
             Generation:0, CreationTimestamp:time.Date(2024, time.March, 5, 6, 7, 8, 0, time.UTC), DeletionTimestamp:<nil>, \
             DeletionGracePeriodSeconds:(*int64)(nil), Labels:map[string]string{\"a\":\"1\", \"b\":\"2\"}, \
             Annotations:map[string]string(nil), OwnerReferences:[]v1.OwnerReference(nil), Finalizers:[]string(nil), \
             ManagedFields:[]v1.ManagedFieldsEntry(nil)}"
        );
        assert!(
            go_object_meta(&json!({}))
                .contains("CreationTimestamp:time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)")
        );
    }
}
