//! Sequential partition assignment (docs/ARCHITECTURE.md#partition-assignment): every mailbox user is pinned to one partition
//! of a topic, so one user's commands stay ordered.
//!
//! Invariants this module keeps, per topic:
//! - A user is assigned once and keeps that partition: the assignment row is never updated,
//!   and [`assign_partition`] returns the stored partition for a known user.
//! - Partitions fill in order (0, 1, 2, …) with at most `max_users_per_partition` users each;
//!   the next partition is opened only when the last one is full, so there are no gaps.
//! - A committed assignment names a partition that exists on the broker: the topic is grown
//!   (CreatePartitions) inside the allocating transaction, before it commits, so nothing can
//!   be published to a partition the broker does not have yet. Partitions never shrink.
//!
//! Concurrency: allocation takes a transaction-scoped advisory lock per topic
//! (`pg_advisory_xact_lock(namespace, hashtext(topic))`), so one transaction at a time reads
//! the last partition's count and bumps it or opens the next partition. A lock on the last
//! partition's row (`SELECT … FOR UPDATE`) would not do on its own: there is no row to lock
//! before the first user, and two callers that both find the last partition full would both
//! open the next one. The lock is released at commit or rollback, also when the connection
//! drops. Two topics whose names hash alike only share a lock, which costs throughput, never
//! correctness. The two-key form keeps these locks apart from single-key advisory locks
//! (the migration lock). The primary keys of `migrations/0008_partition_assignment.sql`
//! guard the same rules in the database.
//!
//! The user id is the canonical mailbox user id — never an e-mail address, a display name
//! or the signed-in browser actor — because it is also the record key (`String(user_id)`).

use crate::store::assignment;
use sluice_kafka::Admin;
use sluice_kafka::KafkaError;
use sqlx::{Connection, PgConnection};
use std::time::Duration;

/// The first key of the allocation lock ("slpa" as bytes); the second is `hashtext(topic)`.
const LOCK_NAMESPACE: i32 = 0x736c_7061;

/// The longest topic name Kafka accepts (and the column's width).
const MAX_TOPIC_LEN: usize = 249;
/// The width of the `user_id` column.
const MAX_USER_ID_LEN: usize = 255;
/// How long a grown partition may take to show in the broker's metadata.
const VISIBLE_WITHIN: Duration = Duration::from_secs(10);
const VISIBLE_POLL: Duration = Duration::from_millis(50);

/// Why a partition could not be assigned. Nothing was committed in any case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssignError {
    /// The cap is not positive.
    #[error("max users per partition must be at least 1, got {0}")]
    InvalidCap(i32),
    /// The user id is empty or longer than 255 bytes.
    #[error("the user id must be 1 to {MAX_USER_ID_LEN} bytes, got {0} bytes")]
    InvalidUserId(usize),
    /// The topic name is empty or longer than 249 bytes.
    #[error("the topic name must be 1 to {MAX_TOPIC_LEN} bytes, got {0} bytes")]
    InvalidTopic(usize),
    /// The topic has no partition number left (`i32::MAX` partitions opened).
    #[error("topic {0} has no partition number left")]
    Exhausted(String),
    /// The topic does not exist on the broker; it is created elsewhere, with its settings.
    #[error("topic {0} does not exist on the broker")]
    UnknownTopic(String),
    /// The broker accepted the growth but did not show the partition in time (transient).
    #[error("partition {partition} of {topic} did not appear in the broker's metadata")]
    NotVisible {
        /// The topic.
        topic: String,
        /// The partition waited for.
        partition: i32,
    },
    /// The database failed.
    #[error("partition assignment query failed: {0}")]
    Database(#[from] sqlx::Error),
    /// The broker's metadata or CreatePartitions call failed.
    #[error("partition assignment kafka call failed: {0}")]
    Kafka(#[from] KafkaError),
}

/// Where the next new user goes, given the last opened partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Into an opened partition that has room.
    Join(i32),
    /// Into a partition opened now (the first one, or the one after a full last one).
    Open(i32),
}

impl Slot {
    /// The partition number.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_outbox::partitions::Slot;
    ///
    /// assert_eq!(Slot::Join(2).partition(), 2);
    /// assert_eq!(Slot::Open(3).partition(), 3);
    /// ```
    pub fn partition(self) -> i32 {
        match self {
            Slot::Join(p) | Slot::Open(p) => p,
        }
    }
}

