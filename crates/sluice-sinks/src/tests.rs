//! Unit tests of declared sinks: the file, the checks without a database, the plan, the seeds.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod auto;
mod changes;
mod decode;
mod file;
mod modes;
mod plan;
mod registry;
mod registry_fields;
mod routes;
mod seeds;
