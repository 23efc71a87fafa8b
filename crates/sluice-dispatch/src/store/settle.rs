//! Settling a claim: every move out of DISPATCHING that a dispatcher or stale dispatch
//! recovery makes compares the claim it acts on.
//!
//! Invariant: a row leaves DISPATCHING only through the claim that put it there. Each claim
//! writes a fresh token (`claim_id`, see `sql/claim.sql`); PUBLISHED (here), back to PENDING
//! (here for recovery, `failure.rs` for a failed publish) and FAILURE all carry
//! `WHERE status = 'DISPATCHING' AND claim_id = <token>`. An actor holding an old view — a
//! recovery round that listed a row before another round requeued it, a dispatcher whose
//! claim went stale and was re-claimed — finds its compare lost, and that is logged and
//! counted, never an error and never an overwrite of the newer claim.

use crate::DispatchError;
use sluice_outbox::checked_sources;
use sluice_outbox::status::OutboxStatus;
use sqlx::PgConnection;
use std::collections::HashSet;
use uuid::Uuid;

/// What [`settle_published`] did with a claim's acknowledgements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settled {
    /// DISPATCHING → PUBLISHED under this claim.
    pub published: usize,
    /// Already past DISPATCHING under this same claim (a consumer read the record before
    /// the mark, or recovery found it): nothing to do.
    pub already_past: usize,
    /// The claim was lost: the row was requeued or is held by another claim. Unchanged.
    pub lost: usize,
}

/// Records acknowledgements `(id, partition, offset)` of claim `claim`: DISPATCHING →
/// PUBLISHED for the rows this claim still holds, in one statement. `claim` is `None` only
/// for rows claimed before claim tokens existed.
pub async fn settle_published(
    conn: &mut PgConnection,
    claim: Option<Uuid>,
    acks: &[(Uuid, i32, i64)],
) -> Result<Settled, DispatchError> {
    let mut settled = Settled::default();
    if acks.is_empty() {
        return Ok(settled);
    }
    let to = OutboxStatus::Published;
    let sources = checked_sources(&[OutboxStatus::Dispatching], to)?;
    let ids: Vec<Uuid> = acks.iter().map(|a| a.0).collect();
    let partitions: Vec<i32> = acks.iter().map(|a| a.1).collect();
    let offsets: Vec<i64> = acks.iter().map(|a| a.2).collect();
    let moved: HashSet<Uuid> = sqlx::query_scalar(include_str!("sql/settle_published.sql"))
        .bind(claim)
        .bind(&ids)
        .bind(&partitions)
        .bind(&offsets)
        .bind(to.as_str())
        .bind(&sources)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .collect();
    settled.published = moved.len();
    if moved.len() == acks.len() {
        return Ok(settled);
    }
    // The rare path: find out, per row, why the compare missed.
    let missed: Vec<Uuid> = ids.into_iter().filter(|id| !moved.contains(id)).collect();
    let rows: Vec<(Uuid, String, Option<Uuid>)> =
        sqlx::query_as(include_str!("sql/claim_state.sql"))
            .bind(&missed)
            .fetch_all(&mut *conn)
            .await?;
    let mut past_acks: Vec<(Uuid, i32, i64)> = Vec::new();
    for (id, status, holder) in rows {
        let status = OutboxStatus::parse(&status)?;
        let past = matches!(
            status,
            OutboxStatus::Published
                | OutboxStatus::UnderProcessing
                | OutboxStatus::Success
                | OutboxStatus::PushedFailure
        );
        if past && holder == claim {
            settled.already_past += 1;
            past_acks.extend(acks.iter().filter(|a| a.0 == id));
            tracing::debug!(%id, %status, "outbox event already past PUBLISHED; status unchanged");
        } else {
            settled.lost += 1;
            tracing::debug!(%id, %status, claim = ?claim, holder = ?holder,
                "claim lost before its mark; row left to its holder");
        }
    }
    if !past_acks.is_empty() {
        // A consumer read the record before the mark: its coordinates are still the row's.
        let ids: Vec<Uuid> = past_acks.iter().map(|a| a.0).collect();
        let partitions: Vec<i32> = past_acks.iter().map(|a| a.1).collect();
        let offsets: Vec<i64> = past_acks.iter().map(|a| a.2).collect();
        sqlx::query(include_str!("sql/record_coordinates.sql"))
            .bind(claim)
            .bind(&ids)
            .bind(&partitions)
            .bind(&offsets)
            .execute(&mut *conn)
            .await?;
    }
    Ok(settled)
}

/// Stale recovery's DISPATCHING → PENDING for a row still held by `claim`, the claim that
/// was listed as stale. False when the compare was lost (another round requeued it first,
/// or it was re-claimed since).
pub async fn requeue_stale(
    conn: &mut PgConnection,
    id: Uuid,
    claim: Option<Uuid>,
) -> Result<bool, DispatchError> {
    let to = OutboxStatus::Pending;
    let sources = checked_sources(&[OutboxStatus::Dispatching], to)?;
    let moved: Option<Uuid> = sqlx::query_scalar(include_str!("sql/requeue_stale.sql"))
        .bind(id)
        .bind(claim)
        .bind(to.as_str())
        .bind(&sources)
        .fetch_optional(conn)
        .await?;
    Ok(moved.is_some())
}