/// The allocation rule: `last` is the highest opened partition and its user count, `None`
/// before the first user. Returns `None` when the next partition number would overflow.
/// A last partition at or over the cap (the cap may have been lowered) counts as full.
///
/// # Examples
///
/// With at most 1000 users per partition:
///
/// ```
/// use sluice_outbox::partitions::{Slot, next_slot};
///
/// assert_eq!(next_slot(None, 1000), Some(Slot::Open(0))); // the first user
/// assert_eq!(next_slot(Some((0, 999)), 1000), Some(Slot::Join(0))); // room left in 0
/// assert_eq!(next_slot(Some((0, 1000)), 1000), Some(Slot::Open(1))); // 0 is full
/// assert_eq!(next_slot(Some((4, 1200)), 1000), Some(Slot::Open(5))); // the cap was lowered
/// assert_eq!(next_slot(Some((i32::MAX, 1000)), 1000), None); // no partition number left
/// ```
pub fn next_slot(last: Option<(i32, i32)>, cap: i32) -> Option<Slot> {
    match last {
        None => Some(Slot::Open(0)),
        Some((partition, users)) if users < cap => Some(Slot::Join(partition)),
        Some((partition, _)) => partition.checked_add(1).map(Slot::Open),
    }
}

fn validate(topic: &str, user_id: &str, cap: i32) -> Result<(), AssignError> {
    if cap < 1 {
        return Err(AssignError::InvalidCap(cap));
    }
    if topic.is_empty() || topic.len() > MAX_TOPIC_LEN {
        return Err(AssignError::InvalidTopic(topic.len()));
    }
    if user_id.is_empty() || user_id.len() > MAX_USER_ID_LEN {
        return Err(AssignError::InvalidUserId(user_id.len()));
    }
    Ok(())
}

async fn find_assignment(
    conn: &mut PgConnection,
    topic: &str,
    user_id: &str,
) -> Result<Option<i32>, sqlx::Error> {
    assignment::find(conn, topic, user_id).await
}

/// The user's partition of `topic`: the stored one for a known user, otherwise the next
/// free slot (see the module docs), with the topic grown on the broker when the slot is a
/// partition it does not have yet.
///
/// Runs in its own transaction, or in a savepoint of the caller's; in the latter case the
/// topic's allocation lock is held until the caller's transaction ends, and a rollback of it
/// undoes the assignment (a partition already added to the broker stays, unused until the
/// allocation reaches it). `user_id` is the canonical mailbox user id, never an e-mail
/// address or a display name.
///
/// `Admin::partition_count` blocks the calling thread for one metadata request; that
/// happens only when a partition is opened.
///
/// # Examples
///
/// Sign-up pins the new user to a partition of the `mailbox` topic, and every command of
/// that user is then enqueued to it, so one user's commands stay in order
/// (`examples/mailbox/src/users.rs` does the same):
///
/// ```no_run
/// use serde_json::json;
/// use sluice_core::KafkaClientSettings;
/// use sluice_kafka::Admin;
/// use sluice_outbox::{NewEvent, assign_partition, enqueue};
/// use sqlx::PgPool;
/// use std::time::Duration;
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// let admin = Admin::new(&KafkaClientSettings::new("localhost:9092"), Duration::from_secs(10))?;
/// let mut conn = pool.acquire().await?;
/// // Idempotent: a known user gets its stored partition back.
/// let partition = assign_partition(&mut conn, &admin, "mailbox", "user-42", 1000).await?;
///
/// let mut tx = pool.begin().await?;
/// let command = json!({"op": "archive"});
/// let event = NewEvent::new("mailbox", "user", "user-42", "mailbox.command", command)
///     .with_partition(partition);
/// enqueue(&mut tx, &event).await?;
/// tx.commit().await?;
/// # Ok(())
/// # }
/// ```
pub async fn assign_partition(
    conn: &mut PgConnection,
    admin: &Admin,
    topic: &str,
    user_id: &str,
    max_users_per_partition: i32,
) -> Result<i32, AssignError> {
    validate(topic, user_id, max_users_per_partition)?;
    // Assignments are never updated, so a committed one can be returned without the lock.
    if let Some(partition) = find_assignment(conn, topic, user_id).await? {
        return Ok(partition);
    }
    let mut tx = conn.begin().await?;
    assignment::lock_topic(&mut tx, LOCK_NAMESPACE, topic).await?;
    // A concurrent call for the same user may have committed while we waited.
    if let Some(partition) = find_assignment(&mut tx, topic, user_id).await? {
        return Ok(partition);
    }
    let last = assignment::last_partition(&mut tx, topic).await?;
    let slot = next_slot(last, max_users_per_partition)
        .ok_or_else(|| AssignError::Exhausted(topic.to_owned()))?;
    let partition = slot.partition();
    match slot {
        Slot::Join(_) => assignment::join_partition(&mut tx, topic, partition).await?,
        Slot::Open(_) => assignment::open_partition(&mut tx, topic, partition).await?,
    }
    assignment::insert(&mut tx, topic, user_id, partition).await?;
    if let Slot::Open(partition) = slot {
        ensure_broker_partition(admin, topic, partition).await?;
    }
    tx.commit().await?;
    tracing::debug!(
        topic,
        partition,
        opened = matches!(slot, Slot::Open(_)),
        "assigned"
    );
    Ok(partition)
}

