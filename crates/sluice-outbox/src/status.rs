//! The outbox state machine (docs/ARCHITECTURE.md#outbox): the nine statuses of an outbox row and the only
//! edges between them.
//!
//! ```text
//! PREQUEUED ─► PENDING ─► DISPATCHING ─► PUBLISHED ─► UNDER_PROCESSING ─► SUCCESS
//!                 ▲         │  │  │                         ▲      └──────► PUSHED_FAILURE
//!                 └─────────┘  │  └─────────────────────────┘
//!             (publish failed) └──► FAILURE (attempt limit)
//!                 ▲                    │
//!                 └────────────────────┘ (operator re-open: `sluice outbox retry-failed`)
//!
//! CDC ─► UNDER_PROCESSING   (a row relayed by change data capture, never by a dispatcher)
//! ```
//!
//! Invariant: a status changes only along an edge of [`EDGES`]. Every status change goes
//! through [`transition`] here and, in the database, through one compare-and-set
//! (`UPDATE … WHERE status = ANY(allowed_sources(to))`); the `outbox_events` trigger
//! (`migrations/0005_outbox.sql`) rejects any other edge written by hand. The SQL copy of the
//! edge table is checked against [`EDGES`] by this crate's `migration_sync` tests (the newest
//! migration with an edge block, `migrations/0012_outbox_lean_status_moves.sql` today).
//!
//! FAILURE → PENDING is the one edge no automatic process takes: it is the operator's
//! re-open of an event that exhausted its attempts (`sluice outbox retry-failed`). The
//! dispatcher and the consumer treat FAILURE as terminal ([`OutboxStatus::is_terminal`]).
//!
//! CDC is the status of a row that change data capture relays (the Debezium PostgreSQL
//! connector with its Outbox Event Router, reading a publication of inserts in status CDC):
//! it is inserted as CDC, its record reaches Kafka when the inserting transaction commits, no
//! dispatcher ever claims it (a claim takes PENDING rows only), and a consumer that tracks
//! its processing moves it on as it would a PUBLISHED row. Retention deletes it after the
//! retention age like an untracked PUBLISHED row.
//!
//! Why DISPATCHING → UNDER_PROCESSING: the consumer may see the record before the publisher
//! has recorded the broker's acknowledgement, so processing may start from DISPATCHING. The
//! acknowledgement that arrives afterwards must not move the row back; see [`mark_published`].

use std::fmt;
use std::str::FromStr;

/// The status of an outbox row; [`OutboxStatus::as_str`] is the value stored in SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutboxStatus {
    /// Held back until released to PENDING (`release`).
    Prequeued,
    /// Waiting for a dispatcher; claimable once `available_at` has passed.
    Pending,
    /// Claimed by one dispatcher, which is publishing it.
    Dispatching,
    /// The broker acknowledged the record; its partition and offset are stored.
    Published,
    /// A consumer is processing the record.
    UnderProcessing,
    /// Terminal: the consumer processed the record.
    Success,
    /// Terminal: the consumer rejected the record.
    PushedFailure,
    /// Terminal for the dispatcher: publishing failed past the attempt limit. Only an
    /// operator re-opens it (FAILURE → PENDING).
    Failure,
    /// Relayed by change data capture when its insert commits; no dispatcher claims it.
    Cdc,
}

