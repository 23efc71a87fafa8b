//! librdkafka configurations: the manual-commit consumer, the resilient producer and the
//! admin client. Every client sluice creates is built here, so the `KAFKA_*` client
//! properties (security, SASL, TLS, tuning) reach all of them.

use rdkafka::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use sluice_core::KafkaClientSettings;
use sluice_core::settings::kafka_client::variable_of;
use std::time::Duration;

/// What a consumer needs to know to build its client.
#[derive(Debug, Clone)]
pub struct ConsumerOptions<'a> {
    /// The storage pipelines' tuning: the cooperative-sticky assignor, `max.poll.interval.ms`
    /// and a prefetch buffer bounded in bytes by the pipeline's batch size in bytes. `None`
    /// for a consumer that handles one record per transaction (the retry tiers, the mailbox
    /// example), which keeps librdkafka's defaults for them.
    pub batch_tuning: Option<ReadAhead>,
    /// `bootstrap.servers` and the `KAFKA_*` client properties.
    pub client: &'a KafkaClientSettings,
    /// `group.id`.
    pub group: &'a str,
    /// `auto.offset.reset` (`earliest` | `latest`).
    pub auto_offset_reset: &'a str,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`.
    pub max_poll_interval: Duration,
    /// `client.id`, for the broker's logs and `kafka-consumer-groups --describe`.
    pub client_id: &'a str,
    /// `group.instance.id`: static membership. A restarted process with the same id takes
    /// its partitions back at once instead of waiting out the session timeout of its dead
    /// predecessor. Two live consumers with one id fence each other (the older one fails).
    pub group_instance_id: Option<&'a str>,
}

/// What bounds a storage pipeline's consumer in bytes (docs/ARCHITECTURE.md#memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadAhead {
    /// The pipeline's batch size in bytes (`batch_bytes`).
    pub batch_bytes: usize,
}

impl ReadAhead {
    /// The most the prefetch queue holds (`queued.max.messages.kbytes`, one queue for the whole
    /// consumer): four batches, between 1 and 16 MiB. librdkafka's default is 64 MiB; 16 MiB
    /// still holds dozens of batches of reviews ahead of the writers.
    pub fn queue_bytes(&self) -> usize {
        self.batch_bytes.saturating_mul(4).clamp(1 << 20, 16 << 20)
    }

    /// The most one fetch response brings (`fetch.max.bytes`, default 50 MiB): one batch,
    /// within the queue's bound, and never below the client's `message.max.bytes`
    /// (`message_max_bytes`): librdkafka raises only a value it chose itself to that, and
    /// refuses to make a consumer whose `fetch.max.bytes` is set below it. A broker always
    /// returns a first record batch larger than it, so a large record is never a stall.
    pub fn fetch_bytes(&self, message_max_bytes: usize) -> usize {
        self.batch_bytes
            .min(self.queue_bytes())
            .max(message_max_bytes)
    }

    /// The most one partition adds to a fetch response (`max.partition.fetch.bytes`): 256 KiB,
    /// less with a smaller batch. A batch holds one partition's records, so long runs of one
    /// partition leave the others' queues empty while the reader works through it: 256 KiB is
    /// about one batch of reviews per run.
    pub fn partition_fetch_bytes(&self) -> usize {
        self.batch_bytes.clamp(1, 256 << 10)
    }
}

