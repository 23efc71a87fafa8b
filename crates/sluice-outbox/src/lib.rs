//! sluice's transactional outbox library: what a service that enqueues outbox events, or
//! consumes the records they become, depends on — [`enqueue`]/[`enqueue_cdc`]/[`release`],
//! the [`transition`] helper and [`mark_published`], [`process_once`] and
//! [`handle_outbox_record`], [`assign_partition`], and the operator actions in [`ops`]. The
//! dispatcher that publishes the events is its own crate, `sluice-dispatch`.
//!
//! Invariants this crate keeps:
//! - An event exists exactly when the caller's business write committed: [`enqueue`] inserts
//!   in the caller's open transaction and never commits, so a rollback leaves no row and
//!   nothing is published.
//! - A status changes only along an edge of the state machine in [`status`], by a compare-and-set
//!   (`UPDATE … WHERE status = ANY(allowed sources)`) in [`transition`], [`release`] or
//!   [`mark_published`]; a lost race is reported, never overwritten. The database enforces
//!   the same edges with a trigger (`migrations/0005_outbox.sql`, its edges replaced by
//!   `0006_outbox_retry_failed.sql` and `0011_outbox_cdc.sql`, and moved into the trigger's
//!   `WHEN` condition by `0012_outbox_lean_status_moves.sql`), so a status written by hand
//!   cannot skip the state machine either.
//! - A CDC row ([`enqueue_cdc`]) is relayed by change data capture and never claimed: the
//!   claim takes PENDING rows only.
//! - A row leaves DISPATCHING only through the claim that put it there: each claim writes a
//!   fresh token (`claim_id`, `migrations/0010_outbox_claim_token.sql`), and every move a
//!   dispatcher or stale recovery makes compares it (`sluice-dispatch`'s `store::settle`).
//! - An acknowledgement never moves a row back: [`mark_published`] leaves a row that is
//!   already PUBLISHED, UNDER_PROCESSING, SUCCESS or PUSHED_FAILURE as it is.
//!
//! Like the other repositories, nothing here holds a connection: every function takes the
//! caller's `&mut PgConnection` (a transaction dereferences to one). Every statement lives in
//! [`store`] (its `.sql` files in `store/sql/`); the other modules decide and call it. The
//! only Kafka client is the metadata client [`assign_partition`] is given to grow a topic.
//!
//! # Examples
//!
//! Both sides in one place (docs/ARCHITECTURE.md#outbox): the producing service enqueues in
//! its business transaction, and the consuming service handles each record once, moving the
//! outbox row to SUCCESS in the transaction of its work. Every public function has an
//! example of its own.
//!
//! ```no_run
//! use serde_json::json;
//! use sluice_outbox::{Handled, NewEvent, ProcessKey, enqueue, handle_outbox_record};
//! use sqlx::{PgConnection, PgPool};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = PgPool::connect(&std::env::var("DATABASE_URL")?).await?;
//!
//! // The producing service.
//! let mut tx = pool.begin().await?;
//! let event = NewEvent::new("orders", "order", "o-981", "order.placed", json!({"total": 4200}));
//! let event_id = enqueue(&mut tx, &event).await?;
//! tx.commit().await?;
//!
//! // `sluice dispatch` publishes it with the id in the `sluice-event-id` header; the
//! // consuming service reads it back from there.
//! let key = ProcessKey::Event { consumer_group: "billing".to_owned(), event_id };
//! let mut conn = pool.acquire().await?;
//! let outcome = handle_outbox_record(&mut conn, &key, event_id, async |tx: &mut PgConnection| {
//!     sqlx::query("INSERT INTO invoices (order_id) VALUES ($1)")
//!         .bind("o-981")
//!         .execute(&mut *tx)
//!         .await?;
//!     Ok::<_, sqlx::Error>(Handled::Applied)
//! })
//! .await?;
//! println!("{outcome:?}");
//! # Ok(())
//! # }
//! ```

mod enqueue;
mod error;
mod event;
mod handle_record;
#[cfg(test)]
mod migration_sync;
pub mod ops;
pub mod partitions;
mod process_once;
pub mod status;
pub mod store;
mod transition;

pub use enqueue::{enqueue, enqueue_cdc, release};
pub use error::{OutboxError, TRANSITION_CONSTRAINT, is_rejected_transition};
pub use event::NewEvent;
pub use handle_record::{
    HandleError, Handled, RecordOutcome, handle_outbox_record, hold_for_retry,
};
pub use partitions::{AssignError, assign_partition};
pub use process_once::{
    MessageKey, ProcessError, ProcessKey, Processed, process_keyed, process_once,
    process_once_by_event_id,
};
pub use status::OutboxStatus;
pub use transition::{
    MarkPublishedOutcome, TransitionOutcome, checked_sources, mark_published, mark_published_batch,
    transition,
};

/// The record header carrying the event id: a consumer keys its processing by it, and stale
/// dispatch recovery looks for it in Kafka.
pub const EVENT_ID_HEADER: &str = "sluice-event-id";
/// The record header carrying the event type.
pub const EVENT_TYPE_HEADER: &str = "sluice-event-type";
/// The record header carrying the aggregate type.
pub const AGGREGATE_TYPE_HEADER: &str = "sluice-aggregate-type";
/// The record header carrying the aggregate id.
pub const AGGREGATE_ID_HEADER: &str = "sluice-aggregate-id";

/// The LISTEN/NOTIFY channel a committed, claimable event is announced on; the payload is
/// the event's topic.
pub const NOTIFY_CHANNEL: &str = "sluice_outbox";