impl OutboxStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [OutboxStatus; 9] = [
        OutboxStatus::Prequeued,
        OutboxStatus::Pending,
        OutboxStatus::Dispatching,
        OutboxStatus::Published,
        OutboxStatus::UnderProcessing,
        OutboxStatus::Success,
        OutboxStatus::PushedFailure,
        OutboxStatus::Failure,
        OutboxStatus::Cdc,
    ];

    /// The statuses a new row may be inserted with.
    pub const INITIAL: [OutboxStatus; 3] = [
        OutboxStatus::Prequeued,
        OutboxStatus::Pending,
        OutboxStatus::Cdc,
    ];

    /// The value stored in the `status` column.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_outbox::OutboxStatus;
    ///
    /// assert_eq!(OutboxStatus::UnderProcessing.as_str(), "UNDER_PROCESSING");
    /// assert_eq!(OutboxStatus::Pending.to_string(), "PENDING"); // Display is the same
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Prequeued => "PREQUEUED",
            OutboxStatus::Pending => "PENDING",
            OutboxStatus::Dispatching => "DISPATCHING",
            OutboxStatus::Published => "PUBLISHED",
            OutboxStatus::UnderProcessing => "UNDER_PROCESSING",
            OutboxStatus::Success => "SUCCESS",
            OutboxStatus::PushedFailure => "PUSHED_FAILURE",
            OutboxStatus::Failure => "FAILURE",
            OutboxStatus::Cdc => "CDC",
        }
    }

    /// Parses a stored value (exact, upper case).
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_outbox::OutboxStatus;
    ///
    /// assert_eq!(OutboxStatus::parse("PUSHED_FAILURE"), Ok(OutboxStatus::PushedFailure));
    /// assert_eq!("CDC".parse::<OutboxStatus>(), Ok(OutboxStatus::Cdc)); // FromStr is the same
    /// assert!(OutboxStatus::parse("pending").is_err());
    /// ```
    pub fn parse(value: &str) -> Result<OutboxStatus, UnknownStatus> {
        OutboxStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == value)
            .ok_or_else(|| UnknownStatus(value.to_owned()))
    }

    /// Whether no automatic process moves a row out of this status (SUCCESS,
    /// PUSHED_FAILURE, FAILURE). FAILURE's only way out is [`OPERATOR_REOPEN`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_outbox::OutboxStatus;
    ///
    /// assert!(OutboxStatus::Success.is_terminal());
    /// assert!(OutboxStatus::Failure.is_terminal());
    /// assert!(!OutboxStatus::Published.is_terminal());
    /// ```
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            OutboxStatus::Success | OutboxStatus::PushedFailure | OutboxStatus::Failure
        )
    }

    /// The statuses this one may move to: the edge table, read by source.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_outbox::OutboxStatus::*;
    ///
    /// assert_eq!(Published.successors(), &[UnderProcessing]);
    /// assert_eq!(UnderProcessing.successors(), &[Success, PushedFailure]);
    /// assert!(Success.successors().is_empty());
    /// ```
    pub const fn successors(self) -> &'static [OutboxStatus] {
        use OutboxStatus::*;
        match self {
            Prequeued => &[Pending],
            Pending => &[Dispatching],
            Dispatching => &[Published, Pending, Failure, UnderProcessing],
            Published => &[UnderProcessing],
            UnderProcessing => &[Success, PushedFailure],
            Failure => &[Pending],
            Cdc => &[UnderProcessing],
            Success | PushedFailure => &[],
        }
    }
}

impl fmt::Display for OutboxStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OutboxStatus {
    type Err = UnknownStatus;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        OutboxStatus::parse(value)
    }
}

/// Every allowed edge `(from, to)`; the same list as [`OutboxStatus::successors`].
pub const EDGES: [(OutboxStatus, OutboxStatus); 11] = {
    use OutboxStatus::*;
    [
        (Prequeued, Pending),
        (Pending, Dispatching),
        (Dispatching, Published),
        (Dispatching, Pending),
        (Dispatching, Failure),
        (Dispatching, UnderProcessing),
        (Published, UnderProcessing),
        (UnderProcessing, Success),
        (UnderProcessing, PushedFailure),
        (Failure, Pending),
        (Cdc, UnderProcessing),
    ]
};

/// The operator's re-open of an event that exhausted its publish attempts: the only edge
/// out of a terminal status, taken by `sluice outbox retry-failed` and nothing else.
pub const OPERATOR_REOPEN: (OutboxStatus, OutboxStatus) =
    (OutboxStatus::Failure, OutboxStatus::Pending);

/// A string that is not one of the nine statuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown outbox status {0:?}")]
pub struct UnknownStatus(pub String);

/// A status change that is not an edge of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal outbox status transition {from} -> {to}")]
pub struct IllegalTransition {
    /// The current status.
    pub from: OutboxStatus,
    /// The requested status.
    pub to: OutboxStatus,
}

/// Whether `from → to` is an edge. Staying in the same status is not a transition.
///
/// # Examples
///
/// ```
/// use sluice_outbox::OutboxStatus::*;
/// use sluice_outbox::status::is_allowed;
///
/// assert!(is_allowed(Dispatching, UnderProcessing)); // the consumer was faster than the ack
/// assert!(!is_allowed(Success, Pending)); // terminal
/// assert!(!is_allowed(Pending, Pending)); // staying is not a transition
/// ```
pub fn is_allowed(from: OutboxStatus, to: OutboxStatus) -> bool {
    from.successors().contains(&to)
}

/// The one transition function: `to` when `from → to` is an edge, an error otherwise.
///
/// This decides only; [`crate::transition`] moves a stored row.
///
/// # Examples
///
/// ```
/// use sluice_outbox::OutboxStatus::*;
/// use sluice_outbox::status::{IllegalTransition, transition};
///
/// assert_eq!(transition(Published, UnderProcessing), Ok(UnderProcessing));
/// let refused = transition(Success, Pending);
/// assert_eq!(refused, Err(IllegalTransition { from: Success, to: Pending }));
/// assert_eq!(
///     refused.unwrap_err().to_string(),
///     "illegal outbox status transition SUCCESS -> PENDING"
/// );
/// ```
pub fn transition(from: OutboxStatus, to: OutboxStatus) -> Result<OutboxStatus, IllegalTransition> {
    if is_allowed(from, to) {
        Ok(to)
    } else {
        Err(IllegalTransition { from, to })
    }
}

