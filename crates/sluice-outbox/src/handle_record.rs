//! The outbox-aware consumer helper: process one record of an outbox event
//! once and move its outbox row to its final status in the same transaction.
//!
//! Invariant: the processed row, the work's effects and the row's final status (SUCCESS or
//! PUSHED_FAILURE) commit together. The outbox row is locked first, so two consumers handling
//! the same event take turns. A row already terminal is skipped without running the work; a
//! record already processed whose row is not terminal (its success transition was lost, e.g.
//! the work was committed by a bare [`process_once`](crate::process_once)) gets the missing
//! transition to SUCCESS, and the work does not run again.

use crate::error::OutboxError;
use crate::process_once::{ProcessError, ProcessKey, Processed, process_keyed};
use crate::status::OutboxStatus;
use crate::store;
use crate::transition::{TransitionOutcome, transition};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

/// What the consumer's work decided about a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// The record was applied: the outbox row ends SUCCESS.
    Applied,
    /// The handler rejected the record for this reason: the outbox row ends PUSHED_FAILURE.
    /// The work's writes (e.g. a rejection logged in the projection) still commit.
    Rejected(String),
}

/// What [`handle_outbox_record`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    /// The work ran and applied the record; the row is SUCCESS.
    Applied,
    /// The work ran and rejected the record; the row is PUSHED_FAILURE.
    Rejected(String),
    /// The record was already processed but its row was not terminal: the missing transition
    /// to SUCCESS was added and the work did not run.
    Completed {
        /// The row's status before, DISPATCHING, PUBLISHED, CDC or UNDER_PROCESSING.
        from: OutboxStatus,
    },
    /// The row was already terminal (SUCCESS, PUSHED_FAILURE, FAILURE); nothing was done.
    Skipped {
        /// The row's status.
        status: OutboxStatus,
    },
    /// The row is PREQUEUED or PENDING (requeued after this record was published): it cannot
    /// move to UNDER_PROCESSING, nothing was done, and the dispatcher publishes it again.
    NotReady {
        /// The row's status.
        status: OutboxStatus,
    },
}

