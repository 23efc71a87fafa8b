//! Decoder tests: payload-level errors, one table of rules per decoder, and properties.

mod app_stats;
mod declared;
mod legacy;
mod network_metrics;
mod payload;
mod properties;
mod reviews;
mod support;
