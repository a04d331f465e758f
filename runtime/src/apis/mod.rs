//! API machinery shared by Knative-shaped kinds.