/// The configuration of every sluice consumer: auto-commit and the offset store off (they
/// cannot be turned on: an offset moves only when the caller commits it), no partition-EOF
/// events, and with `batch_tuning` the cooperative-sticky assignor and bounded prefetch.
pub fn consumer_config(options: &ConsumerOptions<'_>) -> ClientConfig {
    let mut config = manual_commit_config(options.client, options.group);
    config
        .set("client.id", options.client_id)
        .set("auto.offset.reset", options.auto_offset_reset)
        .set("session.timeout.ms", millis(options.session_timeout))
        .set("enable.partition.eof", "false");
    if let Some(read_ahead) = options.batch_tuning {
        config
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("max.poll.interval.ms", millis(options.max_poll_interval))
            // Bound the prefetch buffer in bytes (librdkafka's default is 64 MiB per
            // consumer, and a process runs one per pipeline).
            .set(
                "queued.max.messages.kbytes",
                (read_ahead.queue_bytes() / 1024).to_string(),
            )
            .set(
                "fetch.max.bytes",
                read_ahead
                    .fetch_bytes(message_max_bytes(options.client))
                    .to_string(),
            )
            // When that buffer is full, librdkafka postpones the next fetch by this long
            // (default 1000 ms): long enough to drain the buffer and stall the writer.
            // Measured with `sluice bench`: 300–600 ms stalls every ~40k records at the
            // default.
            .set("fetch.queue.backoff.ms", "10")
            // A held partition resumed while the others are at their end waits for the
            // broker's long poll of those (`fetch.wait.max.ms`, default 500 ms) before it is
            // fetched again, two or three polls in a row. Measured with `sluice-lab bench
            // --formats-pairs`: a 1.4–1.5 s stall in every 200,000-record drain at the
            // default, ≤ 0.26 s at 100 ms (an idle consumer then asks 10 times a second;
            // `KAFKA_FETCH_WAIT_MAX_MS` sets it back).
            .set("fetch.wait.max.ms", "100")
            .set(
                "max.partition.fetch.bytes",
                read_ahead.partition_fetch_bytes().to_string(),
            )
            // The high watermarks the lag gauge reads (`BatchConsumer::lag`) without a
            // round trip to the broker, which would hold up the reader thread.
            .set("statistics.interval.ms", "2000");
    }
    if let Some(id) = options.group_instance_id {
        config.set("group.instance.id", id);
    }
    with_properties(config, options.client)
}

/// A reader that is assigned partitions by hand and never commits (stale-recovery searches,
/// benchmarks): group `group` only names it in the broker's logs; auto-commit and the
/// offset store are off, and `enable.partition.eof` tells the reader where a partition ends.
pub fn reader_config(client: &KafkaClientSettings, group: &str) -> ClientConfig {
    let mut config = manual_commit_config(client, group);
    config
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "true");
    with_properties(config, client)
}

/// A client that only reads or commits a group's offsets for the operator's commands (lag,
/// replay): it never subscribes nor polls records, and commits only what it is told to.
pub(crate) fn group_offsets_config(client: &KafkaClientSettings, group: &str) -> ClientConfig {
    with_properties(manual_commit_config(client, group), client)
}

/// What every consumer shares: its group, and no offset moves unless the caller commits
/// (auto-commit and the offset store off).
fn manual_commit_config(client: &KafkaClientSettings, group: &str) -> ClientConfig {
    let mut config = base_config(client);
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false");
    config
}

/// `bootstrap.servers` and what every client shares.
fn base_config(client: &KafkaClientSettings) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &client.bootstrap_servers)
        // Errors seen by the broker connection are retried inside librdkafka; we log them.
        .set("log.connection.close", "false");
    config
}

/// Applies the `KAFKA_*` properties last: they may tune what sluice chose (none of them is
/// a property a guarantee depends on, those are refused when the settings are read).
fn with_properties(mut config: ClientConfig, client: &KafkaClientSettings) -> ClientConfig {
    for (name, value) in &client.properties {
        config.set(name, value);
    }
    debug_from_env(&mut config);
    config
}

/// A `KAFKA_*` variable librdkafka does not accept.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {variable}: {reason}")]
pub struct InvalidProperty {
    /// The variable (`KAFKA_<NAME>`), or `KAFKA_*` when librdkafka does not say which.
    pub variable: String,
    /// librdkafka's message.
    pub reason: String,
}

/// Checks the `KAFKA_*` properties with librdkafka itself, before anything connects: each
/// property alone (an unknown name or a malformed value names its variable), then all of
/// them together in a throw-away client (files that do not exist, combinations librdkafka
/// refuses).
pub fn check_properties(client: &KafkaClientSettings) -> Result<(), InvalidProperty> {
    for (name, value) in &client.properties {
        let mut one = ClientConfig::new();
        one.set(name, value);
        if let Err(error) = one.create_native_config() {
            return Err(InvalidProperty {
                variable: variable_of(name),
                reason: describe(&error),
            });
        }
    }
    check_files(client)?;
    let whole = with_properties(base_config(client), client);
    match whole.create::<BaseConsumer>() {
        Ok(_) => Ok(()),
        Err(error) => {
            let reason = describe(&error);
            let set = |name: &str| client.properties.get(name).is_some_and(|v| !v.is_empty());
            // A message naming two properties ("sasl.username and sasl.password must be
            // set") is about the one not set, when one is not.
            let variable = properties_named(&reason)
                .into_iter()
                .find(|name| reason.contains("must be set") && !set(name))
                .or_else(|| {
                    client
                        .properties
                        .keys()
                        .find(|name| reason.contains(name.as_str()))
                        .cloned()
                })
                .or_else(|| named_property(&reason))
                .map_or_else(|| "KAFKA_*".to_owned(), |name| variable_of(&name));
            Err(InvalidProperty { variable, reason })
        }
    }
}

