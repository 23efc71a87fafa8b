//! The outbox dispatcher: claim a batch, publish it, record the outcome.
//!
//! At-least-once, written where it is implemented: a row is marked PUBLISHED only after the
//! broker acknowledged its record (acks=all); a failed publish puts it back to PENDING (or
//! FAILURE at the attempt limit); a dispatcher that dies between the acknowledgement and the
//! mark leaves the row DISPATCHING, and [`recovery`] finds the record in Kafka instead of
//! publishing it again. Every one of those moves compares the claim token ([`store::settle`]), so
//! no actor ever moves a claim other than the one it acts on.
//!
//! Per-key order: events of one (topic, partition key) are claimed by one dispatcher at a
//! time (`store/sql/claim.sql`) and sent in creation order, each only after the previous one of
//! its key was acknowledged ([`publish`]); at a key's first failure the rest of its chain is
//! requeued without an attempt behind the failed event's back-off.
//!
//! Stale timeout vs delivery: records are handed to the producer only within the claim's
//! send window, and resolve within the delivery timeout; the settings refuse a stale timeout
//! shorter than both plus a margin, so stale recovery never requeues a claim whose records
//! can still arrive.
//!
//! The loop ([`Dispatcher::run`]) is a pipeline while a backlog lasts: up to
//! [`PIPELINE_DEPTH`] claims in flight, each published as soon as it commits, while
//! the connection settles the one before and claims the next. It never breaks per-key order,
//! because a claim never takes a key that is DISPATCHING in an earlier claim, so batches in
//! flight hold disjoint keys. With no work it waits for a NOTIFY on
//! [`sluice_outbox::NOTIFY_CHANNEL`], the poll interval, or the stop token. Recovery and
//! retention run between batches (nothing in flight) on their own timers. A stop lets the batches in flight finish and records their outcomes.
//!
//! Test-only fault injection (the `failpoint` module) exists only in builds with the `failpoints`
//! feature; a production build has no such code and ignores `SLUICE_FAILPOINT`.
//!
//! All of the dispatcher's SQL lives in [`store`]; the other modules call it.
//!
//! Where things are: the daemon is [`Dispatcher`] (`dispatcher/`: building it and its
//! maintenance rounds, one batch's steps, the loop); its settings are [`settings`]; what it
//! did is [`DispatchReport`] / [`DispatchTotals`]; its recurring events (a batch published,
//! settled, a claim failed, a recovery round, the stop), each with its log line and its
//! metrics, are typed in `events` beside [`metrics`].

mod dispatcher;
mod error;
mod events;
#[cfg(feature = "failpoints")]
pub mod failpoint;
mod floor;
pub mod metrics;
pub mod probe;
pub mod publish;
pub mod recovery;
mod report;
pub mod settings;
pub mod store;

pub use dispatcher::{Dispatcher, PIPELINE_DEPTH};
pub use error::DispatchError;
#[cfg(feature = "failpoints")]
pub use failpoint::Failpoint;
pub use floor::FULL_SCAN_EVERY;
pub use publish::EVENT_ID_HEADER;
pub use report::{DispatchReport, DispatchTotals};
