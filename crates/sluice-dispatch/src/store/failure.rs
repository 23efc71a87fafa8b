//! A failed publish: back to PENDING with back-off, or FAILURE after the attempt limit
//! (`mark_publish_failed`); and the requeue that costs no attempt (unknown partition, an
//! event held behind an earlier failed event of its key, or one not sent in the claim's
//! send window). Both compare the claim token (see [`super::settle`]).

use crate::DispatchError;
use crate::settings::{AfterFailedPublish, OutboxSettings};
use sluice_outbox::checked_sources;
use sluice_outbox::status::OutboxStatus;
use sqlx::PgConnection;
use std::time::Duration;
use uuid::Uuid;

/// What [`mark_publish_failed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedPublishOutcome {
    /// Back to PENDING; claimable again after the back-off.
    Requeued {
        /// Failed attempts so far.
        attempts: u32,
    },
    /// The attempt limit is reached: FAILURE.
    Failed {
        /// Failed attempts.
        attempts: u32,
    },
    /// The row is no longer held by this claim (recovery moved it, or it was re-claimed);
    /// it is unchanged.
    NotClaimed,
}

/// Records a failed publish of an event held by claim `claim` with `failed_before` failed
/// attempts: PENDING with exponential back-off, or FAILURE at the attempt limit.
pub async fn mark_publish_failed(
    conn: &mut PgConnection,
    settings: &OutboxSettings,
    claim: Uuid,
    id: Uuid,
    failed_before: u32,
    error: &str,
) -> Result<FailedPublishOutcome, DispatchError> {
    let (to, attempts, delay) = match settings
        .after_failed_publish(failed_before, sluice_core::retry::random_unit())
    {
        AfterFailedPublish::Retry { attempts, delay } => (OutboxStatus::Pending, attempts, delay),
        AfterFailedPublish::GiveUp { attempts } => {
            (OutboxStatus::Failure, attempts, Duration::ZERO)
        }
    };
    let back = SetBack {
        to,
        attempts,
        delay,
        error,
    };
    if !set_back(conn, claim, id, &back).await? {
        tracing::warn!(%id, %claim, "failed publish not recorded: the claim was lost");
        return Ok(FailedPublishOutcome::NotClaimed);
    }
    if to == OutboxStatus::Failure {
        tracing::warn!(%id, attempts, error, "outbox event FAILURE: attempt limit reached");
        Ok(FailedPublishOutcome::Failed { attempts })
    } else {
        tracing::debug!(%id, attempts, ?delay, error, "outbox publish failed; requeued");
        Ok(FailedPublishOutcome::Requeued { attempts })
    }
}

/// Back to PENDING after `delay` without counting an attempt. False (and logged) when the
/// row is no longer held by claim `claim`.
pub async fn requeue_without_attempt(
    conn: &mut PgConnection,
    claim: Uuid,
    id: Uuid,
    attempts: u32,
    delay: Duration,
    reason: &str,
) -> Result<bool, DispatchError> {
    let back = SetBack {
        to: OutboxStatus::Pending,
        attempts,
        delay,
        error: reason,
    };
    let moved = set_back(conn, claim, id, &back).await?;
    if !moved {
        tracing::warn!(%id, %claim, reason, "requeue not recorded: the claim was lost");
    }
    Ok(moved)
}

/// Puts `note` in front of the `last_error` of each event of `ids` whose `last_error` is still
/// the one given beside it in `errors` (an event claimed again since, or published, is left
/// alone). Only the text changes: no status, attempt or availability.
pub async fn note_before_last_error(
    conn: &mut PgConnection,
    ids: &[Uuid],
    errors: &[&str],
    note: &str,
) -> Result<(), DispatchError> {
    sqlx::query(
        "UPDATE outbox_events AS e SET last_error = $3 || e.last_error \
         FROM unnest($1::uuid[], $2::text[]) AS f(id, error) \
         WHERE e.id = f.id AND e.last_error = f.error AND e.claim_id IS NULL",
    )
    .bind(ids)
    .bind(errors)
    .bind(note)
    .execute(conn)
    .await?;
    Ok(())
}

/// How many partitions of `topic` the partition registry has opened (its highest + 1; 0 when
/// it assigns none of that topic).
pub async fn registry_partitions(
    conn: &mut PgConnection,
    topic: &str,
) -> Result<i32, DispatchError> {
    let opened: i32 = sqlx::query_scalar(
        "SELECT COALESCE(max(partition) + 1, 0) FROM topic_partition_counts WHERE topic = $1",
    )
    .bind(topic)
    .fetch_one(conn)
    .await?;
    Ok(opened)
}

/// Where [`set_back`] moves a row: its new status, its failed attempts, how long until it
/// is claimable again, and the error recorded with it.
struct SetBack<'a> {
    to: OutboxStatus,
    attempts: u32,
    delay: Duration,
    error: &'a str,
}

/// Moves row `id`, held by claim `claim`, out of DISPATCHING as `back` says; false when the
/// claim no longer holds it.
async fn set_back(
    conn: &mut PgConnection,
    claim: Uuid,
    id: Uuid,
    back: &SetBack<'_>,
) -> Result<bool, DispatchError> {
    checked_sources(&[OutboxStatus::Dispatching], back.to)?;
    let moved: Option<String> = sqlx::query_scalar(include_str!("sql/mark_publish_failed.sql"))
        .bind(id)
        .bind(claim)
        .bind(back.to.as_str())
        .bind(i32::try_from(back.attempts).unwrap_or(i32::MAX))
        .bind(i64::try_from(back.delay.as_millis()).unwrap_or(i64::MAX))
        .bind(back.error)
        .fetch_optional(conn)
        .await?;
    Ok(moved.is_some())
}
