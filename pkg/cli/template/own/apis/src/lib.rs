//! The API types of {{name}}, one module per group and version
//! (`kinject create api` adds them). No I/O lives here.
