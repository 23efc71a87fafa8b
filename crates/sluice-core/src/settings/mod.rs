//! The settings toolkit (docs/ARCHITECTURE.md#settings): settings are parsed — not merely
//! validated — from the environment by pure functions.
//!
//! A process's settings are built from any `name → value` lookup (the process environment
//! in the binary, a map in tests) into one immutable value, or a [`SettingsError`] naming
//! the variable and the accepted form; the binary exits with status 2 on such an error,
//! before anything is consumed.
//!
//! Every variable is declared once ([`variable`]): its name, default, meaning and form are
//! what both the parser and `--help` read. This module holds what every process shares —
//! the forms ([`forms`]), the Kafka client's variables ([`kafka_client`]), the durability of
//! topics ([`topics`]) and `DATABASE_URL`; the storage consumer's own settings are
//! `sluice_storage::settings::StorageSettings`, the dispatcher's
//! `sluice_dispatch::settings::OutboxSettings`.

pub mod database_url;
mod error;
pub mod forms;
pub mod kafka_client;
mod read;
pub mod topics;
pub mod variable;

pub use error::{SettingsError, UnusableSetting};
pub use forms::{OffsetReset, SyncCommit};
pub use read::{EnvReader, database_host_port, is_identifier, is_topic_name, valid_database_url};
pub use variable::{Var, Variable};

/// `DATABASE_URL`, which every command that reaches PostgreSQL reads; secret (its password
/// never reaches an error).
pub const DATABASE_URL: Var<forms::DatabaseUrl> = Var::new(
    "DATABASE_URL",
    (),
    "PostgreSQL URL, postgres://user@host:port/db",
)
.secret();
