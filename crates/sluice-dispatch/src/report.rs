//! What a dispatcher did: one batch ([`DispatchReport`]) and a whole run ([`DispatchTotals`]).

use std::time::Duration;

/// What one dispatch batch did (the storage pipelines have `sluice_core::BatchReport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchReport {
    /// Events claimed.
    pub claimed: usize,
    /// Marked PUBLISHED (or found already past it).
    pub published: usize,
    /// Publish failed; back to PENDING with back-off.
    pub retried: usize,
    /// Publish failed at the attempt limit: FAILURE.
    pub failed: usize,
    /// Explicit partition missing: topic grown, requeued without an attempt.
    pub repartitioned: usize,
    /// Not sent (behind an earlier failed event of its key, or the send window closed):
    /// requeued without an attempt.
    pub held: usize,
    /// The claim was lost before the outcome could be recorded (the row was requeued or
    /// re-claimed meanwhile): left to its new holder.
    pub lost: usize,
    /// Time spent claiming.
    pub claim_time: Duration,
    /// Time from the first record queued to the last delivery report.
    pub publish_time: Duration,
    /// Time spent recording the outcomes.
    pub mark_time: Duration,
}

/// Totals of a dispatcher's run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchTotals {
    /// Batches with at least one event.
    pub batches: u64,
    /// Events marked PUBLISHED.
    pub published: u64,
    /// Failed publishes requeued with back-off.
    pub retried: u64,
    /// Events moved to FAILURE.
    pub failed: u64,
    /// Events requeued without an attempt because they were not sent.
    pub held: u64,
    /// Outcomes not recorded because the claim was lost.
    pub lost: u64,
    /// Time spent in claim statements, summed over the batches.
    pub claim_time: Duration,
    /// Time from a batch's first record queued to its last delivery report, summed over
    /// the batches (batches in flight together each count their own).
    pub publish_time: Duration,
    /// Time spent recording outcomes, summed over the batches.
    pub mark_time: Duration,
}

impl DispatchTotals {
    /// Adds one settled batch.
    pub fn add(&mut self, report: &DispatchReport) {
        self.batches += 1;
        self.published += report.published as u64;
        self.retried += report.retried as u64;
        self.failed += report.failed as u64;
        self.held += report.held as u64;
        self.lost += report.lost as u64;
        self.claim_time += report.claim_time;
        self.publish_time += report.publish_time;
        self.mark_time += report.mark_time;
    }
}