/// Every `*.location` property names a file (or a directory of certificates) that must be
/// readable: librdkafka's own message for a missing one is OpenSSL's `BIO lib`, which names
/// neither the file nor why. `ssl.ca.location = probe` asks librdkafka to search the
/// system's usual places, and is left to it.
fn check_files(client: &KafkaClientSettings) -> Result<(), InvalidProperty> {
    for (name, value) in &client.properties {
        if !name.ends_with(".location") || value.is_empty() || value == "probe" {
            continue;
        }
        if let Err(error) = std::fs::metadata(value).and_then(|meta| {
            if meta.is_dir() {
                std::fs::read_dir(value).map(|_| ())
            } else {
                std::fs::File::open(value).map(|_| ())
            }
        }) {
            return Err(InvalidProperty {
                variable: variable_of(name),
                reason: format!("cannot read {value}: {error}"),
            });
        }
    }
    Ok(())
}

/// The first property a librdkafka message names (`sasl.username and …` → `sasl.username`;
/// `No provider for SASL mechanism …` and `Unsupported hash function: SCRAM-…` →
/// `sasl.mechanism`).
fn named_property(message: &str) -> Option<String> {
    if message.contains("SASL mechanism") || message.contains("hash function: SCRAM") {
        return Some("sasl.mechanism".to_owned());
    }
    properties_named(message).into_iter().next()
}

/// Every property a librdkafka message names, in order (words like `sasl.username`).
fn properties_named(message: &str) -> Vec<String> {
    message
        .split(|c: char| !(c.is_ascii_lowercase() || c == '.'))
        .filter(|word| {
            word.contains('.')
                && !word.starts_with('.')
                && !word.ends_with('.')
                && !word.contains("..")
        })
        .map(str::to_owned)
        .collect()
}

fn describe(error: &KafkaError) -> String {
    match error {
        KafkaError::ClientConfig(_, description, _, _) => description.clone(),
        KafkaError::ClientCreation(description) => description.clone(),
        other => other.to_string(),
    }
}

/// `SLUICE_KAFKA_DEBUG` (e.g. `cgrp,fetch`) turns on librdkafka's debug contexts; they are
/// logged through `tracing` at DEBUG level under the `librdkafka` target.
fn debug_from_env(config: &mut ClientConfig) {
    if let Ok(contexts) = std::env::var("SLUICE_KAFKA_DEBUG")
        && !contexts.trim().is_empty()
    {
        config
            .set("debug", contexts.trim())
            .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
    }
}

/// The resilient producer: acks=all, idempotence, zstd, linger 20 ms, batches of 64 KiB,
/// unbounded retries within the delivery timeout, and keys hashed like the Java client
/// (murmur2), so a key lands on the same partition whichever client produced it.
pub fn producer_config(client: &KafkaClientSettings, client_id: &str) -> ClientConfig {
    let mut config = base_config(client);
    config
        .set("client.id", client_id)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "zstd")
        .set("linger.ms", "20")
        .set("batch.size", "65536")
        .set("message.timeout.ms", "120000")
        .set("partitioner", "murmur2_random");
    with_properties(config, client)
}

/// librdkafka's default `message.max.bytes`: the largest record a client sends, and the
/// least `fetch.max.bytes` it accepts.
const DEFAULT_MESSAGE_MAX_BYTES: usize = 1_000_000;

/// The client's `message.max.bytes`: `KAFKA_MESSAGE_MAX_BYTES`, or librdkafka's default.
fn message_max_bytes(client: &KafkaClientSettings) -> usize {
    client
        .properties
        .get("message.max.bytes")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MESSAGE_MAX_BYTES)
}

