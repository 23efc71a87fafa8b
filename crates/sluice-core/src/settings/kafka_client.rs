//! The Kafka client settings every client sluice creates shares: the bootstrap servers and
//! the librdkafka properties passed through from the environment.
//!
//! Every variable `KAFKA_<NAME>` other than `KAFKA_BOOTSTRAP_SERVERS` sets the librdkafka
//! property `<name>` lower-cased with `_` → `.` (`KAFKA_SECURITY_PROTOCOL=SASL_SSL` →
//! `security.protocol=SASL_SSL`). Properties that sluice's guarantees depend on are refused
//! here, naming the variable and why; whether librdkafka knows a property is checked by the
//! Kafka adapter when the binary starts. Secret values never reach `Debug` or an error.

use super::error::SettingsError;
use super::read::EnvReader;
use super::variable::{Form, Var, Variable};
use std::collections::BTreeMap;

/// The prefix of the pass-through variables.
pub const PREFIX: &str = "KAFKA_";

/// `KAFKA_BOOTSTRAP_SERVERS`.
pub const BOOTSTRAP_SERVERS: Var<Servers> = Var::new(
    "KAFKA_BOOTSTRAP_SERVERS",
    "127.0.0.1:9092",
    "Kafka bootstrap servers (host:port,…)",
);

/// `KAFKA_<NAME>`: the pass-through properties, found among the environment's names. Some
/// hold secrets ([`is_secret`]).
pub const PROPERTIES: Variable = Variable::pattern(
    "KAFKA_<NAME>",
    "(none)",
    "librdkafka property <name>, lower-case with _ → . (e.g. KAFKA_SECURITY_PROTOCOL)",
)
.secret();

/// Comma-separated `host:port` pairs.
#[derive(Debug)]
pub struct Servers;

impl Form for Servers {
    type Value = String;
    type Default = &'static str;
    fn parse(env: &EnvReader<'_>, name: &str, _: &str) -> Result<Option<String>, SettingsError> {
        env.raw(name)
            .map(|servers| check_servers(name, servers))
            .transpose()
    }
    fn fallback(_: &EnvReader<'_>, name: &str, default: &str) -> Result<String, SettingsError> {
        check_servers(name, default.to_owned())
    }
    fn show(default: &str) -> String {
        default.to_owned()
    }
}

fn check_servers(name: &str, servers: String) -> Result<String, SettingsError> {
    let servers_ok = servers.split(',').all(|s| {
        s.trim().rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        })
    });
    if !servers_ok {
        return Err(error(
            name,
            &servers,
            "comma-separated host:port pairs, e.g. 127.0.0.1:9092",
        ));
    }
    Ok(servers)
}

/// Variables with the prefix that are not client properties: the bootstrap servers, and
/// what Kafka's own shell scripts read (a machine with Kafka installed often exports them).
const NOT_PROPERTIES: &[&str] = &[
    BOOTSTRAP_SERVERS.name,
    "KAFKA_HOME",
    "KAFKA_OPTS",
    "KAFKA_HEAP_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_LOG4J_OPTS",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_JMX_OPTS",
    "KAFKA_LOG_DIR",
    "KAFKA_DEBUG",
];

