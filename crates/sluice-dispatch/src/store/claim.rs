//! Claiming a batch: PENDING → DISPATCHING in one statement (`sql/claim.sql`), under a
//! fresh claim token that every later move of those rows compares (see [`super::settle`]).

use crate::DispatchError;
use serde_json::{Map, Value};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

/// An event this dispatcher claimed and now publishes.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct ClaimedEvent {
    /// The event id (header `sluice-event-id`).
    pub id: Uuid,
    /// Creation order.
    pub seq: i64,
    /// The aggregate's type.
    pub aggregate_type: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// The event's type.
    pub event_type: String,
    /// The topic.
    pub topic: String,
    /// The record key.
    pub partition_key: String,
    /// The explicit partition, if any.
    pub partition: Option<i32>,
    /// The record value.
    pub payload: Value,
    /// Extra headers.
    #[sqlx(json)]
    pub headers: Map<String, Value>,
    /// Failed publish attempts before this claim.
    pub attempts: i32,
    /// The token of the claim that holds the row (`claim_id`).
    pub claim_id: Uuid,
    /// When the enqueuing transaction inserted the row (its start: `now()`).
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// How much one claim takes at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLimit {
    /// Events (`OUTBOX_BATCH_SIZE`).
    pub events: u32,
    /// Bytes of payloads and headers as stored (`OUTBOX_BATCH_BYTES`); the first event is
    /// claimed whatever its size.
    pub bytes: u64,
    /// The seq from which the claim looks for due events (the dispatcher's floor, see
    /// `crate::floor`; 0 looks at all of them). Per-key order never depends on it.
    pub from_seq: i64,
}

impl ClaimLimit {
    /// Up to `events` events, whatever their bytes, from seq 0.
    pub fn events(events: u32) -> Self {
        Self {
            events,
            bytes: i64::MAX as u64,
            from_seq: 0,
        }
    }
}

/// What a claim saw of the rows it did not take, for the dispatcher's floor: the lowest
/// PENDING seq from the claim's `from_seq` due within ten minutes, the xmin and xmax of the
/// claim statement's snapshot (`pg_current_snapshot()`, 64-bit transaction ids), and the
/// lowest row that kept one of its candidates from being claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimProbe {
    /// The lowest PENDING seq at or above `from_seq` due within ten minutes (the claimed rows
    /// included, so never `None` when rows were claimed).
    pub low: Option<i64>,
    /// The lowest earlier PENDING row of a candidate's key outside the claim (the candidate
    /// was left out for it), if any.
    pub blocked_from: Option<i64>,
    /// Every transaction below it had ended when the claim's snapshot was taken.
    pub snapshot_xmin: i64,
    /// No transaction at or above it had started when the claim's snapshot was taken.
    pub snapshot_xmax: i64,
}

/// A claim: its events in creation order, and whether due events were left out for the
/// byte budget alone (a backlog, though fewer than the limit's events were claimed).
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The events claimed, in creation order.
    pub events: Vec<ClaimedEvent>,
    /// Whether the byte budget left events out.
    pub cut: bool,
    /// What the claim saw, when it claimed anything (an UPDATE that takes no row returns
    /// nothing).
    pub probe: Option<ClaimProbe>,
}

/// One row of `sql/claim.sql`.
#[derive(FromRow)]
struct ClaimedRow {
    #[sqlx(flatten)]
    event: ClaimedEvent,
    cut: bool,
    low: Option<i64>,
    blocked_from: Option<i64>,
    snapshot_xmin: i64,
    snapshot_xmax: i64,
}

/// Claims up to `limit` due PENDING events for `dispatcher` under a new claim token and
/// returns them in creation order. Concurrent dispatchers never claim the same event, and
/// never hold events of the same (topic, key) at the same time (see `sql/claim.sql`).
pub async fn claim_batch(
    conn: &mut PgConnection,
    dispatcher: &str,
    limit: u32,
) -> Result<Vec<ClaimedEvent>, DispatchError> {
    let claim = claim_batch_as(conn, dispatcher, Uuid::new_v4(), ClaimLimit::events(limit));
    Ok(claim.await?.events)
}

/// [`claim_batch`] with the caller's claim token (a fresh random one per call), bounded in
/// events and in bytes (docs/ARCHITECTURE.md#memory).
pub async fn claim_batch_as(
    conn: &mut PgConnection,
    dispatcher: &str,
    claim: Uuid,
    limit: ClaimLimit,
) -> Result<Claim, DispatchError> {
    // Planned on every call (an unnamed statement), never with a cached generic plan: the
    // table's size swings from empty to a large backlog, and a plan chosen for an empty
    // table (a nested loop over a sequential scan) takes seconds on a backlog.
    let rows: Vec<ClaimedRow> = sqlx::query_as(include_str!("sql/claim.sql"))
        .persistent(false)
        .bind(dispatcher)
        .bind(i64::from(limit.events))
        .bind(claim)
        .bind(i64::try_from(limit.bytes).unwrap_or(i64::MAX))
        .bind(limit.from_seq)
        .fetch_all(conn)
        .await?;
    let cut = rows.iter().any(|r| r.cut);
    let probe = rows.first().map(|r| ClaimProbe {
        low: r.low,
        blocked_from: r.blocked_from,
        snapshot_xmin: r.snapshot_xmin,
        snapshot_xmax: r.snapshot_xmax,
    });
    let mut events: Vec<ClaimedEvent> = rows.into_iter().map(|r| r.event).collect();
    // UPDATE … RETURNING has no order of its own.
    events.sort_by_key(|e| e.seq);
    Ok(Claim { events, cut, probe })
}
