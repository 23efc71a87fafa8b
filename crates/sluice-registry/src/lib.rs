//! The schema registry as sluice reads it (docs/ARCHITECTURE.md#registry-formats): a writer's
//! schema is fetched by the id in a record's wire header from the Confluent-compatible API
//! (`GET /schemas/ids/{id}`, its references by subject and version), compiled once by
//! `sluice_sinks::wire` and kept in a bounded cache; the decoder reads the cache and never
//! waits on the network.
//!
//! A registry that cannot be reached, or answers with a server error, is transient
//! ([`RegistryError::disposition`]): the batch that needs the schema waits and is decoded
//! again. An id the registry does not know, or a schema that does not compile, is the
//! record's fault: its records are dead-lettered with the reason and the id.

mod client;
mod error;
mod registry;
pub mod settings;

pub use client::{Latest, RegistryClient};
pub use error::RegistryError;
pub use registry::Registry;
pub use settings::RegistrySettings;
