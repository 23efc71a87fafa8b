//! The claim's floor: the seq from which a dispatcher's claims look for due events.
//!
//! Every claim moves rows out of PENDING, and a status move is never HOT, so each claimed row
//! leaves a dead entry at the low end of `outbox_events_pending_seq_idx` until vacuum. A claim
//! that scans from seq 0 passes all of them: after a drain of 500,000 events that is about
//! 1,400 index pages per claim, whatever the claim then takes. The floor skips them. It is
//! only where the candidate scan starts: the checks that keep per-key order never use it
//! (`store/sql/claim.sql`), so a PENDING row below the floor can only be late, never
//! overtaken by a later event of its key.
//!
//! How the floor rises. Each claim returns a probe: `low`, the lowest PENDING seq from the
//! claim's floor due within ten minutes, under the claim statement's snapshot, and that
//! snapshot's xmin and xmax. A row below `low` that the snapshot did not see was inserted by
//! a transaction still open then (its seq was taken before the snapshot, as `low`'s was);
//! once a later claim's snapshot has an xmin at or above the probe's xmax, every such
//! transaction has ended, and its rows are visible to that later claim. So a probe becomes
//! the floor only then, and as the lower of its `low` and the later claim's own `low` (which
//! sees those rows).
//!
//! How it goes down. This dispatcher's own requeues (a failed or held publish, due within
//! ten minutes, so later probes keep the floor below them) lower it at once; a stale recovery
//! round and a new database connection (after a failover the sequence may be behind) put it
//! back to 0; a claim that left a candidate out for an earlier row of its key lowers it to
//! that row; a claim from the floor that takes nothing is followed at once by one from 0
//! (at most once a second). Back-offs are shorter than ten minutes, so `low` alone keeps the
//! floor below a requeued row; lowering it at the requeue only makes that immediate.
//!
//! What can still be late, by at most [`FULL_SCAN_EVERY`] (every such period a claim starts
//! from seq 0) plus the wait for the next claim: a row another actor moves back to PENDING
//! below the floor (another dispatcher's requeue, an operator's retry, an application's
//! release of a PREQUEUED row) while this dispatcher finds other work above it; a row
//! delayed by more than ten minutes, once due; and rows below the floor for reasons this
//! reasoning assumes away — seqs not taken in increasing order (a sequence with a cache
//! above 1, `setval`, an explicit seq) or taken long before the transaction's id (a BEFORE
//! INSERT trigger that runs long before the row's first write).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::store::claim::ClaimProbe;

/// How often a claim starts from seq 0 (the bound on how late a row below the floor is).
pub const FULL_SCAN_EVERY: Duration = Duration::from_secs(5);

/// The least time between two claims from seq 0 that follow an empty claim from the floor
/// (with several dispatchers, or a trickle of events, most claims come back empty).
const RESCAN_GAP: Duration = Duration::from_secs(1);

/// Probes waiting for their transactions to end; the oldest is dropped beyond this (which
/// only delays a rise of the floor).
const WAITING_MAX: usize = 64;

/// A dispatcher's floor and the probes that may raise it.
#[derive(Debug)]
pub(crate) struct ClaimFloor {
    floor: i64,
    /// Probes (their `low` and snapshot xmax), oldest first.
    waiting: VecDeque<(i64, i64)>,
    every: Duration,
    next_full_scan: Instant,
    /// When the last claim from seq 0 started.
    last_full_scan: Option<Instant>,
}

impl ClaimFloor {
    /// A floor at seq 0 whose first claim is a full scan.
    pub(crate) fn new(every: Duration, now: Instant) -> Self {
        Self {
            floor: 0,
            waiting: VecDeque::new(),
            every,
            next_full_scan: now,
            last_full_scan: None,
        }
    }

    /// The seq the next claim starts from: the floor, or 0 when a full scan is due.
    pub(crate) fn for_claim(&mut self, now: Instant) -> i64 {
        if now >= self.next_full_scan {
            self.full_scan_at(now);
            0
        } else {
            self.floor
        }
    }

