//! The plain librdkafka clients other crates need, built from the configurations of
//! [`crate::config`], so no crate outside this adapter constructs a Kafka client by hand
//! and every client gets the `KAFKA_*` properties.

use crate::config::{ConsumerOptions, consumer_config, reader_config};
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use sluice_core::KafkaClientSettings;

/// A reader of [`reader_config`] (no group membership, nothing committed, partition EOF
/// reported) assigned `assignment` by hand: stale-recovery searches and other scans.
pub fn assigned_reader(
    client: &KafkaClientSettings,
    group: &str,
    assignment: &TopicPartitionList,
) -> Result<BaseConsumer, KafkaError> {
    let reader: BaseConsumer = reader_config(client, group).create()?;
    reader.assign(assignment)?;
    Ok(reader)
}

/// A group consumer with manual commits ([`consumer_config`], then the librdkafka
/// properties `tuning`) for an async record loop, subscribed to `topics`.
pub fn subscribed_stream_consumer(
    options: &ConsumerOptions<'_>,
    tuning: &[(&str, &str)],
    topics: &[&str],
) -> Result<StreamConsumer, KafkaError> {
    let mut config = consumer_config(options);
    for (name, value) in tuning {
        config.set(*name, *value);
    }
    let consumer: StreamConsumer = config.create()?;
    consumer.subscribe(topics)?;
    Ok(consumer)
}
