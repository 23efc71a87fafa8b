//! Why an outbox operation failed.

use crate::status::{IllegalTransition, OutboxStatus, UnknownStatus};
use uuid::Uuid;

/// The constraint name the database's transition trigger reports when it rejects a status
/// change (SQLSTATE 23514, `check_violation`).
pub const TRANSITION_CONSTRAINT: &str = "outbox_events_status_transition";

/// An outbox operation's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The status change is not an edge of the state machine; nothing was written.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// A compare-and-set was asked to accept no source status at all.
    #[error("a move to {to} needs at least one expected source status")]
    NoSourceStatus {
        /// The requested status.
        to: OutboxStatus,
    },
    /// No outbox row has this id.
    #[error("no outbox event {id}")]
    NotFound {
        /// The id asked for.
        id: Uuid,
    },
    /// The row holds a status this build does not know.
    #[error(transparent)]
    UnknownStatus(#[from] UnknownStatus),
    /// The database failed (connection, constraint, the transition trigger).
    #[error("outbox query failed: {0}")]
    Database(#[from] sqlx::Error),
    /// An event that change data capture cannot relay as the dispatcher would publish it;
    /// nothing was written.
    #[error("outbox event {id} cannot be relayed by CDC: {reason}")]
    NotRelayable {
        /// The event's id.
        id: Uuid,
        /// What the relay could not carry.
        reason: &'static str,
    },
    /// An event with a header whose name only sluice may write (`sluice-retry-*`: the retry
    /// tiers' record of where a record came from, which `sluice dlt replay` reads); nothing
    /// was written.
    #[error(
        "outbox event {id}: header `{name}` is reserved for sluice's retry tiers (any service \
         that enqueues could otherwise steer where a dead letter is replayed)"
    )]
    ReservedHeader {
        /// The event's id.
        id: Uuid,
        /// The header.
        name: String,
    },
}

/// Whether a database error is the transition trigger rejecting a status change.
///
/// # Examples
///
/// Code that writes a status by hand (a repair script, an admin tool) tells the trigger's
/// refusal apart from other failures; an error that is not the database's never is one:
///
/// ```
/// use sluice_outbox::is_rejected_transition;
/// use sqlx::PgConnection;
/// use uuid::Uuid;
///
/// /// Marks an event as handled by hand; `false` when the state machine has no such edge.
/// async fn force_success(conn: &mut PgConnection, id: Uuid) -> Result<bool, sqlx::Error> {
///     let update = sqlx::query("UPDATE outbox_events SET status = 'SUCCESS' WHERE id = $1")
///         .bind(id)
///         .execute(conn)
///         .await;
///     match update {
///         Ok(_) => Ok(true),
///         Err(error) if is_rejected_transition(&error) => Ok(false),
///         Err(error) => Err(error),
///     }
/// }
///
/// assert!(!is_rejected_transition(&sqlx::Error::RowNotFound));
/// assert!(!is_rejected_transition(&sqlx::Error::PoolTimedOut));
/// ```
pub fn is_rejected_transition(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db.constraint() == Some(TRANSITION_CONSTRAINT),
        _ => false,
    }
}
