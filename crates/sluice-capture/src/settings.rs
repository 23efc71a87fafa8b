//! Settings of `sluice capture`, parsed from the environment by a pure function through the
//! settings reader every sluice command uses: one immutable value, or an error naming the
//! variable (docs/capture.md#operate-it).

use crate::debezium::EnvelopeSettings;
use crate::outbox::Routing;
use crate::source::SourceConfig;
use sluice_core::KafkaClientSettings;
use sluice_core::settings::forms::{DatabaseUrl, Given, Millis, Text};
use sluice_core::settings::kafka_client::{self, Servers};
use sluice_core::settings::{EnvReader, SettingsError, Var, Variable};
use std::time::Duration;

/// `DATABASE_URL`.
pub const DATABASE_URL: Var<DatabaseUrl> = sluice_core::settings::DATABASE_URL.with_help(
    "the source database; its user needs the REPLICATION attribute (or rds_replication)",
);
/// `KAFKA_BOOTSTRAP_SERVERS`.
pub const BOOTSTRAP_SERVERS: Var<Servers> =
    kafka_client::BOOTSTRAP_SERVERS.with_help("the brokers the change events go to");
/// `CAPTURE_SLOT`.
pub const SLOT: Var<Text> = Var::new(
    "CAPTURE_SLOT",
    "sluice_capture",
    "the logical replication slot (pgoutput), created at the first start",
);
/// `CAPTURE_PUBLICATION`.
pub const PUBLICATION: Var<Text> = Var::new(
    "CAPTURE_PUBLICATION",
    "sluice_capture",
    "the publication whose tables are captured (CREATE PUBLICATION … FOR TABLE …)",
);
/// `CAPTURE_TOPIC_PREFIX`.
pub const TOPIC_PREFIX: Var<Text> = Var::new(
    "CAPTURE_TOPIC_PREFIX",
    "sluice",
    "Debezium's topic.prefix: topics are <prefix>.<schema>.<table>, and source.name",
);
/// `CAPTURE_SCHEMAS`.
pub const SCHEMAS: Var<Text> = Var::new(
    "CAPTURE_SCHEMAS",
    "true",
    "true: key and value carry their Connect schema (JsonConverter schemas.enable=true); false: payloads only",
);
/// `CAPTURE_STATUS_INTERVAL_MS`.
pub const STATUS_INTERVAL: Var<Millis> = Var::new(
    "CAPTURE_STATUS_INTERVAL_MS",
    1000,
    "how often the confirmed position is reported to the server",
);

/// `CAPTURE_SNAPSHOT`.
pub const SNAPSHOT: Var<Text> = Var::new(
    "CAPTURE_SNAPSHOT",
    "initial",
    "initial: a new slot's tables are sent first as r events, in the snapshot it exported (taken again, of then, when a copy was cut short); never: only changes from the slot's creation",
);
/// `CAPTURE_STATE_TOPIC`.
pub const STATE_TOPIC: Var<Text> = Var::new(
    "CAPTURE_STATE_TOPIC",
    "sluice_capture_state",
    "the Kafka topic (made when missing) that records whether a slot's initial snapshot completed",
);
/// `CAPTURE_HEARTBEAT_INTERVAL_MS`.
pub const HEARTBEAT: Var<Text> = Var::new(
    "CAPTURE_HEARTBEAT_INTERVAL_MS",
    "10000",
    "how often a heartbeat message is written to the WAL, so an idle slot moves on; 0: never",
);
/// `CAPTURE_OUTBOX_TABLES`.
pub const OUTBOX_TABLES: Var<Given> = Var::new(
    "CAPTURE_OUTBOX_TABLES",
    "(none)",
    "schema.table, comma-separated: sluice outbox tables whose CDC rows are relayed as sluice dispatch publishes them, not as change events",
);
/// `CAPTURE_MESSAGE_PREFIX`.
pub const MESSAGE_PREFIX: Var<Given> = Var::new(
    "CAPTURE_MESSAGE_PREFIX",
    "(none)",
    "logical messages whose prefix is this and then <topic>[/<key>] are relayed to <topic>; empty: none",
);

/// Every variable, with its default and meaning, for `--help`.
pub fn variables() -> Vec<Variable> {
    vec![
        DATABASE_URL.variable(),
        BOOTSTRAP_SERVERS.variable(),
        kafka_client::PROPERTIES,
        SLOT.variable(),
        PUBLICATION.variable(),
        TOPIC_PREFIX.variable(),
        SCHEMAS.variable(),
        STATUS_INTERVAL.variable(),
        SNAPSHOT.variable(),
        STATE_TOPIC.variable(),
        HEARTBEAT.variable(),
        OUTBOX_TABLES.variable(),
        MESSAGE_PREFIX.variable(),
    ]
}