/// Properties sluice sets itself because a guarantee depends on them, with the reason.
pub const REFUSED: &[(&str, &str)] = &[
    (
        "enable.auto.commit",
        "sluice commits an offset only after the database transaction that holds its effect",
    ),
    (
        "enable.auto.offset.store",
        "sluice stores an offset only after the database transaction that holds its effect",
    ),
    (
        "enable.idempotence",
        "the producer must be idempotent so that its retries never duplicate a record",
    ),
    (
        "acks",
        "a record counts as published only when every in-sync replica has it (acks=all)",
    ),
    (
        "isolation.level",
        "the consumers read only committed records (read_committed)",
    ),
    (
        "group.id",
        "each pipeline's group is STORAGE_GROUP_PREFIX.<pipeline>",
    ),
    (
        "group.instance.id",
        "static membership is set per pipeline by STORAGE_INSTANCE_ID",
    ),
    ("bootstrap.servers", "use KAFKA_BOOTSTRAP_SERVERS"),
    ("metadata.broker.list", "use KAFKA_BOOTSTRAP_SERVERS"),
    (
        "partition.assignment.strategy",
        "the consumers rely on the cooperative-sticky assignor",
    ),
    ("auto.offset.reset", "use STORAGE_AUTO_OFFSET_RESET"),
    (
        "enable.partition.eof",
        "sluice decides per client whether the end of a partition is reported",
    ),
    (
        "transactional.id",
        "sluice's producer is idempotent, not transactional",
    ),
    (
        "partitioner",
        "keys are hashed like the Java client (murmur2_random) so every client agrees",
    ),
    ("session.timeout.ms", "use STORAGE_SESSION_TIMEOUT_MS"),
    ("max.poll.interval.ms", "use STORAGE_MAX_POLL_INTERVAL_MS"),
];

/// librdkafka's aliases (its `CONFIGURATION.md`, 2.10): two names of one property. When a
/// client's configuration holds both, librdkafka applies them in no fixed order, so the
/// value sluice sets under one name could silently lose to a variable under the other.
pub const ALIASES: &[(&str, &str)] = &[
    ("bootstrap.servers", "metadata.broker.list"),
    ("max.in.flight", "max.in.flight.requests.per.connection"),
    ("sasl.mechanism", "sasl.mechanisms"),
    ("max.partition.fetch.bytes", "fetch.message.max.bytes"),
    ("linger.ms", "queue.buffering.max.ms"),
    ("retries", "message.send.max.retries"),
    ("compression.type", "compression.codec"),
    ("acks", "request.required.acks"),
    ("delivery.timeout.ms", "message.timeout.ms"),
    ("enable.auto.commit", "auto.commit.enable"),
];

/// Every property some sluice client sets under this name (`sluice-kafka` `config.rs` and
/// the dispatcher's producer); a variable may tune a tunable one under *this* name only.
pub const SET_BY_SLUICE: &[&str] = &[
    "acks",
    "auto.offset.reset",
    "batch.size",
    "bootstrap.servers",
    "client.id",
    "compression.type",
    "debug",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.idempotence",
    "enable.partition.eof",
    "fetch.max.bytes",
    "fetch.queue.backoff.ms",
    "fetch.wait.max.ms",
    "group.id",
    "group.instance.id",
    "linger.ms",
    "log.connection.close",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "message.timeout.ms",
    "partition.assignment.strategy",
    "partitioner",
    "queue.buffering.max.kbytes",
    "queued.max.messages.kbytes",
    "request.timeout.ms",
    "session.timeout.ms",
    "statistics.interval.ms",
];

/// The other name of `property` under which sluice sets it, if `property` is an alias of a
/// property sluice sets.
pub fn alias_of_set(property: &str) -> Option<&'static str> {
    ALIASES.iter().find_map(|&(a, b)| {
        let other = if property == a {
            b
        } else if property == b {
            a
        } else {
            return None;
        };
        SET_BY_SLUICE.contains(&other).then_some(other)
    })
}

/// The bootstrap servers and the pass-through properties of every Kafka client.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaClientSettings {
    /// `KAFKA_BOOTSTRAP_SERVERS`.
    pub bootstrap_servers: String,
    /// librdkafka property → value, from `KAFKA_<NAME>`; none of them is [`REFUSED`].
    pub properties: BTreeMap<String, String>,
}

impl std::fmt::Debug for KafkaClientSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaClientSettings")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &self.redacted())
            .finish()
    }
}

