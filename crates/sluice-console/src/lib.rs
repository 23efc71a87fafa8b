//! `sluice console`: the operator's web page — pipelines and their lag, dead letters to read
//! and replay, the outbox at a glance.
//!
//! The console reads PostgreSQL and Kafka with the same settings as the other commands and
//! talks to no running sluice process, so one console serves every instance. It keeps these
//! promises:
//!
//! - **Read-only unless a token is set.** Without `SLUICE_CONSOLE_TOKEN` every action route
//!   answers 403 and no action button is rendered; a non-loopback address without a token is
//!   refused at start ([`settings`]).
//! - **Every action is authenticated twice**: a session cookie (HttpOnly, SameSite=Strict)
//!   from a login with the token, and the session's CSRF token in the form ([`auth`]).
//! - **Untrusted bytes stay text.** Keys, payloads, reasons and every other byte that came
//!   from Kafka or the dead-letter table are rendered through auto-escaping templates, their
//!   control characters shown as visible escapes ([`shown`]); the Content-Security-Policy
//!   allows no inline script or style and no other origin (`server.rs`).
//! - **Replays follow the rules of `sluice dlq replay`**: the same functions
//!   ([`sluice_storage::dead_letter_replay`]), so a dead letter is replayed at most once and
//!   a message at most the replay limit.

pub mod auth;
mod error;
mod kafka_view;
mod pages;
mod queries;
mod sampler;
mod server;
pub mod settings;
pub mod shown;
mod sources;
mod state;
mod templates;

pub use error::ConsoleError;
pub use server::{CSP, bind, serve};
pub use settings::{ConsoleSettings, SettingsError};
pub use sources::{PipelineSource, RetrySource, Sources};