    /// Whether a claim from the floor that took nothing is followed at once by one from
    /// seq 0: yes unless the last claim from 0 started less than [`RESCAN_GAP`] ago (which
    /// then counts as this period's full scan).
    pub(crate) fn rescan_after_empty(&mut self, now: Instant) -> bool {
        if self
            .last_full_scan
            .is_some_and(|at| now.saturating_duration_since(at) < RESCAN_GAP)
        {
            return false;
        }
        self.full_scan_at(now);
        true
    }

    fn full_scan_at(&mut self, now: Instant) {
        self.last_full_scan = Some(now);
        self.next_full_scan = later(now, self.every);
    }

    /// Lengthens or shortens the full-scan period (tests lengthen it to show what the floor
    /// alone does); the next full scan is due one period from `now`.
    pub(crate) fn set_full_scan_every(&mut self, every: Duration, now: Instant) {
        self.every = every;
        self.next_full_scan = later(now, every);
    }

    /// Takes a claim's probe: the newest waiting probe whose transactions have all ended
    /// becomes the floor (lowered to this claim's `low`); a `low` under the floor (a full
    /// scan found rows below it) lowers it, and so does a row that blocked a candidate; then
    /// this probe waits its turn.
    pub(crate) fn observe(&mut self, probe: ClaimProbe) {
        let mut ended = None;
        while let Some(&(low, xmax)) = self.waiting.front() {
            if xmax > probe.snapshot_xmin {
                break;
            }
            ended = Some(low);
            self.waiting.pop_front();
        }
        let now_low = probe.low.unwrap_or(i64::MAX);
        match ended {
            Some(low) => self.floor = low.min(now_low),
            None => self.floor = self.floor.min(now_low),
        }
        if let Some(blocker) = probe.blocked_from {
            self.lower(blocker);
        }
        if let Some(low) = probe.low {
            if self.waiting.len() == WAITING_MAX {
                self.waiting.pop_front();
            }
            self.waiting.push_back((low, probe.snapshot_xmax));
        }
    }

    /// A row of `seq` went back to PENDING by this dispatcher's hand (a failed or held
    /// publish): the floor goes down to it, and so does every waiting probe above it.
    pub(crate) fn lower(&mut self, seq: i64) {
        self.floor = self.floor.min(seq);
        for (low, _) in &mut self.waiting {
            *low = (*low).min(seq);
        }
    }

    /// Rows may be PENDING anywhere below the floor (a stale recovery round moved some back,
    /// or the connection is new): the floor goes back to 0 and the waiting probes are
    /// dropped.
    pub(crate) fn reset(&mut self) {
        self.floor = 0;
        self.waiting.clear();
    }

    /// The current floor.
    pub(crate) fn value(&self) -> i64 {
        self.floor
    }
}

