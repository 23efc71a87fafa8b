//! The batches a dispatcher has in flight: claimed and being published, at most
//! [`PIPELINE_DEPTH`] at a time, all driven by the dispatch loop's one task.
//!
//! The dispatcher has one database connection, so its claims and settles run one after the
//! other; what overlaps is the broker: while a batch's records wait for their
//! acknowledgements, the connection settles the batch before it and claims the next one
//! ([`InFlight::alongside`] keeps every publish going while a statement runs).

use super::batch::{Published, Publishing};
use std::future::Future;
use std::task::Poll;

/// Claims in flight per dispatcher at most. Two already overlap every statement with a
/// publish; more would only hold more keys away from the other dispatchers (a key in flight
/// at one dispatcher is claimable by no one else).
pub const PIPELINE_DEPTH: usize = 2;

/// The publishing batches, in no particular order.
#[derive(Default)]
pub(crate) struct InFlight {
    batches: Vec<Publishing>,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("batches", &self.batches.len())
            .finish()
    }
}

impl InFlight {
    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Whether another claim may start.
    pub(crate) fn has_room(&self) -> bool {
        self.batches.len() < PIPELINE_DEPTH
    }

    pub(crate) fn push(&mut self, batch: Publishing) {
        self.batches.push(batch);
    }

    /// The next batch whose every record is resolved. Never resolves while empty.
    /// Cancel-safe: a batch leaves the set only in the poll that returns it.
    pub(crate) async fn next(&mut self) -> Published {
        std::future::poll_fn(|cx| {
            for i in 0..self.batches.len() {
                if let Poll::Ready(published) = self.batches[i].as_mut().poll(cx) {
                    drop(self.batches.swap_remove(i));
                    return Poll::Ready(published);
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Runs `op` (a claim or a settle on the dispatcher's connection) while the batches in
    /// flight keep going: each one that finishes meanwhile is added to `done`, to be settled
    /// next.
    pub(crate) async fn alongside<T>(
        &mut self,
        op: impl Future<Output = T>,
        done: &mut Vec<Published>,
    ) -> T {
        let op = std::pin::pin!(op);
        let mut op = op;
        loop {
            tokio::select! {
                biased;
                out = &mut op => return out,
                published = self.next(), if !self.is_empty() => done.push(published),
            }
        }
    }
}