/// The statuses a compare-and-set moving a row to `to` accepts
/// (`UPDATE … SET status = to WHERE status = ANY(allowed_sources(to))`).
///
/// Empty for PREQUEUED and CDC: a row is only ever inserted in those statuses. PENDING includes FAILURE
/// (the operator re-open): automatic requeues pass `[DISPATCHING]` explicitly.
///
/// # Examples
///
/// ```
/// use sluice_outbox::OutboxStatus::*;
/// use sluice_outbox::status::allowed_sources;
///
/// assert_eq!(allowed_sources(UnderProcessing), &[Dispatching, Published, Cdc]);
/// assert_eq!(allowed_sources(Success), &[UnderProcessing]);
/// assert!(allowed_sources(Cdc).is_empty()); // inserted only
/// ```
pub const fn allowed_sources(to: OutboxStatus) -> &'static [OutboxStatus] {
    use OutboxStatus::*;
    match to {
        Prequeued | Cdc => &[],
        Pending => &[Prequeued, Dispatching, Failure],
        Dispatching => &[Pending],
        Published => &[Dispatching],
        UnderProcessing => &[Dispatching, Published, Cdc],
        Success | PushedFailure => &[UnderProcessing],
        Failure => &[Dispatching],
    }
}

/// What `mark_published` does with a row in a given status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkPublished {
    /// DISPATCHING: move it to PUBLISHED and record the partition and offset.
    Move,
    /// PUBLISHED, UNDER_PROCESSING, SUCCESS or PUSHED_FAILURE: the record was already
    /// acknowledged or consumed; leave the row (and its recorded offset) as it is. Not an error.
    AlreadyPast,
    /// PREQUEUED, PENDING, FAILURE or CDC: the row was never claimed (CDC rows never are),
    /// was requeued, or gave up; an acknowledgement for it is a bug or a lost race that the
    /// caller must see.
    Illegal,
}

/// The rule of `mark_published` (docs/ARCHITECTURE.md#outbox): a compare-and-set from DISPATCHING only, which
/// accepts a row the consumer already moved on and never moves it back.
///
/// "Already past" is every status reachable from PUBLISHED, PUBLISHED included: a second
/// acknowledgement (stale-dispatch recovery found the record first) keeps the first offset.
///
/// This decides only; [`crate::mark_published`] records an acknowledgement on a stored row.
///
/// # Examples
///
/// ```
/// use sluice_outbox::OutboxStatus::*;
/// use sluice_outbox::status::{MarkPublished, mark_published};
///
/// assert_eq!(mark_published(Dispatching), MarkPublished::Move);
/// assert_eq!(mark_published(Success), MarkPublished::AlreadyPast); // the consumer was first
/// assert_eq!(mark_published(Pending), MarkPublished::Illegal); // requeued: a lost claim
/// ```
pub fn mark_published(current: OutboxStatus) -> MarkPublished {
    use OutboxStatus::*;
    match current {
        Dispatching => MarkPublished::Move,
        Published | UnderProcessing | Success | PushedFailure => MarkPublished::AlreadyPast,
        Prequeued | Pending | Failure | Cdc => MarkPublished::Illegal,
    }
}

#[cfg(test)]
mod tests {
    use super::OutboxStatus::*;
    use super::*;
    use std::collections::BTreeSet;

    /// The edge table written out as a matrix: row = from, column = to, in `ALL` order
    /// (PREQ, PEND, DISP, PUBL, UNDER, SUCC, PUSHF, FAIL, CDC).
    const MATRIX: [[u8; 9]; 9] = [
        [0, 1, 0, 0, 0, 0, 0, 0, 0], // PREQUEUED
        [0, 0, 1, 0, 0, 0, 0, 0, 0], // PENDING
        [0, 1, 0, 1, 1, 0, 0, 1, 0], // DISPATCHING
        [0, 0, 0, 0, 1, 0, 0, 0, 0], // PUBLISHED
        [0, 0, 0, 0, 0, 1, 1, 0, 0], // UNDER_PROCESSING
        [0, 0, 0, 0, 0, 0, 0, 0, 0], // SUCCESS
        [0, 0, 0, 0, 0, 0, 0, 0, 0], // PUSHED_FAILURE
        [0, 1, 0, 0, 0, 0, 0, 0, 0], // FAILURE (operator re-open)
        [0, 0, 0, 0, 1, 0, 0, 0, 0], // CDC
    ];

