//! `Url`: a URI reference that serialises as a plain string, like Knative's `apis.URL`.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use fluent_uri::UriRef;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// A URI reference (RFC 3986), kept exactly as written.
///
/// Unlike WHATWG URL parsers, nothing is normalised: `http://webhook.ns.svc.cluster.local`
/// stays without a trailing slash, matching what Knative writes into `status.address.url`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Url(UriRef<String>);

/// A string that is not a valid URI reference.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid URL {input:?}: {reason}; expected a URI such as \"http://host.example/path\"")]
pub struct UrlParseError {
    input: String,
    reason: String,
}

impl Url {
    /// Parses a URI reference.
    pub fn parse(input: &str) -> Result<Self, UrlParseError> {
        UriRef::parse(input.to_owned())
            .map(Url)
            .map_err(|(err, input)| UrlParseError {
                input,
                reason: err.to_string(),
            })
    }

    /// `http://<host>`.
    pub fn http(host: &str) -> Result<Self, UrlParseError> {
        Self::parse(&format!("http://{host}"))
    }

    /// `https://<host>`.
    pub fn https(host: &str) -> Result<Self, UrlParseError> {
        Self::parse(&format!("https://{host}"))
    }

    /// The URL as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The scheme, if any (`http`).
    pub fn scheme(&self) -> Option<&str> {
        self.0.scheme().map(|s| s.as_str())
    }

    /// The host, if the URL has an authority.
    pub fn host(&self) -> Option<&str> {
        self.0.authority().map(|a| a.host())
    }

    /// The path (possibly empty).
    pub fn path(&self) -> &str {
        self.0.path().as_str()
    }

    /// True for the empty reference `""`.
    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }
}

impl FromStr for Url {
    type Err = UrlParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Url::parse(s)
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Url({:?})", self.as_str())
    }
}

impl Serialize for Url {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Url {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Url::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Url {
    fn schema_name() -> Cow<'static, str> {
        "Url".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_url_is_kept_without_trailing_slash() {
        let url = Url::http("webhook.ns.svc.cluster.local").unwrap();
        assert_eq!(url.to_string(), "http://webhook.ns.svc.cluster.local");
        assert_eq!(url.scheme(), Some("http"));
        assert_eq!(url.host(), Some("webhook.ns.svc.cluster.local"));
        assert_eq!(url.path(), "");
    }

    #[test]
    fn serialises_as_a_string_and_round_trips() {
        let url: Url = serde_json::from_str("\"https://a.example/x?y=1#z\"").unwrap();
        assert_eq!(
            serde_json::to_string(&url).unwrap(),
            "\"https://a.example/x?y=1#z\""
        );
        let rel: Url = serde_json::from_str("\"/relative/path\"").unwrap();
        assert_eq!(rel.scheme(), None);
    }

    #[test]
    fn parse_errors_say_what_and_how() {
        let err = Url::parse("http://bad host").unwrap_err().to_string();
        assert!(err.starts_with("invalid URL \"http://bad host\": "), "{err}");
        assert!(err.contains("expected a URI such as"), "{err}");
        let err = serde_json::from_str::<Url>("\"http://a b\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid URL"), "{err}");
    }
}
