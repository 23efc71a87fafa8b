//! An event to enqueue.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

/// An event for [`crate::enqueue`]: what to publish, where, and on whose behalf.
///
/// Build it with [`NewEvent::new`] and the `with_*` methods; every field is public, so a
/// struct literal works too.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use sluice_outbox::NewEvent;
///
/// let event = NewEvent::new("mailbox", "user", "42", "mailbox.command", json!({"op": "archive"}))
///     .with_partition(3)
///     .with_header("trace-id", "4bf92f3577b34da6");
/// assert_eq!(event.partition_key, "42");
/// assert_eq!(event.partition, Some(3));
/// assert!(!event.prequeued);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The event id; it travels to Kafka in a header. [`NewEvent::new`] draws a random one.
    pub id: Uuid,
    /// The kind of domain object the event is about (`user`, `order`).
    pub aggregate_type: String,
    /// That object's id.
    pub aggregate_id: String,
    /// What happened (`mailbox.command`).
    pub event_type: String,
    /// The Kafka topic.
    pub topic: String,
    /// The Kafka record key; events with the same key are published in creation order.
    pub partition_key: String,
    /// An explicit partition (S11); `None` lets the producer's partitioner choose by key.
    pub partition: Option<i32>,
    /// The record value.
    pub payload: Value,
    /// Extra Kafka headers, name → value.
    pub headers: Map<String, Value>,
    /// Not published before this time; `None` is the insert time.
    pub available_at: Option<DateTime<Utc>>,
    /// Insert as PREQUEUED (held until [`crate::release`]) instead of PENDING.
    pub prequeued: bool,
}

impl NewEvent {
    /// A PENDING event with a new id, keyed by its aggregate id.
    ///
    /// The id is a UUID version 7: this host's clock in milliseconds, then random bits, so
    /// unique and unguessable, and roughly in creation order (the outbox's primary key index
    /// then takes each batch's status moves on a few neighbouring pages; migration 0020 gives
    /// a plain SQL insert the same ids). Event order is `seq`, never the id.
    ///
    /// # Examples
    ///
    /// ```
    /// use serde_json::json;
    /// use sluice_outbox::NewEvent;
    ///
    /// let event = NewEvent::new(
    ///     "orders",       // the Kafka topic
    ///     "order",        // aggregate type
    ///     "o-981",        // aggregate id
    ///     "order.placed", // event type
    ///     json!({"total": 4200}),
    /// );
    /// assert_eq!(event.partition_key, "o-981"); // the record key defaults to the aggregate id
    /// assert_eq!(event.partition, None); // the producer's partitioner chooses by key
    /// assert!(event.headers.is_empty());
    /// assert_eq!(event.available_at, None); // due at once
    /// let again = NewEvent::new("orders", "order", "o-981", "order.placed", json!({}));
    /// assert_ne!(event.id, again.id); // a new id each time
    /// assert_eq!(event.id.get_version_num(), 7); // time-ordered
    /// ```
    pub fn new(
        topic: impl Into<String>,
        aggregate_type: impl Into<String>,
        aggregate_id: impl Into<String>,
        event_type: impl Into<String>,
        payload: Value,
    ) -> NewEvent {
        let aggregate_id = aggregate_id.into();
        NewEvent {
            id: Uuid::now_v7(),
            aggregate_type: aggregate_type.into(),
            partition_key: aggregate_id.clone(),
            aggregate_id,
            event_type: event_type.into(),
            topic: topic.into(),
            partition: None,
            payload,
            headers: Map::new(),
            available_at: None,
            prequeued: false,
        }
    }

    /// Uses another record key than the aggregate id.
    ///
    /// Events with the same key are published in creation order, so key by whatever must
    /// stay ordered: here every line of an order follows its order.
    ///
    /// # Examples
    ///
    /// ```
    /// use serde_json::json;
    /// use sluice_outbox::NewEvent;
    ///
    /// let event = NewEvent::new("orders", "order_line", "o-981/2", "line.added", json!({}))
    ///     .with_partition_key("o-981");
    /// assert_eq!(event.aggregate_id, "o-981/2");
    /// assert_eq!(event.partition_key, "o-981");
    /// ```
    #[must_use]
    pub fn with_partition_key(mut self, key: impl Into<String>) -> NewEvent {
        self.partition_key = key.into();
        self
    }

    /// Publishes to this partition.
    ///
    /// # Examples
    ///
    /// A user pinned to a partition by [`crate::assign_partition`] has every command sent
    /// there:
    ///
    /// ```
    /// use serde_json::json;
    /// use sluice_outbox::NewEvent;
    ///
    /// let partition = 3; // what assign_partition returned for user 42
    /// let event = NewEvent::new("mailbox", "user", "42", "mailbox.command", json!({}))
    ///     .with_partition(partition);
    /// assert_eq!(event.partition, Some(3));
    /// ```
    #[must_use]
    pub fn with_partition(mut self, partition: i32) -> NewEvent {
        self.partition = Some(partition);
        self
    }

    /// Adds a Kafka header.
    ///
    /// The dispatcher sends a string value as its text, any other value as its JSON. Names
    /// starting with `sluice-retry-` belong to sluice's retry tiers, and [`crate::enqueue`]
    /// refuses them.
    ///
    /// # Examples
    ///
    /// ```
    /// use serde_json::json;
    /// use sluice_outbox::NewEvent;
    ///
    /// let event = NewEvent::new("mailbox", "user", "42", "mailbox.command", json!({}))
    ///     .with_header("trace-id", "4bf92f3577b34da6")
    ///     .with_header("schema-version", 2);
    /// assert_eq!(event.headers["trace-id"], json!("4bf92f3577b34da6"));
    /// assert_eq!(event.headers["schema-version"], json!(2));
    /// ```
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<Value>) -> NewEvent {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Holds the event as PREQUEUED until it is released ([`crate::release`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use serde_json::json;
    /// use sluice_outbox::NewEvent;
    ///
    /// let event =
    ///     NewEvent::new("orders", "order", "o-981", "order.shipped", json!({})).prequeued();
    /// assert!(event.prequeued);
    /// ```
    #[must_use]
    pub fn prequeued(mut self) -> NewEvent {
        self.prequeued = true;
        self
    }

    /// Does not publish before `at`.
    ///
    /// # Examples
    ///
    /// A reminder the dispatcher publishes in an hour, not before:
    ///
    /// ```
    /// use chrono::{TimeDelta, Utc};
    /// use serde_json::json;
    /// use sluice_outbox::NewEvent;
    ///
    /// let at = Utc::now() + TimeDelta::hours(1);
    /// let event = NewEvent::new("mailbox", "user", "42", "mailbox.reminder", json!({}))
    ///     .available_at(at);
    /// assert_eq!(event.available_at, Some(at));
    /// ```
    #[must_use]
    pub fn available_at(mut self, at: DateTime<Utc>) -> NewEvent {
        self.available_at = Some(at);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_key_by_aggregate_and_builders_override() {
        let event = NewEvent::new("mailbox", "user", "42", "mailbox.command", json!({"n": 1}));
        assert_eq!(event.partition_key, "42");
        assert_eq!(event.partition, None);
        assert!(!event.prequeued);
        assert!(event.headers.is_empty());
        let event = event
            .with_partition_key("k")
            .with_partition(3)
            .with_header("trace", "abc")
            .prequeued();
        assert_eq!(event.partition_key, "k");
        assert_eq!(event.partition, Some(3));
        assert_eq!(event.headers["trace"], json!("abc"));
        assert!(event.prequeued);
    }
}
