//! Shared fixture of the dispatcher tests: the outbox library's fixture (a migrated
//! per-test schema, events, rows put in any status through legal transitions) and the Kafka
//! side ([`kafka`]: dispatcher settings for a test schema, reading a topic back).
#![allow(
    dead_code,
    reason = "each test file uses a different part of the fixture"
)]

pub mod kafka;
#[path = "../../../sluice-outbox/tests/common/mod.rs"]
mod outbox;

pub use outbox::*;
