//! The transition helper every status change goes through, and `mark_published`.

use crate::error::OutboxError;
use crate::status::{self, IllegalTransition, MarkPublished, OutboxStatus};
use crate::store;
use sqlx::PgConnection;
use uuid::Uuid;

/// The result of [`transition`] on an existing row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransitionOutcome {
    /// The row moved to the requested status.
    Moved,
    /// The row was in none of the expected statuses (another process moved it first); it
    /// is unchanged and in `current`.
    Stale {
        /// The row's status, which was left as it is.
        current: OutboxStatus,
    },
}

/// The result of [`mark_published`] on an existing row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkPublishedOutcome {
    /// DISPATCHING → PUBLISHED, with the partition and offset recorded.
    Published,
    /// The row was already PUBLISHED or further on; its status and offset are unchanged.
    AlreadyPast {
        /// The row's status.
        current: OutboxStatus,
    },
}

/// The source statuses as SQL values, once every `from → to` is checked to be an edge
/// (the dispatcher's compare-and-set statements use it too).
///
/// # Examples
///
/// ```
/// use sluice_outbox::OutboxStatus::*;
/// use sluice_outbox::{OutboxError, checked_sources};
///
/// let sources = checked_sources(&[Dispatching, Published], UnderProcessing)?;
/// assert_eq!(sources, ["DISPATCHING", "PUBLISHED"]);
/// // PENDING → PUBLISHED is no edge: refused before any SQL runs.
/// assert!(matches!(
///     checked_sources(&[Pending], Published),
///     Err(OutboxError::Illegal(_))
/// ));
/// assert!(matches!(
///     checked_sources(&[], Pending),
///     Err(OutboxError::NoSourceStatus { to: Pending })
/// ));
/// # Ok::<(), OutboxError>(())
/// ```
pub fn checked_sources(
    from_expected: &[OutboxStatus],
    to: OutboxStatus,
) -> Result<Vec<&'static str>, OutboxError> {
    if from_expected.is_empty() {
        return Err(OutboxError::NoSourceStatus { to });
    }
    from_expected
        .iter()
        .map(|&from| {
            status::transition(from, to)?;
            Ok(from.as_str())
        })
        .collect()
}

/// Moves one row to `to` if its status is one of `from_expected` — the single transition
/// helper (docs/ARCHITECTURE.md#outbox). Pass [`status::allowed_sources`]`(to)` to accept any legal source.
///
/// An expected source that has no edge to `to` is an [`OutboxError::Illegal`] and nothing
/// is written. A row in another status is left alone and reported as
/// [`TransitionOutcome::Stale`]. Runs in the caller's transaction (the row stays locked
/// until it ends).
///
/// # Examples
///
/// A consumer that tracks processing itself, instead of [`crate::handle_outbox_record`],
/// moves the row in the transaction of its work:
///
/// ```no_run
/// use sluice_outbox::OutboxStatus::{Dispatching, Published, Success, UnderProcessing};
/// use sluice_outbox::{TransitionOutcome, transition};
/// use sqlx::PgPool;
/// use uuid::Uuid;
///
/// # async fn example(pool: &PgPool, event_id: Uuid) -> Result<(), Box<dyn std::error::Error>> {
/// let mut tx = pool.begin().await?;
/// match transition(&mut tx, event_id, &[Dispatching, Published], UnderProcessing).await? {
///     TransitionOutcome::Moved => {
///         // ... the work, in `tx` ...
///         transition(&mut tx, event_id, &[UnderProcessing], Success).await?;
///         tx.commit().await?;
///     }
///     // Another consumer moved it first; the row is unchanged.
///     TransitionOutcome::Stale { current } => println!("{event_id} is already {current}"),
/// }
/// # Ok(())
/// # }
/// ```
pub async fn transition(
    conn: &mut PgConnection,
    id: Uuid,
    from_expected: &[OutboxStatus],
    to: OutboxStatus,
) -> Result<TransitionOutcome, OutboxError> {
    let sources = checked_sources(from_expected, to)?;
    let row = store::transition(conn, id, to.as_str(), &sources).await?;
    let (current, moved) = row.ok_or(OutboxError::NotFound { id })?;
    let current = OutboxStatus::parse(&current)?;
    if moved {
        tracing::debug!(%id, from = %current, %to, "outbox status changed");
        Ok(TransitionOutcome::Moved)
    } else {
        tracing::debug!(%id, %current, %to, "outbox status change lost a race; row unchanged");
        Ok(TransitionOutcome::Stale { current })
    }
}