/// Why [`handle_outbox_record`] failed; in every case nothing was committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandleError<E> {
    /// The caller's work failed; its error is unchanged.
    #[error("processing work failed")]
    Work(#[source] E),
    /// Reading or moving the outbox row failed (no such event, an illegal move, the
    /// database).
    #[error("outbox record handling failed")]
    Outbox(#[from] OutboxError),
}

impl<E> From<sqlx::Error> for HandleError<E> {
    fn from(error: sqlx::Error) -> Self {
        HandleError::Outbox(OutboxError::Database(error))
    }
}

/// Processes the record of outbox event `event_id` once for `key` and moves its row to its
/// final status, all in one transaction on `conn`; see the module docs.
///
/// DISPATCHING, PUBLISHED or CDC → UNDER_PROCESSING, then [`process_keyed`] with `work`, then
/// UNDER_PROCESSING → SUCCESS ([`Handled::Applied`]) or PUSHED_FAILURE
/// ([`Handled::Rejected`]). When `key` was already processed, UNDER_PROCESSING → SUCCESS
/// without running `work`. `work` fails → everything rolls back and its error is returned
/// (a consumer that sends the record on to a retry tier or a dead-letter topic then calls
/// [`hold_for_retry`], so that retention keeps its row).
///
/// No outbox row for `event_id` is [`OutboxError::NotFound`]: either the record is not an
/// event of this database, or retention already purged the row because the consumer lags
/// more than `OUTBOX_RETENTION_DAYS` behind. A consumer must not pass over it silently (the
/// mailbox consumer logs it as an error with its coordinates and counts it).
///
/// # Examples
///
/// A consumer of the mailbox topic (`examples/mailbox/src/consumer.rs` is the full one):
/// each record's event id comes from its [`crate::EVENT_ID_HEADER`] header, the work
/// applies or rejects the command, and the outcome says what to count. Commit the record's
/// offset after any `Ok`; after an `Err` nothing was committed, so retry the record (or
/// send it to a retry tier).
///
/// ```no_run
/// use serde_json::Value;
/// use sluice_outbox::{
///     HandleError, Handled, OutboxError, ProcessKey, RecordOutcome, handle_outbox_record,
/// };
/// use sqlx::PgConnection;
/// use uuid::Uuid;
///
/// async fn handle(
///     conn: &mut PgConnection,
///     event_id: Uuid, // parsed from the `sluice-event-id` header
///     command: &Value,
/// ) -> Result<(), HandleError<sqlx::Error>> {
///     let key = ProcessKey::Event {
///         consumer_group: "mailbox-consumer".to_owned(),
///         event_id,
///     };
///     let result = handle_outbox_record(conn, &key, event_id, async |tx: &mut PgConnection| {
///         if command["op"] == "reject" {
///             return Ok(Handled::Rejected("rejected by the user".to_owned()));
///         }
///         sqlx::query("INSERT INTO mailbox_projection (event_id, command) VALUES ($1, $2)")
///             .bind(event_id)
///             .bind(command)
///             .execute(&mut *tx)
///             .await?;
///         Ok(Handled::Applied)
///     })
///     .await;
///     match result {
///         Ok(RecordOutcome::Applied) => println!("applied {event_id}"),
///         Ok(RecordOutcome::Rejected(reason)) => println!("rejected {event_id}: {reason}"),
///         Ok(RecordOutcome::Completed { from }) => println!("{event_id}: {from} -> SUCCESS"),
///         Ok(RecordOutcome::Skipped { .. } | RecordOutcome::NotReady { .. }) => {}
///         // Purged by retention (the consumer lags) or not this database's event: never
///         // pass over it silently.
///         Err(HandleError::Outbox(OutboxError::NotFound { id })) => {
///             eprintln!("no outbox row for {id}; NOT applied");
///         }
///         Err(error) => return Err(error),
///     }
///     Ok(())
/// }
/// ```
pub async fn handle_outbox_record<E>(
    conn: &mut PgConnection,
    key: &ProcessKey,
    event_id: Uuid,
    work: impl AsyncFnOnce(&mut PgConnection) -> Result<Handled, E>,
) -> Result<RecordOutcome, HandleError<E>> {
    use OutboxStatus::*;
    let mut tx = conn.begin().await?;
    let status = store::lock_status(&mut tx, event_id).await?;
    let status = status.ok_or(OutboxError::NotFound { id: event_id })?;
    let from = OutboxStatus::parse(&status).map_err(OutboxError::from)?;
    match from {
        Success | PushedFailure | Failure => {
            tx.rollback().await?;
            tracing::debug!(%event_id, status = %from, "outbox row already terminal; skipped");
            return Ok(RecordOutcome::Skipped { status: from });
        }
        Prequeued | Pending => {
            tx.rollback().await?;
            tracing::debug!(%event_id, status = %from, "outbox row not published; skipped");
            return Ok(RecordOutcome::NotReady { status: from });
        }
        Dispatching | Published | Cdc => {
            move_row(
                &mut tx,
                event_id,
                &[Dispatching, Published, Cdc],
                UnderProcessing,
            )
            .await?;
        }
        UnderProcessing => {}
    }
    let outcome = match process_keyed(&mut tx, key, work).await {
        Ok(Processed::Done(Handled::Applied)) => {
            move_row(&mut tx, event_id, &[UnderProcessing], Success).await?;
            RecordOutcome::Applied
        }
        Ok(Processed::Done(Handled::Rejected(reason))) => {
            move_row(&mut tx, event_id, &[UnderProcessing], PushedFailure).await?;
            // The reason stays on the row, for the operator who finds it.
            store::set_last_error(&mut tx, event_id, &store::storable(&reason)).await?;
            RecordOutcome::Rejected(reason)
        }
        Ok(Processed::AlreadyProcessed) => {
            move_row(&mut tx, event_id, &[UnderProcessing], Success).await?;
            tracing::info!(
                %event_id,
                %from,
                "added the lost success transition of a processed record"
            );
            RecordOutcome::Completed { from }
        }
        Err(ProcessError::Work(error)) => {
            // Roll back now: a dropped transaction only queues its ROLLBACK for the
            // connection's next use, and until then the outbox row stays locked, so
            // another consumer of the same event (a retry tier) would wait for it.
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(%event_id, error = %rollback, "rollback after failed work failed");
            }
            return Err(HandleError::Work(error));
        }
        Err(ProcessError::Database(error) | ProcessError::Aborted(error)) => {
            return Err(error.into());
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

/// Marks the row of outbox event `event_id`, whose record a consumer failed on and sends to a
/// retry tier or a dead-letter topic, UNDER_PROCESSING with `error` in `last_error` (when
/// still DISPATCHING, PUBLISHED or CDC; a row another consumer moved on is left as it is).
/// Retention purges PUBLISHED rows after `OUTBOX_RETENTION_DAYS`, never UNDER_PROCESSING
/// ones: without this, an event dead-lettered longer than that lost its row before its
/// replay. Returns whether the row moved.
pub async fn hold_for_retry(
    conn: &mut PgConnection,
    event_id: Uuid,
    error: &str,
) -> Result<bool, OutboxError> {
    Ok(store::hold_failed(conn, event_id, &store::storable(error)).await?)
}

/// [`transition`] on the row this transaction holds locked: it cannot have moved, so a stale
/// outcome is a broken invariant, reported as the illegal move it would have been.
async fn move_row(
    conn: &mut PgConnection,
    id: Uuid,
    from: &[OutboxStatus],
    to: OutboxStatus,
) -> Result<(), OutboxError> {
    match transition(conn, id, from, to).await? {
        TransitionOutcome::Moved => Ok(()),
        TransitionOutcome::Stale { current } => {
            tracing::error!(%id, %current, %to, "locked outbox row changed status");
            Err(crate::status::IllegalTransition { from: current, to }.into())
        }
    }
}