/// The validated settings of one capture process. `Debug` shows no password.
#[derive(Clone)]
pub struct CaptureSettings {
    /// Server, slot, publication, TLS (from `DATABASE_URL`'s `sslmode`/`sslrootcert`).
    pub source: SourceConfig,
    /// `KAFKA_BOOTSTRAP_SERVERS` and the `KAFKA_*` client properties.
    pub kafka: KafkaClientSettings,
    /// `DATABASE_URL` for the catalog connection (the same database).
    pub database_url: String,
    /// What the records say of their source.
    pub envelope: EnvelopeSettings,
    /// The outbox tables and messages relayed as outbox records.
    pub routing: Routing,
    /// How often a heartbeat is written (`None`: never).
    pub heartbeat: Option<Duration>,
    /// With `CAPTURE_SNAPSHOT=initial`, the state topic (`CAPTURE_STATE_TOPIC`); `None`:
    /// no snapshot.
    pub snapshot: Option<String>,
}

impl std::fmt::Debug for CaptureSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureSettings")
            .field("source", &self.source)
            .field("kafka", &self.kafka.redacted())
            .field(
                "database_url",
                &sluice_core::untrusted::redact_url(&self.database_url),
            )
            .field("envelope", &self.envelope)
            .field("routing", &self.routing)
            .field("snapshot", &self.snapshot)
            .field("heartbeat", &self.heartbeat)
            .finish()
    }
}

impl CaptureSettings {
    /// Builds the settings from a `name → value` lookup and the names of the variables that
    /// exist (the `KAFKA_*` client properties are found among them); `run_id` names this run
    /// in the `__debezium.context.runId` header.
    pub fn from_vars<'a>(
        lookup: &dyn Fn(&str) -> Option<String>,
        names: impl IntoIterator<Item = &'a str>,
        run_id: &str,
    ) -> Result<CaptureSettings, SettingsError> {
        let kafka = KafkaClientSettings::from_vars(lookup, names)?;
        let env = EnvReader::new(lookup);
        let database_url = DATABASE_URL.read(&env)?;
        let slot = identifier(&env, &SLOT)?;
        let publication = identifier(&env, &PUBLICATION)?;
        let prefix = TOPIC_PREFIX.read(&env)?;
        if prefix.is_empty()
            || prefix.len() > 200
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(SettingsError::invalid(
                TOPIC_PREFIX.name,
                &prefix,
                "letters, digits, '_', '-' and '.' (a topic name's characters), at most 200",
            ));
        }
        let schemas = match SCHEMAS.read(&env)?.as_str() {
            "true" => true,
            "false" => false,
            other => {
                return Err(SettingsError::invalid(SCHEMAS.name, other, "true or false"));
            }
        };
        let interval = STATUS_INTERVAL.read(&env)?;
        if interval < Duration::from_millis(10) || interval > Duration::from_secs(60) {
            return Err(SettingsError::invalid(
                STATUS_INTERVAL.name,
                &interval.as_millis().to_string(),
                "between 10 and 60000 milliseconds",
            ));
        }
        let source = SourceConfig::from_url(&database_url, &slot, &publication)
            .map_err(|e| SettingsError::invalid(DATABASE_URL.name, "(not shown)", &e.to_string()))?
            .with_status_interval(interval);
        let envelope = EnvelopeSettings {
            prefix,
            database: source.database().to_owned(),
            version: format!("sluice-{}", env!("CARGO_PKG_VERSION")),
            schemas,
            run_id: run_id.to_owned(),
        };
        Ok(CaptureSettings {
            source,
            kafka,
            // The catalog's connections (sqlx) get the URL without the parameters its client
            // does not read: it would log their values.
            database_url: sluice_core::settings::database_url::without_ignored(&database_url),
            envelope,
            routing: routing(&env)?,
            snapshot: snapshot(&env)?,
            heartbeat: heartbeat(&env)?,
        })
    }
}

/// `CAPTURE_HEARTBEAT_INTERVAL_MS`: 0 (none) or at least 100 ms.
fn heartbeat(env: &EnvReader<'_>) -> Result<Option<Duration>, SettingsError> {
    let text = HEARTBEAT.read(env)?;
    match text.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms @ 100..=3_600_000) => Ok(Some(Duration::from_millis(ms))),
        _ => Err(SettingsError::invalid(
            HEARTBEAT.name,
            &text,
            "0 (no heartbeat) or whole milliseconds from 100 to 3600000",
        )),
    }
}

/// `CAPTURE_SNAPSHOT` and, with `initial`, `CAPTURE_STATE_TOPIC`.
fn snapshot(env: &EnvReader<'_>) -> Result<Option<String>, SettingsError> {
    match SNAPSHOT.read(env)?.as_str() {
        "never" => Ok(None),
        "initial" => {
            let topic = STATE_TOPIC.read(env)?;
            let fits = !topic.is_empty()
                && topic.len() <= 249
                && topic
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if fits {
                Ok(Some(topic))
            } else {
                Err(SettingsError::invalid(
                    STATE_TOPIC.name,
                    &topic,
                    "a topic name: letters, digits, '.', '_', '-', at most 249",
                ))
            }
        }
        other => Err(SettingsError::invalid(
            SNAPSHOT.name,
            other,
            "initial or never",
        )),
    }
}