    #[test]
    fn every_pair_against_the_explicit_table() {
        let mut checked = 0;
        for (i, from) in OutboxStatus::ALL.into_iter().enumerate() {
            for (j, to) in OutboxStatus::ALL.into_iter().enumerate() {
                let expected = MATRIX[i][j] == 1;
                assert_eq!(is_allowed(from, to), expected, "{from} -> {to}");
                match transition(from, to) {
                    Ok(next) => {
                        assert!(expected, "{from} -> {to} accepted");
                        assert_eq!(next, to);
                    }
                    Err(error) => {
                        assert!(!expected, "{from} -> {to} rejected");
                        assert_eq!(error, IllegalTransition { from, to });
                    }
                }
                assert_eq!(
                    allowed_sources(to).contains(&from),
                    expected,
                    "allowed_sources({to}) and {from}"
                );
                assert_eq!(
                    EDGES.contains(&(from, to)),
                    expected,
                    "EDGES and {from} -> {to}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 81);
    }

    #[test]
    fn edges_list_has_no_duplicates_and_matches_successors() {
        let set: BTreeSet<_> = EDGES.into_iter().collect();
        assert_eq!(set.len(), EDGES.len());
        let from_successors: BTreeSet<_> = OutboxStatus::ALL
            .into_iter()
            .flat_map(|from| from.successors().iter().map(move |&to| (from, to)))
            .collect();
        assert_eq!(set, from_successors);
    }

    #[test]
    fn terminal_statuses() {
        let terminal: Vec<_> = OutboxStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(terminal, vec![Success, PushedFailure, Failure]);
        // The only edge out of a terminal status is the operator's re-open.
        let out_of_terminal: Vec<_> = EDGES
            .into_iter()
            .filter(|(from, _)| from.is_terminal())
            .collect();
        assert_eq!(out_of_terminal, vec![OPERATOR_REOPEN]);
    }

    #[test]
    fn sql_values_round_trip() {
        let expected = [
            "PREQUEUED",
            "PENDING",
            "DISPATCHING",
            "PUBLISHED",
            "UNDER_PROCESSING",
            "SUCCESS",
            "PUSHED_FAILURE",
            "FAILURE",
            "CDC",
        ];
        for (status, text) in OutboxStatus::ALL.into_iter().zip(expected) {
            assert_eq!(status.as_str(), text);
            assert_eq!(status.to_string(), text);
            assert_eq!(OutboxStatus::parse(text), Ok(status));
            assert_eq!(text.parse::<OutboxStatus>(), Ok(status));
            assert!(text.len() <= 20, "fits VARCHAR(20)");
        }
        assert_eq!(
            OutboxStatus::parse("pending"),
            Err(UnknownStatus("pending".into()))
        );
        assert!(OutboxStatus::parse("").is_err());
    }

    #[test]
    fn mark_published_table() {
        let cases = [
            (Prequeued, MarkPublished::Illegal),
            (Pending, MarkPublished::Illegal),
            (Dispatching, MarkPublished::Move),
            (Published, MarkPublished::AlreadyPast),
            (UnderProcessing, MarkPublished::AlreadyPast),
            (Success, MarkPublished::AlreadyPast),
            (PushedFailure, MarkPublished::AlreadyPast),
            (Failure, MarkPublished::Illegal),
            (Cdc, MarkPublished::Illegal),
        ];
        for (status, expected) in cases {
            assert_eq!(mark_published(status), expected, "{status}");
        }
    }

    /// `Move` is exactly the compare-and-set's sources, and `AlreadyPast` is exactly what
    /// the edges reach from PUBLISHED (PUBLISHED included), so the rule cannot drift from
    /// the edge table.
    #[test]
    fn mark_published_follows_the_edges() {
        let mut past = BTreeSet::from([Published]);
        loop {
            let next: BTreeSet<_> = past
                .iter()
                .flat_map(|s| s.successors().iter().copied())
                .chain(past.iter().copied())
                .collect();
            if next == past {
                break;
            }
            past = next;
        }
        for status in OutboxStatus::ALL {
            let expected = if allowed_sources(Published).contains(&status) {
                MarkPublished::Move
            } else if past.contains(&status) {
                MarkPublished::AlreadyPast
            } else {
                MarkPublished::Illegal
            };
            assert_eq!(mark_published(status), expected, "{status}");
        }
    }

    #[test]
    fn every_status_but_the_inserted_only_ones_has_a_way_in() {
        assert!(allowed_sources(Prequeued).is_empty());
        assert!(allowed_sources(Cdc).is_empty());
        for status in OutboxStatus::ALL {
            if !OutboxStatus::INITIAL.contains(&status) {
                assert!(!allowed_sources(status).is_empty(), "{status} is reachable");
            }
        }
    }

    #[test]
    fn errors_name_both_statuses() {
        let error = transition(Success, Pending).unwrap_err();
        assert_eq!(
            error.to_string(),
            "illegal outbox status transition SUCCESS -> PENDING"
        );
    }
}