/// [`producer_config`] whose records are acknowledged or failed within `delivery_timeout`
/// (`message.timeout.ms`, set after the `KAFKA_*` properties so that it is always sluice's;
/// its alias `delivery.timeout.ms` is refused at start), with `linger` instead of 20 ms, and
/// a queue of at most `queue_bytes` (`queue.buffering.max.kbytes`, default 1 GiB; at least
/// 2 MiB and at least the client's `message.max.bytes`, so the largest record the client
/// sends always fits an empty queue: librdkafka would otherwise refuse it as "queue full"
/// for ever; a `KAFKA_*` variable still sets it): a full queue makes the sender wait, it
/// fails nothing.
pub fn timed_producer_config(
    client: &KafkaClientSettings,
    client_id: &str,
    delivery_timeout: Duration,
    linger: Duration,
    queue_bytes: usize,
) -> ClientConfig {
    let millis = delivery_timeout.as_millis().max(1);
    let mut config = producer_config(client, client_id);
    config
        .set("message.timeout.ms", millis.to_string())
        .set("linger.ms", linger.as_millis().to_string());
    if !client.properties.contains_key("queue.buffering.max.kbytes") {
        let kbytes = (queue_bytes / 1024)
            .max(message_max_bytes(client).div_ceil(1024))
            .max(2048);
        config.set("queue.buffering.max.kbytes", kbytes.to_string());
    }
    if millis < 30_000 {
        config.set("request.timeout.ms", millis.to_string());
    }
    config
}

/// A client for admin and metadata calls.
pub fn admin_config(client: &KafkaClientSettings) -> ClientConfig {
    with_properties(base_config(client), client)
}

