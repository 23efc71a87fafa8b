//! Idempotent processing: a consumer's database work runs at most once per key.
//!
//! Invariant: the processed row and the work's effects commit together or not at all. The
//! row is inserted first, in the same transaction as `work`; a key that is already there (a
//! redelivered record) returns [`Processed::AlreadyProcessed`] without running `work`, and a
//! failing `work` rolls back both, so the record is processed again when it comes again.
//!
//! Two keys:
//! - [`MessageKey`], the seed's contract: `(consumer_group, topic, partition, kafka_offset)`
//!   in `processed_kafka_messages`.
//! - The outbox event id ([`process_once_by_event_id`]), an addition to the seed's contract:
//!   `(consumer_group, event_id)` in `processed_outbox_events`. A re-published event (stale
//!   dispatch recovery, an operator's retry) comes at another offset with the same id
//!   ([`crate::EVENT_ID_HEADER`]), so only this key survives re-publication.
//!
//! Either key protects the transaction's own effects only: another group has another key,
//! and side effects outside the database (an e-mail, an HTTP call) need their own idempotency.
//!
//! Each call opens its own transaction on `conn` (a savepoint when `conn` is already in
//! one), so `process_once` can run inside a caller's larger transaction, as
//! [`crate::handle_outbox_record`] does.

use crate::store;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

/// A Kafka record's coordinates for one consumer group: the key of `processed_kafka_messages`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MessageKey {
    /// The consumer group that processes the record (at most 255 bytes).
    pub consumer_group: String,
    /// The record's topic (at most 249 bytes).
    pub topic: String,
    /// The record's partition.
    pub partition: i32,
    /// The record's offset in its partition.
    pub offset: i64,
}

/// What a record is known by for idempotency: its coordinates, or its outbox event id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProcessKey {
    /// The record's coordinates (`processed_kafka_messages`).
    Message(MessageKey),
    /// The outbox event id, which survives re-publication (`processed_outbox_events`).
    Event {
        /// The consumer group that processes the event (at most 255 bytes).
        consumer_group: String,
        /// The outbox event's id.
        event_id: Uuid,
    },
}

impl From<MessageKey> for ProcessKey {
    fn from(key: MessageKey) -> Self {
        ProcessKey::Message(key)
    }
}

/// The result of [`process_once`] when nothing failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processed<T> {
    /// The work ran and its effects committed together with the processed row.
    Done(T),
    /// The key was already processed; the work did not run and nothing was written.
    AlreadyProcessed,
}

