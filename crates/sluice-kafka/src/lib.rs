//! sluice's Kafka adapter, on librdkafka through `rdkafka`.
//!
//! At-least-once, written down where it is implemented: the consumer never commits on its
//! own (`enable.auto.commit=false`, `enable.auto.offset.store=false`); the storage pipeline
//! commits a batch's offsets synchronously, and only after the PostgreSQL transaction that
//! holds the batch's effect has committed.

pub mod admin;
pub mod clients;
pub mod config;
pub mod consumer;
pub mod context;
pub mod error;
pub mod producer;
pub mod rebalance;
pub mod stall;

pub use admin::{Admin, GroupMember};
pub use consumer::{
    BatchConsumer, ConsumeError, REPLAY_COUNT_HEADER, Record, TOPIC_CHECK_INTERVAL,
};
pub use error::disposition;
pub use producer::ResilientProducer;
pub use rdkafka::error::KafkaError;