/// `now + by`, or a century on when that does not fit in an `Instant`.
fn later(now: Instant, by: Duration) -> Instant {
    now.checked_add(by)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(low: Option<i64>, xmin: i64, xmax: i64) -> ClaimProbe {
        ClaimProbe {
            low,
            blocked_from: None,
            snapshot_xmin: xmin,
            snapshot_xmax: xmax,
        }
    }

    fn floor() -> (ClaimFloor, Instant) {
        let now = Instant::now();
        let mut f = ClaimFloor::new(Duration::from_secs(5), now);
        assert_eq!(f.for_claim(now), 0, "the first claim is a full scan");
        (f, now)
    }

    #[test]
    fn a_probe_becomes_the_floor_only_after_its_open_transactions_end() {
        let (mut f, now) = floor();
        // Claim 1 saw PENDING rows from seq 100; transaction 50 was open (xmin 50).
        f.observe(probe(Some(100), 50, 60));
        assert_eq!(f.value(), 0);
        // Claim 2: transaction 50 still open, so claim 1's probe waits.
        f.observe(probe(Some(180), 50, 70));
        assert_eq!(f.value(), 0);
        assert_eq!(f.for_claim(now + Duration::from_secs(1)), 0);
        // Claim 3: every transaction below 60 has ended: claim 1's probe is confirmed, lowered
        // to what claim 3 sees (a row of the ended transaction 50, seq 90, is PENDING now).
        f.observe(probe(Some(90), 65, 80));
        assert_eq!(f.value(), 90);
        // Claim 4: claim 2's and 3's probes are confirmed; the newest (90) counts.
        f.observe(probe(Some(300), 85, 90));
        assert_eq!(f.value(), 90);
        f.observe(probe(Some(320), 95, 99));
        assert_eq!(f.value(), 300, "claim 4's probe, confirmed by claim 5");
        assert_eq!(f.for_claim(now + Duration::from_secs(1)), 300);
    }

    #[test]
    fn a_confirmed_probe_never_passes_what_the_confirming_claim_sees() {
        let (mut f, _) = floor();
        f.observe(probe(Some(1_000), 10, 11));
        f.observe(probe(Some(400), 11, 12));
        assert_eq!(f.value(), 400);
    }

    #[test]
    fn a_row_that_blocked_a_candidate_lowers_the_floor_to_it() {
        let (mut f, _) = floor();
        f.observe(probe(Some(500), 10, 11));
        f.observe(probe(Some(600), 11, 12));
        assert_eq!(f.value(), 500);
        // A claim from 500 left out a candidate of a key whose row 42 is PENDING below.
        f.observe(ClaimProbe {
            blocked_from: Some(42),
            ..probe(Some(610), 12, 13)
        });
        assert_eq!(f.value(), 42);
        // A blocker above the floor (locked by a concurrent claim) changes nothing.
        f.observe(ClaimProbe {
            blocked_from: Some(700),
            ..probe(Some(42), 13, 14)
        });
        assert_eq!(f.value(), 42);
    }

    #[test]
    fn a_full_scan_is_due_every_period_and_a_lower_row_it_finds_lowers_the_floor() {
        let (mut f, now) = floor();
        f.observe(probe(Some(500), 10, 11));
        f.observe(probe(Some(600), 11, 12));
        assert_eq!(f.value(), 500);
        assert_eq!(f.for_claim(now + Duration::from_secs(4)), 500);
        assert_eq!(f.for_claim(now + Duration::from_secs(5)), 0, "full scan");
        assert_eq!(f.for_claim(now + Duration::from_secs(6)), 500);
        // The full scan saw a row requeued by someone else at seq 42.
        f.observe(probe(Some(42), 11, 13));
        assert_eq!(f.value(), 42);
    }

    #[test]
    fn an_own_requeue_lowers_the_floor_and_every_waiting_probe() {
        let (mut f, _) = floor();
        f.observe(probe(Some(500), 10, 11));
        f.observe(probe(Some(600), 11, 12));
        assert_eq!(f.value(), 500);
        f.lower(450);
        assert_eq!(f.value(), 450);
        // The probe of 600 confirms later, but not above the requeued row.
        f.observe(probe(Some(650), 12, 13));
        assert_eq!(f.value(), 450);
        f.reset();
        assert_eq!(f.value(), 0);
        f.observe(probe(Some(700), 13, 14));
        assert_eq!(
            f.value(),
            0,
            "nothing waited to be confirmed after the reset"
        );
    }

    #[test]
    fn an_empty_claim_rescans_from_zero_at_most_once_a_second() {
        let (mut f, now) = floor();
        // The first claim was from 0 at `now`.
        assert!(!f.rescan_after_empty(now + Duration::from_millis(500)));
        assert!(f.rescan_after_empty(now + Duration::from_millis(1_000)));
        assert!(!f.rescan_after_empty(now + Duration::from_millis(1_900)));
        // The rescan counts as the period's full scan.
        assert_eq!(f.for_claim(now + Duration::from_millis(5_500)), f.value());
        assert_eq!(f.for_claim(now + Duration::from_millis(6_000)), 0);
    }

    #[test]
    fn a_period_too_long_for_an_instant_turns_the_full_scans_off() {
        let (mut f, now) = floor();
        f.set_full_scan_every(Duration::MAX, now);
        assert_eq!(f.for_claim(now + Duration::from_secs(3600)), f.value());
    }

    #[test]
    fn waiting_probes_are_bounded() {
        let (mut f, _) = floor();
        for i in 0..(WAITING_MAX as i64 + 10) {
            f.observe(probe(Some(100 + i), 5, 10 + i));
        }
        assert_eq!(f.waiting.len(), WAITING_MAX);
        assert_eq!(f.value(), 0, "transaction 5 is still open");
    }
}
