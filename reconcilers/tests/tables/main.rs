//! The sample reconcilers' table tests (rows A1–A13 and S1–S11), one binary.

mod addressableservice;
mod simpledeployment;
