//! The seed mappings (`deploy/sinks/*.toml`, compiled in as [`sluice_core::PipelineKind`]s) keep the
//! seed topics' contracts: payload-level errors, one table of rules per topic, the legacy
//! camelCase hint, the decoded cells, and properties. The reasons are the dead-letter
//! reasons the topics have always given.

mod app_stats;
mod legacy;
mod network_metrics;
mod payload;
mod properties;
mod reviews;
mod support;
mod tables;
