//! The verbs of Kubernetes API requests, as RBAC rules and the API server's
//! authorizer name them: what a controller declares it needs, what the
//! generated RBAC grants, and what a test API server authorizes are one type.

use std::fmt;
use std::str::FromStr;

/// An API request verb, in the order Kubernetes lists them.
///
/// ```
/// use kinject_types::Verb;
///
/// assert_eq!(Verb::DeleteCollection.as_str(), "deletecollection");
/// assert_eq!("watch".parse::<Verb>(), Ok(Verb::Watch));
/// assert!("fetch".parse::<Verb>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// Read one object.
    Get,
    /// Read a collection.
    List,
    /// Watch a collection or object.
    Watch,
    /// Create an object.
    Create,
    /// Replace an object (PUT).
    Update,
    /// Patch an object.
    Patch,
    /// Delete an object.
    Delete,
    /// Delete a collection.
    DeleteCollection,
}

impl Verb {
    /// Every verb, in the order Kubernetes lists them.
    pub const ALL: [Verb; 8] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ];

    /// The verb as RBAC rules and audit logs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not one of the API verbs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownVerb(pub String);

impl fmt::Display for UnknownVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not an API verb; use one of get, list, watch, create, update, patch, delete, deletecollection",
            self.0
        )
    }
}

impl std::error::Error for UnknownVerb {}

impl FromStr for Verb {
    type Err = UnknownVerb;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Verb::ALL
            .into_iter()
            .find(|verb| verb.as_str() == text)
            .ok_or_else(|| UnknownVerb(text.to_owned()))
    }
}
