//! The cache of writers' schemas the decoders read: each id fetched once and compiled once,
//! bounded in entries; an id the registry refused is remembered for a while, so its records
//! are dead-lettered without asking again for each batch.

use crate::client::{Latest, RegistryClient, SchemaText};
use crate::error::RegistryError;
use crate::settings::RegistrySettings;
use sluice_core::Disposition;
use sluice_sinks::schemas::{Known, WriterSchemas};
use sluice_sinks::wire::{SchemaKind, WriterSchema};
use std::sync::Arc;
use std::time::Duration;

/// Schemas kept, at most (a topic's history of versions is far smaller).
const CAPACITY: u64 = 10_000;

/// How long an id the registry refused stays refused before it is asked again.
const REFUSED_FOR: Duration = Duration::from_secs(60);

/// A registry and what was fetched from it.
#[derive(Debug, Clone)]
pub struct Registry {
    client: RegistryClient,
    schemas: moka::sync::Cache<i32, Arc<WriterSchema>>,
    refused: moka::sync::Cache<i32, Arc<str>>,
}

impl Registry {
    /// A registry as `settings` say.
    pub fn new(settings: &RegistrySettings) -> Result<Self, RegistryError> {
        Ok(Self {
            client: RegistryClient::new(settings)?,
            schemas: moka::sync::Cache::new(CAPACITY),
            refused: moka::sync::Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(REFUSED_FOR)
                .build(),
        })
    }

    /// Fetches and compiles each of `ids` not known yet. An id the registry does not know,
    /// or whose schema does not compile, is remembered as refused (its records are
    /// dead-lettered); only a transient failure is an error, and then the ids fetched before
    /// it stay known.
    pub fn fetch(&self, ids: &[i32]) -> Result<(), RegistryError> {
        for &id in ids {
            if self.known(id).is_some() {
                continue;
            }
            match self.compiled(id) {
                Ok(schema) => {
                    tracing::info!(schema_id = id, kind = ?schema.kind(), "schema fetched from the registry");
                    self.schemas.insert(id, Arc::new(schema));
                }
                Err(error) if error.disposition() == Disposition::DeadLetter => {
                    tracing::warn!(schema_id = id, %error, "schema refused: its records are dead-lettered");
                    self.refused.insert(id, Arc::from(error.to_string()));
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The latest version of `subject` and its schema, compiled.
    pub fn latest(&self, subject: &str) -> Result<(Latest, WriterSchema), RegistryError> {
        self.version(subject, "latest")
    }

    /// Version `version` of `subject` (a number, or `latest`) and its schema, compiled.
    pub fn version(
        &self,
        subject: &str,
        version: &str,
    ) -> Result<(Latest, WriterSchema), RegistryError> {
        let (found, references) = self.client.version(subject, version)?;
        let text = SchemaText {
            schema: found.schema.clone(),
            schema_type: found.schema_type.clone(),
            references: Vec::new(),
        };
        let schema = compile(found.id, &text, &references)?;
        Ok((found, schema))
    }

    /// The version numbers of `subject`, oldest first.
    pub fn versions(&self, subject: &str) -> Result<Vec<i64>, RegistryError> {
        self.client.versions(subject)
    }

    fn compiled(&self, id: i32) -> Result<WriterSchema, RegistryError> {
        let (text, references) = self.client.schema_with_references(id)?;
        compile(id, &text, &references)
    }
}

fn compile(
    id: i32,
    text: &SchemaText,
    references: &[(String, String)],
) -> Result<WriterSchema, RegistryError> {
    let kind = SchemaKind::from_registry(text.schema_type.as_deref()).map_err(|error| {
        RegistryError::Schema {
            id,
            reason: error.to_string(),
        }
    })?;
    WriterSchema::compile(kind, &text.schema, references).map_err(|error| RegistryError::Schema {
        id,
        reason: error.to_string(),
    })
}

impl WriterSchemas for Registry {
    fn known(&self, id: i32) -> Option<Known> {
        if let Some(schema) = self.schemas.get(&id) {
            return Some(Known::Schema(schema));
        }
        self.refused.get(&id).map(Known::Refused)
    }
}