/// librdkafka's version and its `builtin.features` (compiled-in codecs, TLS and SASL).
pub fn librdkafka_build() -> Result<(String, Vec<String>), KafkaError> {
    let (_, version) = rdkafka::util::get_rdkafka_version();
    let features = ClientConfig::new()
        .create_native_config()?
        .get("builtin.features")?;
    Ok((
        version,
        features.split(',').map(|f| f.trim().to_owned()).collect(),
    ))
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_never_auto_commits() {
        let mut client = KafkaClientSettings::new("127.0.0.1:9092");
        client
            .properties
            .insert("security.protocol".into(), "SASL_SSL".into());
        let config = consumer_config(&ConsumerOptions {
            batch_tuning: Some(ReadAhead {
                batch_bytes: 4 << 20,
            }),
            client: &client,
            group: "g",
            auto_offset_reset: "earliest",
            session_timeout: Duration::from_secs(45),
            max_poll_interval: Duration::from_secs(300),
            client_id: "c",
            group_instance_id: Some("host-reviews"),
        });
        assert_eq!(config.get("group.instance.id"), Some("host-reviews"));
        assert_eq!(config.get("enable.auto.commit"), Some("false"));
        assert_eq!(config.get("enable.auto.offset.store"), Some("false"));
        assert_eq!(
            config.get("partition.assignment.strategy"),
            Some("cooperative-sticky")
        );
        assert_eq!(config.get("session.timeout.ms"), Some("45000"));
        assert_eq!(config.get("max.poll.interval.ms"), Some("300000"));
        assert_eq!(config.get("fetch.wait.max.ms"), Some("100"));
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("bootstrap.servers"), Some("127.0.0.1:9092"));
    }

    #[test]
    fn librdkafka_rejects_unknown_properties_naming_the_variable() {
        let mut client = KafkaClientSettings::new("127.0.0.1:9092");
        client
            .properties
            .insert("no.such.property".into(), "1".into());
        let err = check_properties(&client).unwrap_err();
        assert_eq!(err.variable, "KAFKA_NO_SUCH_PROPERTY");
        let mut client = KafkaClientSettings::new("127.0.0.1:9092");
        client
            .properties
            .insert("security.protocol".into(), "CARRIER_PIGEON".into());
        assert_eq!(
            check_properties(&client).unwrap_err().variable,
            "KAFKA_SECURITY_PROTOCOL"
        );
        let mut client = KafkaClientSettings::new("127.0.0.1:9092");
        for (name, value) in [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ] {
            client.properties.insert(name.into(), value.into());
        }
        check_properties(&client).unwrap();
        client
            .properties
            .insert("ssl.ca.location".into(), "/nonexistent/ca.pem".into());
        let err = check_properties(&client).unwrap_err();
        assert_eq!(err.variable, "KAFKA_SSL_CA_LOCATION", "{err}");
        assert_eq!(
            err.reason,
            "cannot read /nonexistent/ca.pem: No such file or directory (os error 2)"
        );
        let mut key = KafkaClientSettings::new("127.0.0.1:9092");
        key.properties
            .insert("ssl.key.location".into(), "/nonexistent/client.key".into());
        let err = check_properties(&key).unwrap_err();
        assert_eq!(err.variable, "KAFKA_SSL_KEY_LOCATION", "{err}");
        assert!(err.reason.contains("/nonexistent/client.key"), "{err}");
        // A message naming two properties names the one not set; an unknown SCRAM hash
        // names the mechanism.
        let sasl = |pairs: &[(&str, &str)]| {
            let mut client = KafkaClientSettings::new("127.0.0.1:9092");
            for (name, value) in [
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
            ]
            .iter()
            .chain(pairs)
            {
                client.properties.insert((*name).into(), (*value).into());
            }
            check_properties(&client).unwrap_err().variable
        };
        assert_eq!(sasl(&[("sasl.username", "u")]), "KAFKA_SASL_PASSWORD");
        assert_eq!(sasl(&[("sasl.password", "p")]), "KAFKA_SASL_USERNAME");
        assert_eq!(
            sasl(&[
                ("sasl.username", "u"),
                ("sasl.password", "p"),
                ("sasl.mechanism", "SCRAM-SHA-999")
            ]),
            "KAFKA_SASL_MECHANISM"
        );
    }

    #[test]
    fn librdkafka_has_tls_sasl_and_every_codec() {
        let (version, features) = librdkafka_build().unwrap();
        assert!(version.starts_with('2'), "{version}");
        // librdkafka names zlib `gzip` in builtin.features.
        for needed in [
            "ssl",
            "sasl_plain",
            "sasl_scram",
            "gzip",
            "snappy",
            "lz4",
            "zstd",
        ] {
            assert!(
                features.iter().any(|f| f == needed),
                "{needed} missing from {features:?}"
            );
        }
    }

    #[test]
    fn the_dispatchers_delivery_bound_is_sluices_whatever_the_variables_say() {
        // A variable under the name sluice uses is overridden; one under its alias cannot be
        // given at all (refused by the settings: `an_alias_of_a_property_sluice_sets_is_refused…`).
        let client = KafkaClientSettings::from_vars(
            &|name: &str| match name {
                "KAFKA_BOOTSTRAP_SERVERS" => Some("127.0.0.1:9092".into()),
                "KAFKA_MESSAGE_TIMEOUT_MS" => Some("300000".into()),
                "KAFKA_LINGER_MS" => Some("50".into()),
                _ => None,
            },
            ["KAFKA_MESSAGE_TIMEOUT_MS", "KAFKA_LINGER_MS"],
        )
        .unwrap();
        let config = timed_producer_config(
            &client,
            "d",
            Duration::from_secs(30),
            Duration::from_millis(1),
            16 << 20,
        );
        // What librdkafka itself will use, read back from its native configuration.
        let native = config.create_native_config().unwrap();
        assert_eq!(native.get("message.timeout.ms").unwrap(), "30000");
        assert_eq!(native.get("delivery.timeout.ms").unwrap(), "30000");
        assert_eq!(native.get("linger.ms").unwrap(), "1");
        assert_eq!(native.get("queue.buffering.max.ms").unwrap(), "1");
        assert_eq!(native.get("queue.buffering.max.kbytes").unwrap(), "16384");
        let refused = KafkaClientSettings::from_vars(
            &|name: &str| (name == "KAFKA_DELIVERY_TIMEOUT_MS").then(|| "300000".to_owned()),
            ["KAFKA_DELIVERY_TIMEOUT_MS"],
        )
        .unwrap_err();
        assert_eq!(refused.variable(), "KAFKA_DELIVERY_TIMEOUT_MS");
    }

    /// librdkafka refuses a consumer whose `fetch.max.bytes` is set below its
    /// `message.max.bytes` (it raises only a value it chose itself): a sink's `batch_bytes`
    /// below 1,000,000, or `KAFKA_MESSAGE_MAX_BYTES` above `batch_bytes`, must still make a
    /// consumer (docs/ARCHITECTURE.md#memory).
    #[test]
    fn a_batch_budget_below_message_max_bytes_still_makes_a_consumer() {
        let large = KafkaClientSettings::from_vars(
            &|name: &str| match name {
                "KAFKA_BOOTSTRAP_SERVERS" => Some("127.0.0.1:9092".into()),
                "KAFKA_MESSAGE_MAX_BYTES" => Some("8388608".into()),
                _ => None,
            },
            ["KAFKA_MESSAGE_MAX_BYTES"],
        )
        .unwrap();
        let default = KafkaClientSettings::new("127.0.0.1:9092");
        for (client, batch_bytes) in [(&default, 65_536), (&default, 1), (&large, 4 << 20)] {
            let config = consumer_config(&ConsumerOptions {
                batch_tuning: Some(ReadAhead { batch_bytes }),
                client,
                group: "g",
                auto_offset_reset: "earliest",
                session_timeout: Duration::from_secs(45),
                max_poll_interval: Duration::from_secs(300),
                client_id: "c",
                group_instance_id: None,
            });
            let made: Result<BaseConsumer, KafkaError> = config.create();
            assert!(
                made.is_ok(),
                "batch_bytes {batch_bytes}, message.max.bytes {:?}: {:?}",
                client.properties.get("message.max.bytes"),
                made.err()
            );
        }
    }

    /// A sink's `batch_bytes` may be any integer TOML holds: the read-ahead's sizes saturate
    /// instead of overflowing (a panic in a debug build).
    #[test]
    fn a_huge_batch_budget_saturates() {
        let huge = ReadAhead {
            batch_bytes: i64::MAX as usize,
        };
        assert_eq!(huge.queue_bytes(), 16 << 20);
        assert_eq!(huge.fetch_bytes(1_000_000), 16 << 20);
        assert_eq!(huge.partition_fetch_bytes(), 256 << 10);
    }

    /// A record as large as `message.max.bytes` always fits the producer's queue, or the
    /// sender would wait for room forever.
    #[test]
    fn the_producer_queue_holds_a_record_of_message_max_bytes() {
        let client = KafkaClientSettings::from_vars(
            &|name: &str| match name {
                "KAFKA_BOOTSTRAP_SERVERS" => Some("127.0.0.1:9092".into()),
                "KAFKA_MESSAGE_MAX_BYTES" => Some("8388608".into()),
                _ => None,
            },
            ["KAFKA_MESSAGE_MAX_BYTES"],
        )
        .unwrap();
        let config = timed_producer_config(
            &client,
            "d",
            Duration::from_secs(30),
            Duration::ZERO,
            1 << 20,
        );
        let native = config.create_native_config().unwrap();
        let kbytes: usize = native
            .get("queue.buffering.max.kbytes")
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            kbytes * 1024 >= 8_388_608,
            "queue.buffering.max.kbytes {kbytes}"
        );
    }

    #[test]
    fn every_property_sluice_sets_is_listed_so_its_aliases_are_refused() {
        let client = KafkaClientSettings::new("127.0.0.1:9092");
        let options = |batch_tuning: bool| ConsumerOptions {
            batch_tuning: batch_tuning.then_some(ReadAhead {
                batch_bytes: 4 << 20,
            }),
            client: &client,
            group: "g",
            auto_offset_reset: "earliest",
            session_timeout: Duration::from_secs(45),
            max_poll_interval: Duration::from_secs(300),
            client_id: "c",
            group_instance_id: Some("i"),
        };
        let configs = [
            consumer_config(&options(true)),
            consumer_config(&options(false)),
            producer_config(&client, "p"),
            timed_producer_config(
                &client,
                "d",
                Duration::from_secs(5),
                Duration::ZERO,
                1 << 20,
            ),
            admin_config(&client),
            manual_commit_config(&client, "g"),
            group_offsets_config(&client, "g"),
        ];
        for config in &configs {
            for key in config.config_map().keys() {
                assert!(
                    sluice_core::settings::kafka_client::SET_BY_SLUICE.contains(&key.as_str()),
                    "{key} is set by sluice but not in SET_BY_SLUICE"
                );
            }
        }
    }

    #[test]
    fn producer_is_resilient() {
        let config = producer_config(&KafkaClientSettings::new("127.0.0.1:9092"), "p");
        for (key, value) in [
            ("partitioner", "murmur2_random"),
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("compression.type", "zstd"),
            ("linger.ms", "20"),
            ("batch.size", "65536"),
        ] {
            assert_eq!(config.get(key), Some(value), "{key}");
        }
    }
}