impl KafkaClientSettings {
    /// Plaintext settings with no extra property (tests, tools).
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            properties: BTreeMap::new(),
        }
    }

    /// Reads `KAFKA_BOOTSTRAP_SERVERS` and every `KAFKA_<NAME>` among `names` through
    /// `lookup`. Empty values count as unset.
    pub fn from_vars<'a>(
        lookup: &dyn Fn(&str) -> Option<String>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, SettingsError> {
        let env = EnvReader::new(lookup);
        let bootstrap_servers = BOOTSTRAP_SERVERS.read(&env)?;
        let mut properties = BTreeMap::new();
        for variable in names {
            let Some(property) = property_of(variable) else {
                continue;
            };
            let Some(v) = env.raw(variable) else {
                continue;
            };
            if let Some((_, why)) = REFUSED.iter().find(|(p, _)| *p == property) {
                return Err(error(
                    variable,
                    &redact(&property, &v),
                    &format!("not settable ({property}): {why}"),
                ));
            }
            if let Some(name) = alias_of_set(&property) {
                let instead = match REFUSED.iter().find(|(p, _)| *p == name) {
                    Some((_, why)) => format!("not settable: {why}"),
                    None => format!("set {} instead", variable_of(name)),
                };
                return Err(error(
                    variable,
                    &redact(&property, &v),
                    &format!(
                        "not settable ({property} is librdkafka's other name for {name}, which \
                         sluice sets; the two would apply in no fixed order): {instead}"
                    ),
                ));
            }
            properties.insert(property, v);
        }
        check_queue_holds_a_record(&properties)?;
        Ok(Self {
            bootstrap_servers,
            properties,
        })
    }

    /// The properties with secret values replaced by `***`, for printing.
    pub fn redacted(&self) -> BTreeMap<&str, String> {
        self.properties
            .iter()
            .map(|(k, v)| (k.as_str(), redact(k, v)))
            .collect()
    }
}

/// librdkafka's default `message.max.bytes`.
const DEFAULT_MESSAGE_MAX_BYTES: u64 = 1_000_000;

/// A producer's queue (`queue.buffering.max.kbytes`) set below `message.max.bytes` would
/// never have room for a record that large: the producer would wait for it for ever. Refused
/// at start, naming the variable.
fn check_queue_holds_a_record(properties: &BTreeMap<String, String>) -> Result<(), SettingsError> {
    let Some(kbytes) = properties.get("queue.buffering.max.kbytes") else {
        return Ok(());
    };
    let variable = variable_of("queue.buffering.max.kbytes");
    let kbytes: u64 = kbytes
        .trim()
        .parse()
        .map_err(|_| error(&variable, kbytes, "a number of KiB"))?;
    let largest = properties
        .get("message.max.bytes")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MESSAGE_MAX_BYTES);
    if kbytes.saturating_mul(1024) < largest {
        return Err(error(
            &variable,
            &kbytes.to_string(),
            &format!(
                "at least message.max.bytes ({largest} bytes) in KiB, {}: a record that large \
                 would wait for room in the producer's queue for ever",
                largest.div_ceil(1024)
            ),
        ));
    }
    Ok(())
}

/// The librdkafka property a variable sets, or `None` if it is not a pass-through variable.
pub fn property_of(variable: &str) -> Option<String> {
    let rest = variable.strip_prefix(PREFIX)?;
    if rest.is_empty() || NOT_PROPERTIES.contains(&variable) {
        return None;
    }
    Some(rest.to_ascii_lowercase().replace('_', "."))
}

/// The variable that sets a property (`ssl.ca.location` → `KAFKA_SSL_CA_LOCATION`).
pub fn variable_of(property: &str) -> String {
    format!(
        "{PREFIX}{}",
        property.to_ascii_uppercase().replace('.', "_")
    )
}

/// Whether a property's value is a secret: its name holds password, secret, token, jaas or
/// key (a `.location` is a path, not a secret).
pub fn is_secret(property: &str) -> bool {
    let p = property.to_ascii_lowercase();
    ["password", "secret", "token", "jaas"]
        .iter()
        .any(|s| p.contains(s))
        || (p.contains("key") && !p.ends_with(".location"))
}

fn redact(property: &str, value: &str) -> String {
    if is_secret(property) {
        "***".to_owned()
    } else {
        value.to_owned()
    }
}

fn error(variable: &str, value: &str, expected: &str) -> SettingsError {
    SettingsError::invalid(variable, value, expected)
}

#[cfg(test)]
mod tests;
