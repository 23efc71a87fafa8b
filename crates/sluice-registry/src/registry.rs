//! The cache of writers' schemas the decoders read: each id fetched once and compiled once,
//! bounded in entries; an id the registry refused is remembered for a while, so its records
//! are dead-lettered without asking again for each batch. The registry's "not found" for an
//! id is believed only when it still says so [`CONFIRM_AFTER`] after the first time (a
//! registry that has just started, or a follower behind its leader, can say so of an id
//! that exists); until then the records wait.
//!
//! The schemas are read once per record, so they are a plain map behind a read lock (a
//! lookup is a hash and an uncontended lock, ~1/10 of a TTL cache's read, which keeps an
//! access log); a schema never changes under its id, so nothing expires. The refused ids,
//! read only when a schema is missing, are the TTL cache.

use crate::client::{Latest, RegistryClient, SchemaText};
use crate::error::RegistryError;
use crate::settings::RegistrySettings;
use sluice_core::Disposition;
use sluice_sinks::schemas::{Known, WriterSchemas};
use sluice_sinks::wire::{SchemaKind, WriterSchema};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Schemas kept, at most (a topic's history of versions is far smaller).
const CAPACITY: usize = 10_000;

/// How long an id the registry refused stays refused before it is asked again.
const REFUSED_FOR: Duration = Duration::from_secs(60);

/// How long after the registry first says it does not know an id it must still say so for
/// the id to be refused. A writer whose batch had not waited yet asks again after 0.25, 0.5,
/// 1 and 2 s: an unknown id's records are dead-lettered some 4 s after they are met.
const CONFIRM_AFTER: Duration = Duration::from_secs(2);

/// How long the first "not found" for an id is remembered (an older one starts over).
const DOUBTED_FOR: Duration = Duration::from_secs(600);

/// A registry and what was fetched from it.
#[derive(Debug, Clone)]
pub struct Registry {
    client: RegistryClient,
    schemas: Arc<RwLock<HashMap<i32, Arc<WriterSchema>>>>,
    refused: moka::sync::Cache<i32, Arc<str>>,
    /// When the registry first said it does not know each id.
    doubted: moka::sync::Cache<i32, Instant>,
    /// When a request last got no usable answer: a "not found" said before it is not
    /// confirmed by one said after it (the registry may have restarted in between).
    unanswered: Arc<Mutex<Option<Instant>>>,
    confirm_after: Duration,
}

impl Registry {
    /// A registry as `settings` say.
    pub fn new(settings: &RegistrySettings) -> Result<Self, RegistryError> {
        Ok(Self {
            client: RegistryClient::new(settings)?,
            schemas: Arc::default(),
            refused: moka::sync::Cache::builder()
                .max_capacity(CAPACITY as u64)
                .time_to_live(REFUSED_FOR)
                .build(),
            doubted: moka::sync::Cache::builder()
                .max_capacity(CAPACITY as u64)
                .time_to_live(DOUBTED_FOR)
                .build(),
            unanswered: Arc::default(),
            confirm_after: CONFIRM_AFTER,
        })
    }

    /// Fetches and compiles each of `ids` not known yet. An id the registry does not know
    /// (and still did not 2 s after it first said so), or whose schema does not
    /// compile, is remembered as refused (its records are dead-lettered). Only a transient
    /// failure is an error, and then the ids fetched before it stay known; while a "not found"
    /// waits for its confirmation the error is [`RegistryError::NotFoundYet`], returned once
    /// every id was asked, so that all the unknown ids of a batch are confirmed together.
    pub fn fetch(&self, ids: &[i32]) -> Result<(), RegistryError> {
        let mut unconfirmed = None;
        for &id in ids {
            if self.known(id).is_some() {
                continue;
            }
            match self.compiled(id) {
                Ok(schema) => {
                    tracing::info!(schema_id = id, kind = ?schema.kind(), "schema fetched from the registry");
                    self.keep(id, Arc::new(schema));
                    self.doubted.invalidate(&id);
                }
                Err(
                    RegistryError::UnknownId { reason, .. }
                    | RegistryError::MissingReference { reason, .. },
                ) if !self.confirmed(id) => {
                    unconfirmed.get_or_insert(RegistryError::NotFoundYet { id, reason });
                }
                Err(error) if error.disposition() == Disposition::DeadLetter => {
                    tracing::warn!(schema_id = id, %error, "schema refused: its records are dead-lettered");
                    self.refused.insert(id, Arc::from(error.to_string()));
                }
                Err(error) => {
                    *self
                        .unanswered
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
                    return Err(error);
                }
            }
        }
        unconfirmed.map_or(Ok(()), Err)
    }

    /// [`Self::fetch`] for a caller that asks once (`sluice sinks validate --sample`): a "not
    /// found" is confirmed here, by waiting 2 s and asking again.
    pub fn fetch_settled(&self, ids: &[i32]) -> Result<(), RegistryError> {
        // Confirmed after one wait, unless a request of another thread went unanswered
        // meanwhile: a few rounds, then the caller is told the registry is not settled.
        let mut fetched = self.fetch(ids);
        for _ in 0..4 {
            if !matches!(fetched, Err(RegistryError::NotFoundYet { .. })) {
                break;
            }
            std::thread::sleep(self.confirm_after);
            fetched = self.fetch(ids);
        }
        fetched
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

    /// Every subject the registry has.
    pub fn subjects(&self) -> Result<Vec<String>, RegistryError> {
        self.client.subjects()
    }

    /// Keeps schema `id`; at the bound, one schema kept before makes room (fetched again if
    /// its records come back).
    fn keep(&self, id: i32, schema: Arc<WriterSchema>) {
        let mut schemas = self.schemas.write().unwrap_or_else(PoisonError::into_inner);
        if schemas.len() >= CAPACITY
            && !schemas.contains_key(&id)
            && let Some(&other) = schemas.keys().next()
        {
            schemas.remove(&other);
        }
        schemas.insert(id, schema);
    }

    /// Whether the registry's "not found" for `id`, said now, confirms one said at least
    /// `confirm_after` before with every request since answered. The first one is remembered;
    /// one said before a request that got no answer starts the doubt again.
    fn confirmed(&self, id: i32) -> bool {
        let now = Instant::now();
        let first = self.doubted.get_with(id, || now);
        let unanswered = *self
            .unanswered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if unanswered.is_some_and(|at| at >= first) {
            self.doubted.insert(id, now);
            return false;
        }
        now.duration_since(first) >= self.confirm_after
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
        let schemas = self.schemas.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(schema) = schemas.get(&id) {
            return Some(Known::Schema(schema.clone()));
        }
        drop(schemas);
        self.refused.get(&id).map(Known::Refused)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    //! The client against a scripted HTTP server on a local socket (the real registry is in
    //! the integration tests, `crates/sluice-cli/tests/registry_*.rs`): what it sends, and what
    //! each kind of answer means for the records that wait.

    use super::*;
    use sluice_core::Disposition;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    const AVRO: &str =
        r#"{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}"#;

    /// A server answering each request with the next of `answers` (status, body); the
    /// requests' head lines come back on the channel.
    fn server(answers: Vec<(u16, String)>) -> (String, mpsc::Receiver<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for (status, body) in answers {
                let (mut stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    head.push(line.trim().to_owned());
                }
                let _ = tx.send(head);
                let answer = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(answer.as_bytes()).unwrap();
            }
        });
        (url, rx)
    }

    fn registry(url: &str, user_info: Option<&str>) -> Registry {
        Registry::new(&RegistrySettings {
            url: url.to_owned(),
            user_info: user_info.map(str::to_owned),
            ca: None,
            client: None,
            timeout: Duration::from_secs(5),
        })
        .unwrap()
    }

    #[test]
    fn a_schema_is_fetched_once_with_basic_auth_and_compiled() {
        let body = serde_json::json!({ "schema": AVRO }).to_string();
        let (url, heads) = server(vec![(200, body)]);
        let registry = registry(&url, Some("me:s3cret"));
        registry.fetch(&[7]).unwrap();
        registry.fetch(&[7]).unwrap();
        let head = heads.recv().unwrap();
        assert_eq!(head[0], "GET /schemas/ids/7 HTTP/1.1");
        // base64("me:s3cret")
        assert!(
            head.iter()
                .any(|h| h.eq_ignore_ascii_case("authorization: Basic bWU6czNjcmV0")),
            "{head:?}"
        );
        assert!(matches!(registry.known(7), Some(Known::Schema(_))));
        assert!(heads.try_recv().is_err(), "fetched once");
    }

    #[test]
    fn only_the_registrys_own_not_found_refuses_an_id() {
        let registry = doubting(vec![
            (404, "<html>404 Not Found</html>"),
            (500, "{}"),
            (401, "{}"),
            (404, NOT_FOUND),
            (404, NOT_FOUND),
        ]);
        for _ in 0..3 {
            let error = registry.fetch(&[9]).unwrap_err();
            assert_eq!(error.disposition(), Disposition::Retry, "{error}");
            assert!(registry.known(9).is_none(), "nothing remembered: {error}");
        }
        // The registry's own "not found" is believed when it says so again a while later.
        fetch_after_the_doubt(&registry, 9);
        match registry.known(9) {
            Some(Known::Refused(reason)) => {
                assert!(
                    reason.contains("schema id 9 is not in the schema registry"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_not_found_then_the_schema_is_a_schema_and_nothing_is_refused() {
        // A follower that had not yet read the schema, then one that had.
        let body = serde_json::json!({ "schema": AVRO }).to_string();
        let registry = doubting(vec![(404, NOT_FOUND), (200, body.as_str())]);
        fetch_after_the_doubt(&registry, 5);
        assert!(matches!(registry.known(5), Some(Known::Schema(_))));
        // The doubt ended with the answer: a later "not found" of another registry for the
        // same id would start a new one (the id is known here and never asked again).
        assert!(registry.doubted.get(&5).is_none());
    }

    const NOT_FOUND: &str = r#"{"error_code": 40403, "message": "Schema not found"}"#;

    /// A registry that confirms a "not found" after 100 ms, answering `answers` in turn.
    fn doubting(answers: Vec<(u16, &str)>) -> Registry {
        let answers = answers
            .into_iter()
            .map(|(s, b)| (s, b.to_owned()))
            .collect();
        let (url, _heads) = server(answers);
        let mut registry = registry(&url, None);
        registry.confirm_after = Duration::from_millis(100);
        registry
    }

    /// The first fetch of `id` waits for the confirmation of a "not found"; the next, once it
    /// is due, settles.
    fn fetch_after_the_doubt(registry: &Registry, id: i32) {
        let error = registry.fetch(&[id]).unwrap_err();
        assert!(
            matches!(error, RegistryError::NotFoundYet { id: doubted, .. } if doubted == id),
            "{error}"
        );
        assert_eq!(error.disposition(), Disposition::Retry, "{error}");
        assert!(registry.known(id).is_none(), "nothing remembered yet");
        std::thread::sleep(registry.confirm_after);
        registry.fetch(&[id]).unwrap();
    }

    #[test]
    fn the_unknown_ids_of_a_batch_are_confirmed_together() {
        let registry = doubting(vec![(404, NOT_FOUND); 4]);
        let error = registry.fetch(&[1, 2]).unwrap_err();
        assert!(
            matches!(error, RegistryError::NotFoundYet { id: 1, .. }),
            "{error}"
        );
        assert!(registry.doubted.get(&2).is_some(), "both were asked");
        std::thread::sleep(registry.confirm_after);
        registry.fetch(&[1, 2]).unwrap();
        for id in [1, 2] {
            assert!(
                matches!(registry.known(id), Some(Known::Refused(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn no_answer_between_two_not_founds_starts_the_doubt_again() {
        let registry = doubting(vec![(404, NOT_FOUND), (500, "{}"), (404, NOT_FOUND)]);
        registry.fetch(&[6]).unwrap_err();
        std::thread::sleep(registry.confirm_after);
        let error = registry.fetch(&[6]).unwrap_err();
        assert!(
            matches!(error, RegistryError::Status { status: 500, .. }),
            "{error}"
        );
        let error = registry.fetch(&[6]).unwrap_err();
        assert!(
            matches!(error, RegistryError::NotFoundYet { id: 6, .. }),
            "{error}"
        );
        assert!(registry.known(6).is_none());
    }

    #[test]
    fn no_answer_for_one_id_keeps_the_others_doubt_from_confirming() {
        // Ids 10 and 11 not found; then the registry fails on 10 (11 is not asked), then it
        // says "not found" again for both, as one that has just restarted might.
        let registry = doubting(vec![
            (404, NOT_FOUND),
            (404, NOT_FOUND),
            (503, "{}"),
            (404, NOT_FOUND),
            (404, NOT_FOUND),
        ]);
        registry.fetch(&[10, 11]).unwrap_err();
        std::thread::sleep(registry.confirm_after);
        let error = registry.fetch(&[10, 11]).unwrap_err();
        assert!(
            matches!(error, RegistryError::Status { status: 503, .. }),
            "{error}"
        );
        std::thread::sleep(registry.confirm_after);
        let error = registry.fetch(&[10, 11]).unwrap_err();
        assert!(
            matches!(error, RegistryError::NotFoundYet { id: 10, .. }),
            "{error}"
        );
        for id in [10, 11] {
            assert!(registry.known(id).is_none(), "{id} not refused");
        }
    }

    #[test]
    fn a_missing_reference_is_confirmed_as_an_unknown_id_is() {
        let body = serde_json::json!({
            "schema": AVRO,
            "references": [{ "name": "other.avsc", "subject": "other", "version": 3 }],
        })
        .to_string();
        let subject_not_found = r#"{"error_code": 40401, "message": "Subject not found"}"#;
        let registry = doubting(vec![
            (200, body.as_str()),
            (404, subject_not_found),
            (200, body.as_str()),
            (404, subject_not_found),
        ]);
        fetch_after_the_doubt(&registry, 12);
        match registry.known(12) {
            Some(Known::Refused(reason)) => {
                assert!(reason.contains("its reference `other.avsc`"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_caller_that_asks_once_gets_the_confirmed_answer() {
        let registry = doubting(vec![(404, NOT_FOUND); 2]);
        registry.fetch_settled(&[4]).unwrap();
        assert!(matches!(registry.known(4), Some(Known::Refused(_))));
    }

    #[test]
    fn an_unreachable_registry_is_transient_and_a_bad_schema_a_refusal() {
        let registry_down = registry("http://127.0.0.1:9", None);
        let error = registry_down.fetch(&[1]).unwrap_err();
        assert_eq!(error.disposition(), Disposition::Retry, "{error}");
        let body = serde_json::json!({ "schema": "{not avro" }).to_string();
        let (url, _heads) = server(vec![(200, body)]);
        let registry = registry(&url, None);
        registry.fetch(&[3]).unwrap();
        assert!(matches!(registry.known(3), Some(Known::Refused(_))));
    }

    #[test]
    fn the_schemas_kept_are_bounded_and_the_newest_is_kept() {
        let registry = registry("http://127.0.0.1:9", None);
        let schema = Arc::new(WriterSchema::compile(SchemaKind::Avro, AVRO, &[]).unwrap());
        let ids = i32::try_from(CAPACITY).unwrap() + 5;
        for id in 0..ids {
            registry.keep(id, schema.clone());
        }
        let kept = registry.schemas.read().unwrap().len();
        assert_eq!(kept, CAPACITY);
        assert!(matches!(registry.known(ids - 1), Some(Known::Schema(_))));
        let known = (0..ids).filter(|id| registry.known(*id).is_some()).count();
        assert_eq!(known, CAPACITY);
    }
}
