//! Which WAL position may be confirmed to the slot: the transactions sent to Kafka, in
//! commit order, each with its records not yet acknowledged (docs/capture.md#durability).
//!
//! A transaction's `end_lsn` becomes confirmable once Kafka acknowledged every record of it
//! and of every transaction before it, so a crash at any moment re-sends whole
//! transactions from the last confirmed commit, in commit order: nothing is lost, and no
//! key is reordered.

use crate::lsn::Lsn;
use crate::metrics::KafkaProgress;
use std::collections::VecDeque;

/// A transaction's place in the queue (counts from the relay's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxTicket(u64);

#[derive(Debug)]
struct Pending {
    ticket: TxTicket,
    /// Records handed to the producer and not yet acknowledged.
    outstanding: usize,
    /// Records of it Kafka acknowledged.
    acknowledged: usize,
    /// The position after its commit, once the Commit message arrived.
    end_lsn: Option<Lsn>,
}

/// The transactions between the slot's confirmed position and what was read.
#[derive(Debug, Default)]
pub struct Acks {
    queue: VecDeque<Pending>,
    next: u64,
}

/// A record or a transaction the queue does not know: a bug in the caller, never a reason
/// to confirm anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// The ticket is not (or no longer) in the queue.
    #[error("transaction {0:?} is not pending")]
    Unknown(TxTicket),
    /// More acknowledgements than records sent.
    #[error("transaction {0:?} acknowledged more records than were sent")]
    TooMany(TxTicket),
    /// Records sent after the Commit message.
    #[error("transaction {0:?} already committed")]
    Closed(TxTicket),
}

impl Acks {
    /// An empty queue.
    pub fn new() -> Acks {
        Acks::default()
    }

    /// A transaction begins (its Begin message).
    pub fn begin(&mut self) -> TxTicket {
        let ticket = TxTicket(self.next);
        self.next += 1;
        self.queue.push_back(Pending {
            ticket,
            outstanding: 0,
            acknowledged: 0,
            end_lsn: None,
        });
        ticket
    }

    /// One record of `ticket` went to the producer.
    pub fn sent(&mut self, ticket: TxTicket) -> Result<(), AckError> {
        let pending = self.find(ticket)?;
        if pending.end_lsn.is_some() {
            return Err(AckError::Closed(ticket));
        }
        pending.outstanding += 1;
        Ok(())
    }

    /// The transaction committed; `end_lsn` is the position just past its commit record.
    pub fn commit(&mut self, ticket: TxTicket, end_lsn: Lsn) -> Result<(), AckError> {
        let pending = self.find(ticket)?;
        if pending.end_lsn.is_some() {
            return Err(AckError::Closed(ticket));
        }
        pending.end_lsn = Some(end_lsn);
        Ok(())
    }

    /// Kafka acknowledged one record of `ticket`.
    pub fn acknowledged(&mut self, ticket: TxTicket) -> Result<(), AckError> {
        let pending = self.find(ticket)?;
        pending.outstanding = pending
            .outstanding
            .checked_sub(1)
            .ok_or(AckError::TooMany(ticket))?;
        pending.acknowledged += 1;
        Ok(())
    }

    /// Removes the committed, fully acknowledged transactions at the head of the queue and
    /// returns the last one's `end_lsn`: the position the slot may confirm. `None` when the
    /// head is still waiting (or the queue is empty).
    pub fn confirmable(&mut self) -> Option<Lsn> {
        let mut last = None;
        while let Some(head) = self.queue.front() {
            match head.end_lsn {
                Some(end) if head.outstanding == 0 => {
                    last = Some(end);
                    self.queue.pop_front();
                }
                _ => break,
            }
        }
        last
    }

    /// Nothing sent is unacknowledged and no transaction is open: a keepalive's WAL end
    /// may be confirmed (no change of ours lies before it).
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The oldest transaction with a record waiting for Kafka's acknowledgement, and how
    /// many of its records Kafka acknowledged (`None`: nothing waits).
    pub fn oldest_waiting(&self) -> Option<(TxTicket, usize)> {
        self.queue
            .iter()
            .find(|p| p.outstanding > 0)
            .map(|p| (p.ticket, p.acknowledged))
    }

