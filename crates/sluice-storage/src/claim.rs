//! What a batch's claim found, partition by partition (docs/ARCHITECTURE.md#offsets): a pure
//! rule from the batch's records, where the partition's fetch continued from
//! ([`Origin`]), PostgreSQL's offset before this batch and what this writer committed.
//!
//! Invariant: nothing is applied twice and nothing is skipped. Records below PostgreSQL's
//! offset were applied (by another owner, or before a crash) and are left out; records
//! between PostgreSQL's offset and where the fetch continued from were never applied, so
//! the partition is read again from PostgreSQL's offset before any of its records is
//! written. Offsets are compared with where the fetch continued, never with the first
//! record's offset alone: a transactional producer's commit markers and compaction leave
//! offsets without records.

use crate::origins::Origin;
use sluice_kafka::Record;

/// One partition of a batch as its claim sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset of its first record in the batch.
    pub first: i64,
    /// The offset after its last record: what the claim raises PostgreSQL's offset to.
    pub next: i64,
    /// Where its fetch continued from before the first record (`None`: not known).
    pub origin: Option<Origin>,
    /// The Kafka timestamp of its last record, at `next - 1` (`None`: none).
    pub last_record_ms: Option<i64>,
}

/// The claims of a batch's partitions, in order of first appearance.
pub fn claims_of(records: &[Record], origin: impl Fn(&str, i32) -> Option<Origin>) -> Vec<Claim> {
    let mut out: Vec<Claim> = Vec::new();
    for r in records {
        match out
            .iter_mut()
            .find(|c| c.partition == r.partition && c.topic == r.topic)
        {
            Some(c) => {
                c.first = c.first.min(r.offset);
                if r.offset + 1 > c.next {
                    c.next = r.offset + 1;
                    c.last_record_ms = r.timestamp_ms;
                }
            }
            None => out.push(Claim {
                topic: r.topic.clone(),
                partition: r.partition,
                first: r.offset,
                next: r.offset + 1,
                origin: origin(&r.topic, r.partition),
                last_record_ms: r.timestamp_ms,
            }),
        }
    }
    out
}

/// What to do with one partition of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Write its records.
    Write,
    /// Records below this offset were applied before: leave them out, write the rest.
    Skip(i64),
    /// PostgreSQL's offset (this one) is behind where the fetch continued: PostgreSQL went
    /// back (`synchronous_commit = off`, a failover). Write none of its records; read the
    /// partition again from this offset.
    Behind(i64),
    /// Its first record is below where the fetch continued: the partition's log went back
    /// under the consumer (the topic was deleted and created again, and the client reset
    /// its position). PostgreSQL's offset belongs to the old log: discard it and write.
    LogWentBack,
    /// PostgreSQL has no offset (`None`) or one below what this writer committed, and where
    /// the fetch continued is not known: start the pipeline again from PostgreSQL's offsets.
    Lost {
        /// PostgreSQL's offset.
        postgres: Option<i64>,
        /// What this writer committed.
        committed: i64,
    },
}

/// The verdict on `claim`, PostgreSQL holding `stored` before this batch and this writer
/// having committed `committed`.
pub fn judge(claim: &Claim, stored: Option<i64>, committed: Option<i64>) -> Verdict {
    let applied_before = |s: Option<i64>| match s {
        Some(s) if claim.first < s => Verdict::Skip(s),
        _ => Verdict::Write,
    };
    match claim.origin {
        Some(Origin::At(from)) if claim.first < from => Verdict::LogWentBack,
        Some(Origin::At(from)) => match stored {
            // The row is gone where the partition was assigned at a stored offset or
            // continued after a batch: PostgreSQL lost it.
            None => Verdict::Lost {
                postgres: None,
                committed: from,
            },
            Some(s) if s < from => Verdict::Behind(s),
            s => applied_before(s),
        },
        // Assigned without a stored offset: whatever this writer committed before belongs
        // to an assignment that ended (e.g. of a topic deleted since).
        Some(Origin::Reset) => applied_before(stored),
        None => match committed {
            Some(mine) if stored.is_none_or(|s| s < mine) => Verdict::Lost {
                postgres: stored,
                committed: mine,
            },
            _ => applied_before(stored),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(first: i64, next: i64, origin: Option<Origin>) -> Claim {
        Claim {
            topic: "t".into(),
            partition: 0,
            first,
            next,
            origin,
            last_record_ms: None,
        }
    }

    #[test]
    fn a_batch_where_postgresql_is_writes_and_one_partly_applied_skips_the_part() {
        let c = claim(10, 20, Some(Origin::At(10)));
        assert_eq!(judge(&c, Some(10), Some(10)), Verdict::Write);
        // Another owner applied 10–14 (a rebalance with a batch in flight).
        assert_eq!(judge(&c, Some(15), Some(10)), Verdict::Skip(15));
        assert_eq!(judge(&c, Some(25), None), Verdict::Skip(25));
    }

    #[test]
    fn postgresql_behind_where_the_fetch_continued_is_a_rewind_not_a_write() {
        let c = claim(10, 20, Some(Origin::At(10)));
        assert_eq!(judge(&c, Some(5), None), Verdict::Behind(5));
        // Whatever this writer committed: the position is what counts.
        assert_eq!(judge(&c, Some(5), Some(10)), Verdict::Behind(5));
        assert_eq!(
            judge(&c, None, None),
            Verdict::Lost {
                postgres: None,
                committed: 10
            }
        );
    }

    #[test]
    fn offsets_without_records_are_no_gap() {
        // A commit marker at 19: the previous batch ended at 19, this one starts at 20.
        let c = claim(20, 25, Some(Origin::At(19)));
        assert_eq!(judge(&c, Some(19), Some(19)), Verdict::Write);
        // Compaction or retention removed 19–29.
        let c = claim(30, 31, Some(Origin::At(19)));
        assert_eq!(judge(&c, Some(19), None), Verdict::Write);
    }

    #[test]
    fn a_first_record_below_where_the_fetch_continued_is_a_new_log() {
        let c = claim(0, 10, Some(Origin::At(10)));
        assert_eq!(judge(&c, Some(10), Some(10)), Verdict::LogWentBack);
    }

    #[test]
    fn an_assignment_at_the_reset_position_ignores_what_was_committed_before() {
        let c = claim(0, 10, Some(Origin::Reset));
        assert_eq!(judge(&c, None, Some(100)), Verdict::Write);
        assert_eq!(judge(&c, Some(4), Some(100)), Verdict::Skip(4));
    }

    #[test]
    fn without_an_origin_the_committed_offsets_decide() {
        let c = claim(10, 20, None);
        assert_eq!(judge(&c, Some(10), Some(10)), Verdict::Write);
        assert_eq!(
            judge(&c, Some(8), Some(10)),
            Verdict::Lost {
                postgres: Some(8),
                committed: 10
            }
        );
        assert_eq!(judge(&c, Some(12), None), Verdict::Skip(12));
        assert_eq!(judge(&c, None, None), Verdict::Write);
    }
}
