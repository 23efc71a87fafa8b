//! Operator actions on the outbox: status counts and the re-open of failed events.

use crate::error::OutboxError;
use crate::status::{OPERATOR_REOPEN, OutboxStatus};
use crate::store;
use crate::transition::checked_sources;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

/// What `sluice outbox status` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxSummary {
    /// Rows per status (every status, zero included).
    pub counts: BTreeMap<OutboxStatus, i64>,
    /// Seconds since the oldest due PENDING row became due; `None` when none is due.
    pub oldest_pending_seconds: Option<f64>,
    /// DISPATCHING rows claimed longer ago than the stale timeout.
    pub stuck_dispatching: i64,
}

/// Counts the outbox; `stale_after` decides what "stuck" means.
///
/// # Examples
///
/// A service's own health check (what `sluice outbox status` prints):
///
/// ```no_run
/// use sluice_outbox::OutboxStatus;
/// use sluice_outbox::ops::summary;
/// use sqlx::PgPool;
/// use std::time::Duration;
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = pool.acquire().await?;
/// let outbox = summary(&mut conn, Duration::from_secs(60)).await?;
/// let failed = outbox.counts[&OutboxStatus::Failure];
/// if failed > 0 || outbox.stuck_dispatching > 0 {
///     println!("{failed} failed, {} stuck", outbox.stuck_dispatching);
/// }
/// if let Some(age) = outbox.oldest_pending_seconds {
///     println!("the oldest due event waits for {age:.1} s");
/// }
/// # Ok(())
/// # }
/// ```
pub async fn summary(
    conn: &mut PgConnection,
    stale_after: Duration,
) -> Result<OutboxSummary, OutboxError> {
    let (counts, oldest_pending_seconds, stuck_dispatching) =
        store::status_counts(conn, stale_after.as_secs_f64()).await?;
    let mut all: BTreeMap<OutboxStatus, i64> =
        OutboxStatus::ALL.into_iter().map(|s| (s, 0)).collect();
    for (status, n) in counts {
        all.insert(OutboxStatus::parse(&status)?, n);
    }
    Ok(OutboxSummary {
        counts: all,
        oldest_pending_seconds,
        stuck_dispatching,
    })
}

/// The operator's re-open (FAILURE → PENDING, attempts reset): of `ids`, or of every
/// FAILURE row when `ids` is `None`. Returns how many moved; rows in another status are
/// left alone.
///
/// # Examples
///
/// After fixing what made publishing fail (a topic that did not exist, an ACL):
///
/// ```no_run
/// use sluice_outbox::ops::retry_failed;
/// use sqlx::PgPool;
/// use uuid::Uuid;
///
/// # async fn example(pool: &PgPool, one: Uuid) -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = pool.acquire().await?;
/// let moved = retry_failed(&mut conn, Some(&[one])).await?; // just this event
/// println!("{moved} re-opened");
/// let moved = retry_failed(&mut conn, None).await?; // every FAILURE row
/// println!("{moved} re-opened");
/// # Ok(())
/// # }
/// ```
pub async fn retry_failed(
    conn: &mut PgConnection,
    ids: Option<&[Uuid]>,
) -> Result<u64, OutboxError> {
    let (from, to) = OPERATOR_REOPEN;
    let sources = checked_sources(&[from], to)?;
    let moved = store::retry_failed(conn, to.as_str(), &sources, ids).await?;
    tracing::info!(moved, "re-opened FAILURE outbox events");
    Ok(moved)
}

/// The status of each of `ids` that exists, as stored (`CDC` included): what an operator's
/// command names for the events it did not move.
pub async fn statuses_of(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<BTreeMap<Uuid, String>, OutboxError> {
    let rows: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT id, status FROM outbox_events WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().collect())
}