    /// Records handed to the producer and not yet acknowledged, over every transaction.
    pub fn outstanding(&self) -> usize {
        self.queue.iter().map(|p| p.outstanding).sum()
    }

    fn find(&mut self, ticket: TxTicket) -> Result<&mut Pending, AckError> {
        let first = self.queue.front().map_or(u64::MAX, |p| p.ticket.0);
        let at = ticket
            .0
            .checked_sub(first)
            .and_then(|at| usize::try_from(at).ok())
            .ok_or(AckError::Unknown(ticket))?;
        self.queue.get_mut(at).ok_or(AckError::Unknown(ticket))
    }
}

/// Whether Kafka makes progress on the oldest transaction waiting for it, checked now and
/// then (once a second; nothing per record). Acknowledgements of later transactions (another
/// table's topic, say) do not count: a transaction whose topic does not exist stays the
/// oldest waiting and makes none. A long transaction streaming does: its records are
/// acknowledged as they go.
#[derive(Debug, Default)]
pub struct AckWatch {
    /// What the last check saw; `None` before the first.
    last: Option<Option<(TxTicket, usize)>>,
}

impl AckWatch {
    /// A session's watch: its first check cannot tell progress.
    pub fn new() -> Self {
        Self::default()
    }

    /// Progress since the last check, given [`Acks::oldest_waiting`] now.
    pub fn check(&mut self, oldest: Option<(TxTicket, usize)>) -> KafkaProgress {
        let before = self.last.replace(oldest);
        match (before, oldest) {
            (_, None) => KafkaProgress::NothingWaits,
            // The session's first check: whether these records waited before it is not
            // known here (the metrics remember the session before).
            (None, Some(_)) => KafkaProgress::NoneSeen,
            // Nothing waited at the last check: these records are new since.
            (Some(None), Some(_)) => KafkaProgress::Progressed,
            // The oldest waiting one is later (the one before was fully acknowledged), or
            // more of it was acknowledged.
            (Some(Some((was, acked_then))), Some((is, acked_now))) => {
                if is != was || acked_now > acked_then {
                    KafkaProgress::Progressed
                } else {
                    KafkaProgress::NoneSeen
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_sees_progress_only_on_the_oldest_waiting_transaction() {
        use KafkaProgress::{NoneSeen, NothingWaits, Progressed};
        let mut acks = Acks::new();
        let mut watch = AckWatch::new();
        assert_eq!(watch.check(acks.oldest_waiting()), NothingWaits);
        // A transaction whose topic does not exist: two records, never acknowledged.
        let stuck = acks.begin();
        acks.sent(stuck).unwrap();
        acks.sent(stuck).unwrap();
        acks.commit(stuck, Lsn(10)).unwrap();
        assert_eq!(watch.check(acks.oldest_waiting()), Progressed, "new since");
        assert_eq!(watch.check(acks.oldest_waiting()), NoneSeen);
        // Later transactions of another topic are acknowledged: no progress on the oldest.
        for end in 2..5 {
            let other = acks.begin();
            acks.sent(other).unwrap();
            acks.acknowledged(other).unwrap();
            acks.commit(other, Lsn(end * 10)).unwrap();
            assert_eq!(watch.check(acks.oldest_waiting()), NoneSeen);
        }
        // One of its records acknowledged; then the last: the oldest waiting is gone.
        acks.acknowledged(stuck).unwrap();
        assert_eq!(watch.check(acks.oldest_waiting()), Progressed);
        assert_eq!(watch.check(acks.oldest_waiting()), NoneSeen);
        acks.acknowledged(stuck).unwrap();
        assert_eq!(watch.check(acks.oldest_waiting()), NothingWaits);
        // A long transaction streaming: progress at every check though it always waits.
        let long = acks.begin();
        acks.sent(long).unwrap();
        assert_eq!(watch.check(acks.oldest_waiting()), Progressed);
        for _ in 0..5 {
            acks.sent(long).unwrap();
            acks.acknowledged(long).unwrap();
            assert_eq!(watch.check(acks.oldest_waiting()), Progressed);
        }
        // A new session's watch cannot tell at its first check.
        let mut fresh = AckWatch::new();
        assert_eq!(fresh.check(acks.oldest_waiting()), NoneSeen);
    }

    #[test]
    fn the_oldest_waiting_transaction_and_its_acknowledged_records() {
        let mut acks = Acks::new();
        assert_eq!(acks.oldest_waiting(), None);
        let first = acks.begin();
        assert_eq!(acks.oldest_waiting(), None, "begun, nothing sent");
        acks.sent(first).unwrap();
        acks.sent(first).unwrap();
        assert_eq!(acks.oldest_waiting(), Some((first, 0)));
        acks.acknowledged(first).unwrap();
        assert_eq!(acks.oldest_waiting(), Some((first, 1)));
        let second = acks.begin();
        acks.sent(second).unwrap();
        acks.acknowledged(first).unwrap();
        assert_eq!(
            acks.oldest_waiting(),
            Some((second, 0)),
            "acknowledged, not committed"
        );
    }

    #[test]
    fn a_transaction_is_confirmed_only_after_every_record_and_every_earlier_one() {
        let mut acks = Acks::new();
        let first = acks.begin();
        acks.sent(first).unwrap();
        acks.sent(first).unwrap();
        acks.commit(first, Lsn(100)).unwrap();
        let second = acks.begin();
        acks.sent(second).unwrap();
        acks.commit(second, Lsn(200)).unwrap();
        // The later transaction acknowledged first: nothing may be confirmed.
        acks.acknowledged(second).unwrap();
        assert_eq!(acks.confirmable(), None);
        acks.acknowledged(first).unwrap();
        assert_eq!(
            acks.confirmable(),
            None,
            "one record of the first still out"
        );
        acks.acknowledged(first).unwrap();
        assert_eq!(acks.confirmable(), Some(Lsn(200)), "both, at once");
        assert!(acks.is_empty());
        assert_eq!(acks.confirmable(), None);
    }

    #[test]
    fn an_open_transaction_holds_back_everything_after_it() {
        let mut acks = Acks::new();
        let open = acks.begin();
        acks.sent(open).unwrap();
        acks.acknowledged(open).unwrap();
        assert_eq!(acks.confirmable(), None, "no Commit yet");
        acks.commit(open, Lsn(10)).unwrap();
        let empty = acks.begin();
        acks.commit(empty, Lsn(20)).unwrap();
        assert_eq!(
            acks.confirmable(),
            Some(Lsn(20)),
            "a transaction of no records"
        );
    }

    #[test]
    fn misuse_is_an_error_not_a_confirmation() {
        let mut acks = Acks::new();
        let t = acks.begin();
        assert_eq!(acks.acknowledged(t), Err(AckError::TooMany(t)));
        acks.commit(t, Lsn(5)).unwrap();
        assert_eq!(acks.sent(t), Err(AckError::Closed(t)));
        assert_eq!(acks.commit(t, Lsn(6)), Err(AckError::Closed(t)));
        assert_eq!(acks.confirmable(), Some(Lsn(5)));
        assert_eq!(acks.acknowledged(t), Err(AckError::Unknown(t)));
        assert_eq!(acks.outstanding(), 0);
    }

    proptest::proptest! {
        /// Whatever order the acknowledgements come in, the confirmed position never passes
        /// a transaction with a record still out.
        #[test]
        fn never_confirms_past_an_unacknowledged_record(
            sizes in proptest::collection::vec(0usize..4, 1..12),
            order in proptest::collection::vec(0usize..1000, 0..48),
        ) {
            let mut acks = Acks::new();
            let mut out: Vec<(TxTicket, usize)> = Vec::new();
            for (n, &size) in sizes.iter().enumerate() {
                let t = acks.begin();
                for _ in 0..size {
                    acks.sent(t).unwrap();
                    out.push((t, n));
                }
                acks.commit(t, Lsn((n as u64 + 1) * 10)).unwrap();
            }
            let mut confirmed = Lsn::ZERO;
            for pick in order {
                if out.is_empty() {
                    break;
                }
                let (t, _) = out.remove(pick % out.len());
                acks.acknowledged(t).unwrap();
                if let Some(lsn) = acks.confirmable() {
                    confirmed = lsn;
                }
                // Every transaction at or before `confirmed` has nothing out.
                let oldest_out = out.iter().map(|&(_, n)| n).min();
                if let Some(n) = oldest_out {
                    proptest::prop_assert!(confirmed < Lsn((n as u64 + 1) * 10));
                }
            }
        }
    }
}
