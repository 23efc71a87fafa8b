//! Writing events: `enqueue` in the caller's transaction (`enqueue_cdc` for a deployment that
//! relays the outbox by change data capture), `release` of PREQUEUED events.

use crate::error::OutboxError;
use crate::event::NewEvent;
use crate::status::OutboxStatus;
use crate::store;
use crate::transition::checked_sources;
use sqlx::PgConnection;
use uuid::Uuid;

/// Headers only sluice writes: the retry tiers' (`sluice_retry::headers::PREFIX`).
pub const RESERVED_HEADER_PREFIX: &str = "sluice-retry-";

/// Inserts `event` in the caller's open transaction (PENDING, or PREQUEUED when
/// `event.prequeued`) and returns its id. Nothing is committed here: the event exists
/// exactly when the caller's transaction commits, and the dispatcher is notified then.
///
/// An id that already exists is a unique violation (SQLSTATE 23505), not a silent no-op. A
/// header named `sluice-retry-*` is refused ([`OutboxError::ReservedHeader`]).
///
/// # Examples
///
/// A service archives a user and announces it, in one transaction: the event exists exactly
/// when the business write commits, and a rollback (or an early `?`) leaves neither.
///
/// ```no_run
/// use serde_json::json;
/// use sluice_outbox::{NewEvent, enqueue};
/// use sqlx::PgPool;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = PgPool::connect(&std::env::var("DATABASE_URL")?).await?;
/// let mut tx = pool.begin().await?;
/// sqlx::query("UPDATE users SET archived = true WHERE id = $1")
///     .bind("42")
///     .execute(&mut *tx)
///     .await?;
/// let event = NewEvent::new(
///     "mailbox",         // topic
///     "user",            // aggregate type
///     "42",              // aggregate id, also the record key
///     "mailbox.command", // event type
///     json!({"command": "archive"}),
/// )
/// .with_header("trace-id", "4bf92f3577b34da6");
/// let event_id = enqueue(&mut tx, &event).await?;
/// tx.commit().await?; // the dispatcher is notified now, and publishes the event
/// assert_eq!(event_id, event.id);
/// # Ok(())
/// # }
/// ```
pub async fn enqueue(conn: &mut PgConnection, event: &NewEvent) -> Result<Uuid, OutboxError> {
    if let Some(name) = event.headers.keys().find(|name| {
        name.to_ascii_lowercase()
            .starts_with(RESERVED_HEADER_PREFIX)
    }) {
        return Err(OutboxError::ReservedHeader {
            id: event.id,
            name: name.clone(),
        });
    }
    let status = if event.prequeued {
        OutboxStatus::Prequeued
    } else {
        OutboxStatus::Pending
    };
    insert(conn, event, status).await
}

/// Inserts `event` in status CDC in the caller's open transaction and returns its id: change
/// data capture (Debezium's Outbox Event Router on a publication of CDC inserts) relays it
/// when the caller's transaction commits, and no dispatcher ever claims it.
///
/// What the relay cannot carry as the dispatcher would is refused before anything is written
/// ([`OutboxError::NotRelayable`]): headers of the row's own (the router places columns, not
/// the members of a JSON object; the table's `outbox_events_cdc_headers` check says the same),
/// a PREQUEUED hold and a later `available_at` (the relay publishes at commit).
///
/// # Examples
///
/// The same business transaction as with [`enqueue`], in a deployment whose outbox is
/// relayed by Debezium instead of `sluice dispatch` (README.md, "The CDC option"):
///
/// ```no_run
/// use serde_json::json;
/// use sluice_outbox::{NewEvent, OutboxError, enqueue_cdc};
/// use sqlx::PgPool;
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// let mut tx = pool.begin().await?;
/// let event = NewEvent::new("orders", "order", "o-981", "order.placed", json!({"total": 4200}));
/// enqueue_cdc(&mut tx, &event).await?;
/// tx.commit().await?; // the connector publishes the row's record from the WAL
///
/// // A header of its own cannot travel through the relay: refused, nothing written.
/// let mut tx = pool.begin().await?;
/// let traced = event.clone().with_header("trace-id", "4bf92f3577b34da6");
/// let refused = enqueue_cdc(&mut tx, &traced).await;
/// assert!(matches!(refused, Err(OutboxError::NotRelayable { .. })));
/// # Ok(())
/// # }
/// ```
pub async fn enqueue_cdc(conn: &mut PgConnection, event: &NewEvent) -> Result<Uuid, OutboxError> {
    let refuse = |reason| {
        Err(OutboxError::NotRelayable {
            id: event.id,
            reason,
        })
    };
    if !event.headers.is_empty() {
        return refuse("it has headers of its own (the relay sends only sluice's four)");
    }
    if event.prequeued {
        return refuse("it is prequeued (the relay publishes every CDC row at commit)");
    }
    if event.available_at.is_some() {
        return refuse("it has an available_at (the relay publishes at commit)");
    }
    insert(conn, event, OutboxStatus::Cdc).await
}

/// The one INSERT of an event, in `status` (an initial status).
async fn insert(
    conn: &mut PgConnection,
    event: &NewEvent,
    status: OutboxStatus,
) -> Result<Uuid, OutboxError> {
    debug_assert!(OutboxStatus::INITIAL.contains(&status));
    store::insert_event(conn, event, status.as_str()).await?;
    Ok(event.id)
}

/// Releases PREQUEUED events to PENDING (a compare-and-set: ids in any other status, or
/// unknown, are ignored) and returns how many moved. The dispatchers are notified when the
/// caller's transaction commits.
///
/// # Examples
///
/// Events enqueued [`NewEvent::prequeued`] wait until the service decides they may go, for
/// instance once a payment is confirmed:
///
/// ```no_run
/// use serde_json::json;
/// use sluice_outbox::{NewEvent, enqueue, release};
/// use sqlx::PgPool;
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// let mut tx = pool.begin().await?;
/// let shipped = NewEvent::new("orders", "order", "o-981", "order.shipped", json!({})).prequeued();
/// let id = enqueue(&mut tx, &shipped).await?;
/// tx.commit().await?; // PREQUEUED: no dispatcher claims it yet
///
/// // Later, when the payment is confirmed:
/// let mut tx = pool.begin().await?;
/// let released = release(&mut tx, &[id]).await?;
/// tx.commit().await?;
/// assert_eq!(released, 1); // 0 if it had been released already
/// # Ok(())
/// # }
/// ```
pub async fn release(conn: &mut PgConnection, ids: &[Uuid]) -> Result<u64, OutboxError> {
    let to = OutboxStatus::Pending;
    let sources = checked_sources(&[OutboxStatus::Prequeued], to)?;
    if ids.is_empty() {
        return Ok(0);
    }
    let released = store::release(conn, to.as_str(), ids, &sources).await?;
    tracing::debug!(
        requested = ids.len(),
        released,
        "released prequeued outbox events"
    );
    Ok(released)
}
