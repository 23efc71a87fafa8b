//! sluice's PostgreSQL adapter.
//!
//! Repositories hold no connection: every function takes the caller's open connection or
//! transaction (`&mut PgConnection`), so the data rows, the dead letters and the idempotency
//! records of one batch commit or roll back together. Every write is one statement per
//! batch (`UNNEST` arrays) with `ON CONFLICT` on the table's natural key, so redelivery is a
//! no-op (docs/ARCHITECTURE.md#guarantees, docs/ARCHITECTURE.md#tables).

mod bind;
pub mod catalog;
pub mod classify;
pub mod connect;
pub mod declared;
mod held;
mod infinite;
mod key_cache;
pub mod lookup;
pub mod migrate;
pub mod offsets;
pub mod ops;
pub mod repo;

pub use classify::{disposition, sqlstate};
pub use connect::{backend_pid, cancel_backend, connect, connect_options};
pub use migrate::{MigrateError, MigrationReport, Scope, migrate, migrate_own};
