//! The Kafka client settings from the process environment, checked by librdkafka before
//! anything connects.

use crate::Failure;
use crate::environment::{env_lookup, env_names};
use sluice_core::KafkaClientSettings;

/// The Kafka client settings alone (`KAFKA_BOOTSTRAP_SERVERS`, `KAFKA_*`), checked.
pub fn kafka_settings() -> Result<KafkaClientSettings, Failure> {
    let names = env_names();
    let kafka = KafkaClientSettings::from_vars(&env_lookup, names.iter().map(String::as_str))
        .map_err(Failure::config)?;
    check_kafka(&kafka)?;
    Ok(kafka)
}

/// librdkafka accepts every `KAFKA_*` property, or exit 2 naming the variable.
pub fn check_kafka(kafka: &KafkaClientSettings) -> Result<(), Failure> {
    sluice_kafka::config::check_properties(kafka).map_err(Failure::config)
}