/// Grows `topic` so that `partition` exists, and waits until the metadata shows it.
async fn ensure_broker_partition(
    admin: &Admin,
    topic: &str,
    partition: i32,
) -> Result<(), AssignError> {
    let needed = partition.saturating_add(1);
    let Some(count) = admin.partition_count(topic)? else {
        return Err(AssignError::UnknownTopic(topic.to_owned()));
    };
    if count >= needed {
        return Ok(());
    }
    // Another process may have grown it already; grow_topic accepts that.
    admin.grow_topic(topic, needed).await?;
    tracing::info!(
        topic,
        from = count,
        to = needed,
        "grew topic for partition assignment"
    );
    let deadline = tokio::time::Instant::now() + VISIBLE_WITHIN;
    loop {
        if admin.partition_count(topic)?.is_some_and(|n| n >= needed) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(AssignError::NotVisible {
                topic: topic.to_owned(),
                partition,
            });
        }
        tokio::time::sleep(VISIBLE_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_user_opens_partition_zero() {
        assert_eq!(next_slot(None, 10), Some(Slot::Open(0)));
        assert_eq!(next_slot(None, 1), Some(Slot::Open(0)));
    }

    #[test]
    fn a_partition_with_room_is_joined() {
        assert_eq!(next_slot(Some((0, 1)), 10), Some(Slot::Join(0)));
        assert_eq!(next_slot(Some((3, 9)), 10), Some(Slot::Join(3)));
    }

    #[test]
    fn a_full_last_partition_opens_the_next() {
        assert_eq!(next_slot(Some((0, 10)), 10), Some(Slot::Open(1)));
        assert_eq!(next_slot(Some((4, 1)), 1), Some(Slot::Open(5)));
    }

    #[test]
    fn a_last_partition_over_a_lowered_cap_counts_as_full() {
        assert_eq!(next_slot(Some((2, 10)), 5), Some(Slot::Open(3)));
    }

    #[test]
    fn the_partition_number_does_not_overflow() {
        assert_eq!(next_slot(Some((i32::MAX, 10)), 10), None);
        assert_eq!(
            next_slot(Some((i32::MAX, 9)), 10),
            Some(Slot::Join(i32::MAX))
        );
    }

    #[test]
    fn simulated_sequential_fill_has_no_gaps_and_respects_the_cap() {
        let cap = 10;
        let mut counts: Vec<i32> = vec![];
        for _ in 0..500 {
            let last = counts.last().map(|&u| (counts.len() as i32 - 1, u));
            match next_slot(last, cap).unwrap() {
                Slot::Join(p) => counts[p as usize] += 1,
                Slot::Open(p) => {
                    assert_eq!(p as usize, counts.len(), "opened out of order");
                    counts.push(1);
                }
            }
        }
        assert_eq!(counts, vec![10; 50]);
    }

    #[test]
    fn inputs_are_validated() {
        assert!(matches!(
            validate("t", "u", 0),
            Err(AssignError::InvalidCap(0))
        ));
        assert!(matches!(
            validate("", "u", 1),
            Err(AssignError::InvalidTopic(0))
        ));
        let long_topic = "t".repeat(250);
        assert!(matches!(
            validate(&long_topic, "u", 1),
            Err(AssignError::InvalidTopic(250))
        ));
        assert!(matches!(
            validate("t", "", 1),
            Err(AssignError::InvalidUserId(0))
        ));
        let long_user = "u".repeat(256);
        assert!(matches!(
            validate("t", &long_user, 1),
            Err(AssignError::InvalidUserId(256))
        ));
        assert!(validate(&"t".repeat(249), &"u".repeat(255), 1).is_ok());
    }
}
