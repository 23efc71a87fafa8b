//! Retry topics and a dead-letter topic for business consumers built on sluice (the mailbox
//! example is the model).
//!
//! A record whose handler fails must neither block its partition nor be lost. On a
//! retryable failure the record is forwarded to the next delay tier
//! (`<topic>.retry.<tier>`, by default `30s`, `2m`, `5m`), after the last tier or on a
//! permanent failure to the dead-letter topic `<topic>.dlt`. Key and payload are unchanged;
//! the record's own headers are kept and the `sluice-retry-*` headers say where it came from,
//! why it failed, how often, and when it is due ([`headers`]).
//!
//! Invariant (at least once, never lost): [`Forwarder::forward`] returns only after the
//! broker acknowledged the copy (acks=all), and the caller commits the source offset only
//! after that. A crash between the two leaves the source record uncommitted: it is read and
//! forwarded again, so the next topic may hold a duplicate, which the handler's idempotency
//! (sluice's `process_once` identity, keyed by the outbox event id) absorbs.
//!
//! A tier consumer ([`run_tier`], its own group `<group>.retry.<tier>`) holds a record that is
//! not due yet and pauses that record's partition only (librdkafka pause/resume; the poll
//! loop never sleeps), so other partitions keep flowing; the held record is handled when
//! due, then the partition resumes right after it, in offset order.
//!
//! Ordering: a retried record leaves its key's order. Records of the same key that come
//! after it are handled while it waits in a tier.

mod error;
pub mod failpoint;
mod forward;
pub mod headers;
mod names;
pub mod read;
mod record;
mod route;
mod tier_consumer;
mod tiers;

pub use error::RetryError;
pub use forward::{Forwarded, Forwarder, Planned, plan_forward};
pub use names::{dlt_topic, retry_topic, tier_group};
pub use record::OwnedRecord;
pub use route::{Destination, Failure, FailureClass, Source, due_ms, next_destination};
pub use tier_consumer::{Outcome, RetryHandler, TierConfig, TierTotals, run_tier};
pub use tiers::{DEFAULT_TIERS, Tier, TierError, Tiers};

/// Milliseconds since the Unix epoch, now, as the retry headers carry them
/// ([`sluice_core::clock::unix_ms`]).
pub fn now_ms() -> i64 {
    i64::try_from(sluice_core::clock::unix_ms()).unwrap_or(i64::MAX)
}
