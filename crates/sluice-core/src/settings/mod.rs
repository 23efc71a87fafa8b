//! Settings of the storage consumer (docs/ARCHITECTURE.md#settings), parsed — not merely validated — from the
//! environment by a pure function.
//!
//! [`Settings::from_lookup`] takes any `name → value` lookup (the process environment in
//! the binary, a map in tests) and returns one immutable value that every pipeline shares
//! read-only, or a [`SettingsError`] naming the variable and the accepted form. The binary
//! exits with status 2 on such an error, before anything is consumed.
//!
//! Every variable is declared once ([`variable`]): its name, default, meaning and form are
//! what both the parser and `--help` ([`variables`]) read. The storage consumer's own are in
//! [`storage`] (and [`pipelines`], [`topics`], [`kafka_client`]); the dispatcher's in
//! `sluice-dispatch`.

mod error;
pub mod forms;
pub mod kafka_client;
pub mod pipelines;
mod read;
pub mod storage;
pub mod topics;
pub mod variable;

pub use error::SettingsError;
pub use forms::{OffsetReset, SyncCommit};
pub use pipelines::{DEFAULT_WRITERS, MAX_WRITERS, PipelineSettings};
pub use read::{EnvReader, database_host_port, is_identifier, is_topic_name, valid_database_url};
pub use storage::{Settings, variables};
pub use variable::{Var, Variable};

/// `DATABASE_URL`, which every command that reaches PostgreSQL reads; secret (its password
/// never reaches an error).
pub const DATABASE_URL: Var<forms::DatabaseUrl> = Var::new(
    "DATABASE_URL",
    (),
    "PostgreSQL URL, postgres://user@host:port/db",
)
.secret();

/// A test environment: a valid `DATABASE_URL` and `pairs` (which may replace it).
#[cfg(test)]
pub(crate) fn with_database_url(
    pairs: &[(&str, &str)],
) -> std::collections::BTreeMap<String, String> {
    let mut map: std::collections::BTreeMap<String, String> = [(
        "DATABASE_URL".to_owned(),
        "postgres://u@127.0.0.1:5432/db".to_owned(),
    )]
    .into();
    for (k, v) in pairs {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    map
}

#[cfg(test)]
mod tests;