/// Records the broker's acknowledgement: DISPATCHING → PUBLISHED with `partition` and
/// `offset`, as a compare-and-set (docs/ARCHITECTURE.md#outbox).
///
/// A row the consumer already moved on (or that recovery already marked PUBLISHED) is
/// [`MarkPublishedOutcome::AlreadyPast`] and keeps its status and offset. A row that is
/// PREQUEUED, PENDING or FAILURE cannot have been acknowledged by this claim: that is an
/// [`OutboxError::Illegal`], and the row is unchanged.
///
/// # Examples
///
/// A publisher of its own (not `sluice dispatch`, which settles under its claim token)
/// records the offset the broker returned:
///
/// ```no_run
/// use sluice_outbox::{MarkPublishedOutcome, mark_published};
/// use sqlx::PgPool;
/// use uuid::Uuid;
///
/// # async fn example(pool: &PgPool, event_id: Uuid) -> Result<(), Box<dyn std::error::Error>> {
/// # let (partition, offset) = (3, 1042_i64);
/// // `partition` and `offset` are what the broker acknowledged.
/// let mut conn = pool.acquire().await?;
/// match mark_published(&mut conn, event_id, partition, offset).await? {
///     MarkPublishedOutcome::Published => {}
///     // The consumer (or stale recovery) was first: status and offset stay.
///     MarkPublishedOutcome::AlreadyPast { current } => println!("already {current}"),
/// }
/// # Ok(())
/// # }
/// ```
pub async fn mark_published(
    conn: &mut PgConnection,
    id: Uuid,
    partition: i32,
    offset: i64,
) -> Result<MarkPublishedOutcome, OutboxError> {
    let to = OutboxStatus::Published;
    let sources: Vec<&str> = status::allowed_sources(to)
        .iter()
        .map(|s| s.as_str())
        .collect();
    let row = store::mark_published(conn, id, to.as_str(), partition, offset, &sources).await?;
    let (current, moved) = row.ok_or(OutboxError::NotFound { id })?;
    let current = OutboxStatus::parse(&current)?;
    match (moved, status::mark_published(current)) {
        (true, _) => {
            tracing::debug!(%id, partition, offset, "outbox event published");
            Ok(MarkPublishedOutcome::Published)
        }
        (false, MarkPublished::AlreadyPast) => {
            tracing::debug!(%id, %current, "outbox event already past PUBLISHED; unchanged");
            Ok(MarkPublishedOutcome::AlreadyPast { current })
        }
        // `Move` without a move cannot happen (the sources are DISPATCHING and the row was
        // locked); report it like an illegal status rather than claim a publication.
        (false, MarkPublished::Illegal | MarkPublished::Move) => {
            Err(IllegalTransition { from: current, to }.into())
        }
    }
}

/// [`mark_published`] for a batch of acknowledgements `(id, partition, offset)`, comparing
/// the status only — the dispatcher does not use it: it settles its batch under its claim
/// token (`sluice_dispatch::store::settle::settle_published`). One
/// compare-and-set statement for the rows still DISPATCHING, then [`mark_published`] row by
/// row for the others (already past PUBLISHED, or an error). One outcome per input, in order.
///
/// # Examples
///
/// ```no_run
/// use sluice_outbox::{MarkPublishedOutcome, mark_published_batch};
/// use sqlx::PgPool;
/// use uuid::Uuid;
///
/// # type Error = Box<dyn std::error::Error>;
/// # async fn example(pool: &PgPool, first: Uuid, second: Uuid) -> Result<(), Error> {
/// // (event id, partition, offset) of each acknowledged record.
/// let acks = [(first, 0, 17_i64), (second, 0, 18)];
/// let mut tx = pool.begin().await?;
/// let outcomes = mark_published_batch(&mut tx, &acks).await?;
/// tx.commit().await?;
/// assert_eq!(outcomes.len(), acks.len());
/// let published = outcomes
///     .iter()
///     .filter(|o| **o == MarkPublishedOutcome::Published)
///     .count();
/// println!("{published} of {} newly published", acks.len());
/// # Ok(())
/// # }
/// ```
pub async fn mark_published_batch(
    conn: &mut PgConnection,
    acks: &[(Uuid, i32, i64)],
) -> Result<Vec<MarkPublishedOutcome>, OutboxError> {
    if acks.is_empty() {
        return Ok(vec![]);
    }
    let to = OutboxStatus::Published;
    let sources = checked_sources(status::allowed_sources(to), to)?;
    let ids: Vec<Uuid> = acks.iter().map(|a| a.0).collect();
    let partitions: Vec<i32> = acks.iter().map(|a| a.1).collect();
    let offsets: Vec<i64> = acks.iter().map(|a| a.2).collect();
    let moved: std::collections::HashSet<Uuid> =
        store::mark_published_batch(conn, &ids, &partitions, &offsets, to.as_str(), &sources)
            .await?
            .into_iter()
            .collect();
    let mut outcomes = Vec::with_capacity(acks.len());
    for &(id, partition, offset) in acks {
        if moved.contains(&id) {
            outcomes.push(MarkPublishedOutcome::Published);
        } else {
            outcomes.push(mark_published(conn, id, partition, offset).await?);
        }
    }
    tracing::debug!(
        acks = acks.len(),
        moved = moved.len(),
        "outbox batch published"
    );
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use OutboxStatus::*;

    #[test]
    fn sources_are_checked_against_the_edges_before_any_sql() {
        assert_eq!(
            checked_sources(&[Dispatching, Published], UnderProcessing).unwrap(),
            vec!["DISPATCHING", "PUBLISHED"]
        );
        match checked_sources(&[Pending, Dispatching], Published) {
            Err(OutboxError::Illegal(e)) => assert_eq!(
                e,
                IllegalTransition {
                    from: Pending,
                    to: Published
                }
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            checked_sources(&[], Pending),
            Err(OutboxError::NoSourceStatus { to: Pending })
        ));
        for to in OutboxStatus::ALL {
            let sources = status::allowed_sources(to);
            if !sources.is_empty() {
                assert_eq!(checked_sources(sources, to).unwrap().len(), sources.len());
            }
        }
    }
}