/// `CAPTURE_OUTBOX_TABLES` (each `schema.table`) and `CAPTURE_MESSAGE_PREFIX`.
fn routing(env: &EnvReader<'_>) -> Result<Routing, SettingsError> {
    let tables = OUTBOX_TABLES.read_set(env)?.unwrap_or_default();
    let mut outbox_tables = Vec::new();
    for table in tables.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let qualified = table.split_once('.').is_some_and(|(schema, name)| {
            !schema.is_empty() && !name.is_empty() && !name.contains('.')
        });
        if !qualified {
            return Err(SettingsError::invalid(
                OUTBOX_TABLES.name,
                table,
                "schema.table, comma-separated (public.outbox_events)",
            ));
        }
        outbox_tables.push(table.to_owned());
    }
    let message_prefix = MESSAGE_PREFIX.read_set(env)?.filter(|p| !p.is_empty());
    if let Some(prefix) = &message_prefix
        && prefix
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        // `outbox` would read `outbox-legacy/x` as topic `-legacy`.
        return Err(SettingsError::invalid(
            MESSAGE_PREFIX.name,
            prefix,
            "a prefix ending in a character no topic name has, such as ':' (outbox:)",
        ));
    }
    Ok(Routing {
        outbox_tables,
        message_prefix,
    })
}

/// A slot or publication name: lower-case letters, digits and `_`, at most 63 (a slot's rule).
fn identifier(env: &EnvReader<'_>, var: &Var<Text>) -> Result<String, SettingsError> {
    let value = var.read(env)?;
    let fits = !value.is_empty()
        && value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if fits {
        Ok(value)
    } else {
        Err(SettingsError::invalid(
            var.name,
            &value,
            "lower-case letters, digits and '_', at most 63",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Result<CaptureSettings, SettingsError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let lookup = move |name: &str| map.get(name).cloned();
        CaptureSettings::from_vars(&lookup, [], "run")
    }

    const BASE: [(&str, &str); 2] = [
        ("DATABASE_URL", "postgres://capture:secret@db:5432/shop"),
        ("KAFKA_BOOTSTRAP_SERVERS", "kafka:9092"),
    ];

    #[test]
    fn defaults() {
        let s = settings(&BASE).unwrap();
        assert_eq!(s.source.slot(), "sluice_capture");
        assert_eq!(s.source.publication(), "sluice_capture");
        assert_eq!(s.envelope.prefix, "sluice");
        assert_eq!(s.envelope.database, "shop");
        assert!(s.envelope.schemas);
        assert_eq!(s.routing, Routing::default(), "no outbox, no messages");
        assert_eq!(s.snapshot.as_deref(), Some("sluice_capture_state"));
        assert!(!format!("{s:?}").contains("secret"), "{s:?}");
    }

    #[test]
    fn outbox_tables_and_the_message_prefix() {
        let mut pairs = BASE.to_vec();
        pairs.push((
            "CAPTURE_OUTBOX_TABLES",
            "public.outbox_events, shop.outbox_events",
        ));
        pairs.push(("CAPTURE_MESSAGE_PREFIX", "outbox:"));
        let s = settings(&pairs).unwrap();
        assert_eq!(
            s.routing.outbox_tables,
            ["public.outbox_events", "shop.outbox_events"]
        );
        assert_eq!(s.routing.message_prefix.as_deref(), Some("outbox:"));
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (name, value) in [
            ("CAPTURE_SLOT", "Bad-Slot"),
            ("CAPTURE_PUBLICATION", "x;drop"),
            ("CAPTURE_TOPIC_PREFIX", "a b"),
            ("CAPTURE_SCHEMAS", "yes"),
            ("CAPTURE_STATUS_INTERVAL_MS", "0"),
            ("CAPTURE_OUTBOX_TABLES", "outbox_events"),
            ("CAPTURE_SNAPSHOT", "always"),
            ("CAPTURE_MESSAGE_PREFIX", "outbox"),
            ("CAPTURE_HEARTBEAT_INTERVAL_MS", "5"),
            ("CAPTURE_HEARTBEAT_INTERVAL_MS", "soon"),
            ("CAPTURE_STATE_TOPIC", "a b"),
            ("CAPTURE_OUTBOX_TABLES", "public.outbox_events,a.b.c"),
        ] {
            let mut pairs = BASE.to_vec();
            pairs.push((name, value));
            let error = settings(&pairs).expect_err(name);
            assert_eq!(error.variable(), name, "{error}");
        }
        let error = settings(&[("KAFKA_BOOTSTRAP_SERVERS", "k:9092")]).expect_err("no URL");
        assert_eq!(error.variable(), "DATABASE_URL");
    }
}
