//! A request as the server sees it, whichever face it came through.

use bytes::Bytes;
use http::Method;

use crate::registry::rbac::User;

/// A request as the server sees it, whichever face it came through.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) accept: String,
    pub(crate) content_type: String,
    pub(crate) body: Bytes,
    /// `host:port` the client used, for `/api`'s serverAddressByClientCIDRs.
    pub(crate) host: String,
    /// `User-Agent`; its part before the first `/` names the field manager by default.
    pub(crate) user_agent: String,
    /// Who makes the request (see [`crate::registry::rbac`]).
    pub(crate) user: User,
}

/// The request's query, with lookups.
pub(crate) struct QueryView<'a>(pub(crate) &'a [(String, String)]);

impl QueryView<'_> {
    pub(crate) fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    pub(crate) fn flag(&self, k: &str) -> Option<bool> {
        self.get(k).map(|v| v == "true" || v == "1")
    }
}
