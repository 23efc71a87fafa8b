//! librdkafka configurations: the manual-commit consumer (SPEC S3, S4.9) and the resilient
//! producer (SPEC S7).

use rdkafka::ClientConfig;
use std::time::Duration;

/// What a storage consumer needs to know to build its client.
#[derive(Debug, Clone)]
pub struct ConsumerOptions<'a> {
    /// `bootstrap.servers`.
    pub bootstrap_servers: &'a str,
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

/// A consumer configuration with auto-commit off (it cannot be turned on) and the
/// cooperative-sticky assignor.
pub fn consumer_config(options: &ConsumerOptions<'_>) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", options.bootstrap_servers)
        .set("group.id", options.group)
        .set("client.id", options.client_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", options.auto_offset_reset)
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("session.timeout.ms", millis(options.session_timeout))
        .set("max.poll.interval.ms", millis(options.max_poll_interval))
        .set("enable.partition.eof", "false")
        // Bound the prefetch buffer (librdkafka's default is 64 MiB per consumer, and a
        // process runs three): 16 MiB still holds dozens of batches ahead of the writer.
        .set("queued.max.messages.kbytes", "16384")
        // When that buffer is full, librdkafka postpones the next fetch by this long
        // (default 1000 ms): long enough to drain the buffer and stall the writer. Measured
        // with `sluice bench`: 300–600 ms stalls every ~40k records at the default.
        .set("fetch.queue.backoff.ms", "10")
        // Errors seen by the broker connection are retried inside librdkafka; we log them.
        .set("log.connection.close", "false");
    if let Some(id) = options.group_instance_id {
        config.set("group.instance.id", id);
    }
    debug_from_env(&mut config);
    config
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

/// The resilient producer of SPEC S7: acks=all, idempotence, zstd, linger 20 ms,
/// batches of 64 KiB, unbounded retries within the delivery timeout.
pub fn producer_config(bootstrap_servers: &str, client_id: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap_servers)
        .set("client.id", client_id)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "zstd")
        .set("linger.ms", "20")
        .set("batch.size", "65536")
        .set("message.timeout.ms", "120000")
        .set("log.connection.close", "false");
    config
}

/// A plain client for admin and metadata calls.
pub fn admin_config(bootstrap_servers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap_servers)
        .set("log.connection.close", "false");
    config
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_never_auto_commits() {
        let config = consumer_config(&ConsumerOptions {
            bootstrap_servers: "127.0.0.1:9092",
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
    }

    #[test]
    fn producer_is_resilient() {
        let config = producer_config("127.0.0.1:9092", "p");
        for (key, value) in [
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