/// Why [`process_once`] failed; in every case nothing was committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError<E> {
    /// The caller's work failed; its error is unchanged.
    #[error("processing work failed")]
    Work(#[source] E),
    /// The database failed (the processed row, the transaction itself).
    #[error("idempotent processing query failed")]
    Database(#[from] sqlx::Error),
    /// The work returned success, but a statement in it had failed and aborted the
    /// transaction (the work swallowed the database error): PostgreSQL would answer COMMIT
    /// with ROLLBACK, so nothing was committed and the record is not processed.
    #[error("the work returned Ok but its transaction was aborted by a failed statement")]
    Aborted(#[source] sqlx::Error),
}

/// SQLSTATE 25P02, `in_failed_sql_transaction`: a statement in an aborted transaction.
const IN_FAILED_SQL_TRANSACTION: &str = "25P02";

/// Runs `work` once for `key`; see the module docs.
///
/// In one transaction: insert the processed row (`ON CONFLICT DO NOTHING`), run `work` on
/// the transaction, commit. No row inserted → roll back and return
/// [`Processed::AlreadyProcessed`] without running `work`. `work` fails → roll back both
/// and return [`ProcessError::Work`] with its error unchanged. `work` returns Ok
/// although a statement of it failed (the transaction is aborted) → roll back and return
/// [`ProcessError::Aborted`], never [`Processed::Done`].
///
/// # Examples
///
/// A billing consumer turns each `order.placed` record into one invoice; a redelivered
/// record (a rebalance, a restart before the offset commit) finds its key and writes nothing:
///
/// ```no_run
/// use sluice_outbox::{MessageKey, ProcessError, Processed, process_once};
/// use sqlx::{PgConnection, PgPool};
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// # let (topic, partition, offset, order_id) = ("orders", 3, 1042_i64, "o-981");
/// // The coordinates of the record the Kafka consumer just received.
/// let key = MessageKey {
///     consumer_group: "billing".to_owned(),
///     topic: topic.to_owned(),
///     partition,
///     offset,
/// };
/// let mut conn = pool.acquire().await?;
/// let outcome = process_once(&mut conn, &key, async |tx: &mut PgConnection| {
///     sqlx::query("INSERT INTO invoices (order_id) VALUES ($1)")
///         .bind(order_id)
///         .execute(&mut *tx)
///         .await?;
///     Ok::<_, sqlx::Error>(order_id)
/// })
/// .await;
/// match outcome {
///     Ok(Processed::Done(order)) => println!("invoiced {order}"),
///     Ok(Processed::AlreadyProcessed) => println!("redelivered; already invoiced"),
///     // Nothing committed: do not commit the offset, the record comes again.
///     Err(ProcessError::Work(error)) => return Err(error.into()),
///     Err(error) => return Err(error.into()),
/// }
/// # Ok(())
/// # }
/// ```
pub async fn process_once<T, E>(
    conn: &mut PgConnection,
    key: &MessageKey,
    work: impl AsyncFnOnce(&mut PgConnection) -> Result<T, E>,
) -> Result<Processed<T>, ProcessError<E>> {
    process_keyed(conn, &ProcessKey::Message(key.clone()), work).await
}

/// [`process_once`] keyed by the outbox event id instead of the record's coordinates (an
/// addition to the seed's contract: the key survives re-publication).
///
/// # Examples
///
/// A consumer of outbox records reads the event id from the [`crate::EVENT_ID_HEADER`]
/// header; a record re-published by stale recovery arrives at another offset with the same
/// id and is not applied twice:
///
/// ```no_run
/// use sluice_outbox::{Processed, process_once_by_event_id};
/// use sqlx::{PgConnection, PgPool};
/// use uuid::Uuid;
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// # let header_value: &[u8] = b"67e55044-10b1-426f-9247-bb680e5fe0c8";
/// // The value of the record's `sluice-event-id` header.
/// let event_id = Uuid::parse_str(std::str::from_utf8(header_value)?)?;
/// let mut conn = pool.acquire().await?;
/// let debit = async |tx: &mut PgConnection| {
///     sqlx::query("UPDATE accounts SET balance = balance - 42 WHERE id = 7")
///         .execute(&mut *tx)
///         .await
///         .map(|_| ())
/// };
/// let outcome = process_once_by_event_id(&mut conn, "billing", event_id, debit).await?;
/// assert!(matches!(outcome, Processed::Done(()) | Processed::AlreadyProcessed));
/// # Ok(())
/// # }
/// ```
pub async fn process_once_by_event_id<T, E>(
    conn: &mut PgConnection,
    consumer_group: &str,
    event_id: Uuid,
    work: impl AsyncFnOnce(&mut PgConnection) -> Result<T, E>,
) -> Result<Processed<T>, ProcessError<E>> {
    let key = ProcessKey::Event {
        consumer_group: consumer_group.to_owned(),
        event_id,
    };
    process_keyed(conn, &key, work).await
}

/// [`process_once`] for either key.
///
/// # Examples
///
/// A consumer that chooses the key per record: the event id when the record carries one,
/// its coordinates otherwise (a record some other producer wrote to the same topic).
///
/// ```no_run
/// use sluice_outbox::{MessageKey, ProcessKey, Processed, process_keyed};
/// use sqlx::{PgConnection, PgPool};
/// use uuid::Uuid;
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// # let (event_id, offset): (Option<Uuid>, i64) = (None, 1042);
/// let key = match event_id {
///     Some(event_id) => ProcessKey::Event {
///         consumer_group: "billing".to_owned(),
///         event_id,
///     },
///     None => ProcessKey::from(MessageKey {
///         consumer_group: "billing".to_owned(),
///         topic: "orders".to_owned(),
///         partition: 3,
///         offset,
///     }),
/// };
/// let mut conn = pool.acquire().await?;
/// let outcome = process_keyed(&mut conn, &key, async |tx: &mut PgConnection| {
///     sqlx::query_scalar::<_, i64>("SELECT count(*) FROM invoices")
///         .fetch_one(&mut *tx)
///         .await
/// })
/// .await?;
/// if let Processed::Done(invoices) = outcome {
///     println!("{invoices} invoices");
/// }
/// # Ok(())
/// # }
/// ```
pub async fn process_keyed<T, E>(
    conn: &mut PgConnection,
    key: &ProcessKey,
    work: impl AsyncFnOnce(&mut PgConnection) -> Result<T, E>,
) -> Result<Processed<T>, ProcessError<E>> {
    let mut tx = conn.begin().await?;
    let inserted = match key {
        ProcessKey::Message(key) => {
            store::insert_processed_message(
                &mut tx,
                &key.consumer_group,
                &key.topic,
                key.partition,
                key.offset,
            )
            .await?
        }
        ProcessKey::Event {
            consumer_group,
            event_id,
        } => store::insert_processed_event(&mut tx, consumer_group, *event_id).await?,
    };
    if !inserted {
        tx.rollback().await?;
        tracing::debug!(?key, "record already processed; work skipped");
        return Ok(Processed::AlreadyProcessed);
    }
    match work(&mut tx).await {
        Ok(value) => {
            // COMMIT of an aborted transaction is not an error to sqlx: PostgreSQL answers
            // it with the ROLLBACK command tag, which sqlx does not check. So ask first: in
            // an aborted transaction any statement fails with 25P02 (one round trip, the
            // price of never reporting Done for work that was rolled back).
            if let Err(error) = store::ping(&mut tx).await {
                let aborted = error
                    .as_database_error()
                    .and_then(|db| db.code())
                    .is_some_and(|code| code == IN_FAILED_SQL_TRANSACTION);
                if let Err(rollback) = tx.rollback().await {
                    tracing::warn!(?key, error = %rollback, "rollback after an aborted work failed");
                }
                if aborted {
                    tracing::warn!(
                        ?key,
                        "work returned Ok in an aborted transaction; rolled back"
                    );
                    return Err(ProcessError::Aborted(error));
                }
                return Err(ProcessError::Database(error));
            }
            tx.commit().await?;
            tracing::debug!(?key, "record processed");
            Ok(Processed::Done(value))
        }
        Err(error) => {
            // A failed rollback ends the connection's transaction anyway; the work's error
            // is the one the caller must see.
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(?key, error = %rollback, "rollback after failed work failed");
            }
            tracing::debug!(?key, "processing work failed; rolled back");
            Err(ProcessError::Work(error))
        }
    }
}
