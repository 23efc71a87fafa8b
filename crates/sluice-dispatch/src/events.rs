//! The dispatcher's recurring events, one type each (as Vector's `internal_events`):
//! `emit` writes the event's log line and updates its metrics and health, so an event's
//! fields are listed in one place.
//!
//! The metric handles are [`DispatchMetrics`]'s (registered in [`crate::metrics`], which
//! knows nothing of this module). Log messages and field names are read by tests and tools
//! (`outbox batch` with its counters, `stale dispatch recovery`): change them only together
//! with their readers.

use crate::error::DispatchError;
use crate::metrics::DispatchMetrics;
use crate::recovery::RecoveryReport;
use crate::report::{DispatchReport, DispatchTotals};
use std::time::{Duration, SystemTime};
use uuid::Uuid;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Logs `$message` at `$level` with the outcome counters and times that a batch's line and
/// the run's summary share (`$counts`: a [`DispatchReport`] or [`DispatchTotals`]), after
/// the fields of `$extra` (each followed by a comma).
macro_rules! outcome_line {
    ($level:ident, $counts:expr, $message:literal, $($extra:tt)*) => {{
        let counts = $counts;
        tracing::$level!(
            $($extra)*
            published = counts.published,
            retried = counts.retried,
            failed = counts.failed,
            held = counts.held,
            lost = counts.lost,
            claim_ms = millis(counts.claim_time),
            publish_ms = millis(counts.publish_time),
            mark_ms = millis(counts.mark_time),
            $message
        )
    }};
}

/// A claim's acknowledged records were marked PUBLISHED (the first statement of its
/// settle): the events published, their enqueue → acknowledgement latencies and the failed
/// publish attempts in the metrics, and a WARN line if the claim was lost for some of them.
/// The batch's own line follows when its settle ends ([`BatchSettled`]).
#[derive(Debug)]
pub(crate) struct BatchPublished<'a> {
    /// The dispatcher's metric handles.
    pub(crate) metrics: &'a DispatchMetrics,
    /// The claim's token.
    pub(crate) claim: Uuid,
    /// Rows marked PUBLISHED by this dispatcher.
    pub(crate) marked: usize,
    /// Acknowledged rows whose claim was lost before the mark (left to the new holder).
    pub(crate) lost: usize,
    /// (enqueue time, acknowledgement time) of each acknowledged record.
    pub(crate) acks: Vec<(SystemTime, SystemTime)>,
    /// The claim's failed publish attempts.
    pub(crate) failed_attempts: usize,
}

impl BatchPublished<'_> {
    /// Counts the batch's publishes, and warns of acknowledgements whose claim was lost.
    pub(crate) fn emit(self) {
        let Self {
            metrics,
            claim,
            marked,
            lost,
            acks,
            failed_attempts,
        } = self;
        metrics.batch(marked, acks, failed_attempts);
        if lost > 0 {
            tracing::warn!(%claim, lost,
                "acknowledged records whose claim was lost before the mark (left to the new holder)");
        }
    }
}

/// A batch's every outcome is recorded: one INFO line (`outbox batch`) with every counter
/// and where its time went, and the dispatcher ready again as far as batches go.
#[derive(Debug)]
pub(crate) struct BatchSettled<'a> {
    /// The dispatcher's metric handles and health.
    pub(crate) metrics: &'a DispatchMetrics,
    /// The dispatcher's id.
    pub(crate) dispatcher: &'a str,
    /// What the batch did.
    pub(crate) report: &'a DispatchReport,
}

impl BatchSettled<'_> {
    /// Clears the last batch error and logs the batch's line.
    pub(crate) fn emit(self) {
        let Self {
            metrics,
            dispatcher,
            report,
        } = self;
        metrics.batch_done(None);
        outcome_line!(info, report, "outbox batch",
            dispatcher = %dispatcher,
            claimed = report.claimed,
            repartitioned = report.repartitioned,
        );
    }
}

/// Recording a batch's outcomes failed (a database error): its rows stay DISPATCHING for
/// stale recovery, and the dispatcher is not ready until a batch runs again.
#[derive(Debug)]
pub(crate) struct SettleFailed<'a> {
    /// The dispatcher's metric handles and health.
    pub(crate) metrics: &'a DispatchMetrics,
    /// The dispatcher's id.
    pub(crate) dispatcher: &'a str,
    /// Why.
    pub(crate) error: &'a DispatchError,
}

impl SettleFailed<'_> {
    /// Logs a WARN line and keeps the error for readiness.
    pub(crate) fn emit(self) {
        let Self {
            metrics,
            dispatcher,
            error,
        } = self;
        tracing::warn!(dispatcher = %dispatcher, %error,
            "recording an outbox batch failed; its rows stay DISPATCHING for stale recovery");
        metrics.batch_done(Some(error.to_string()));
    }
}

/// A claim failed (a database error): the next one waits for the poll interval, and the
/// dispatcher is not ready until a batch runs again.
#[derive(Debug)]
pub(crate) struct ClaimFailed<'a> {
    /// The dispatcher's metric handles and health.
    pub(crate) metrics: &'a DispatchMetrics,
    /// Why.
    pub(crate) error: &'a DispatchError,
}

impl ClaimFailed<'_> {
    /// Logs a WARN line and keeps the error for readiness.
    pub(crate) fn emit(self) {
        let Self { metrics, error } = self;
        tracing::warn!(%error, "outbox claim failed; retrying after the poll interval");
        metrics.batch_done(Some(error.to_string()));
    }
}

/// A stale dispatch recovery round: its outcomes counted, the topics whose search failed
/// kept for readiness, and when it found stale rows one INFO line (`stale dispatch
/// recovery`).
#[derive(Debug)]
pub(crate) struct StaleRecovered<'a> {
    /// The dispatcher's metric handles.
    pub(crate) metrics: &'a DispatchMetrics,
    /// What the round did.
    pub(crate) report: &'a RecoveryReport,
}

impl StaleRecovered<'_> {
    /// Counts the round's outcomes and logs its line.
    pub(crate) fn emit(self) {
        let Self { metrics, report } = self;
        metrics.recovered(report.published, report.requeued, report.raced);
        metrics.recovery_done(&report.failed_topics, report.unsettled);
        if report.stale == 0 {
            return;
        }
        let failed: Vec<&str> = report
            .failed_topics
            .iter()
            .map(|(t, _)| t.as_str())
            .collect();
        tracing::info!(
            stale = report.stale,
            published = report.published,
            requeued = report.requeued,
            raced = report.raced,
            unsettled = report.unsettled,
            failed_topics = ?failed,
            scanned = report.scanned,
            "stale dispatch recovery"
        );
    }
}

/// The dispatcher stopped (its batches in flight settled): the run's totals in one INFO
/// line, with the same counters as each batch's.
#[derive(Debug)]
pub(crate) struct DispatcherStopped<'a> {
    /// What the run did.
    pub(crate) totals: &'a DispatchTotals,
}

impl DispatcherStopped<'_> {
    /// Logs the run's totals.
    pub(crate) fn emit(self) {
        let totals = self.totals;
        outcome_line!(
            info,
            totals,
            "outbox dispatcher stopped",
            batches = totals.batches,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;
    use std::collections::BTreeMap;

    /// The lines `emit` writes.
    fn lines(emit: impl FnOnce()) -> Vec<BTreeMap<String, String>> {
        sluice_testkit::log_lines(emit)
    }

    fn fields<'a>(line: &'a BTreeMap<String, String>, names: &[&str]) -> Vec<&'a str> {
        names
            .iter()
            .map(|n| line.get(*n).map_or("(missing)", String::as_str))
            .collect()
    }

    #[test]
    fn a_batch_line_and_the_stop_summary_share_their_counters() {
        let metrics = DispatchMetrics::default();
        metrics.batch_done(Some("earlier".into()));
        let report = DispatchReport {
            claimed: 7,
            published: 3,
            retried: 1,
            failed: 1,
            repartitioned: 1,
            held: 1,
            lost: 0,
            claim_time: Duration::from_millis(2),
            publish_time: Duration::from_millis(9),
            mark_time: Duration::from_millis(4),
        };
        let mut totals = DispatchTotals::default();
        totals.add(&report);
        totals.add(&report);
        let written = lines(|| {
            BatchSettled {
                metrics: &metrics,
                dispatcher: "d-1",
                report: &report,
            }
            .emit();
            DispatcherStopped { totals: &totals }.emit();
        });
        let [batch, stopped] = &written[..] else {
            panic!("{written:?}")
        };
        let shared = [
            "published",
            "retried",
            "failed",
            "held",
            "lost",
            "claim_ms",
            "publish_ms",
            "mark_ms",
        ];
        assert_eq!(
            fields(
                batch,
                &["message", "dispatcher", "claimed", "repartitioned"]
            ),
            ["outbox batch", "d-1", "7", "1"]
        );
        assert_eq!(
            fields(batch, &shared),
            ["3", "1", "1", "1", "0", "2", "9", "4"]
        );
        assert_eq!(
            fields(stopped, &["message", "batches"]),
            ["outbox dispatcher stopped", "2"]
        );
        assert_eq!(
            fields(stopped, &shared),
            ["6", "2", "2", "2", "0", "4", "18", "8"]
        );
        assert!(
            metrics
                .readiness()
                .unwrap_err()
                .iter()
                .all(|p| !p.contains("earlier")),
            "a settled batch clears the last batch error"
        );
    }

    #[test]
    fn published_records_failures_and_recovery_are_counted_with_their_lines() {
        let mut registry = Registry::default();
        let metrics = DispatchMetrics::register(&mut registry, Duration::from_secs(60));
        let t0 = std::time::UNIX_EPOCH + Duration::from_secs(1_000);
        let claim = Uuid::nil();
        let failed = DispatchError::Database(sqlx::Error::Protocol("gone".into()));
        let written = lines(|| {
            BatchPublished {
                metrics: &metrics,
                claim,
                marked: 2,
                lost: 0,
                acks: vec![(t0, t0 + Duration::from_millis(3)); 2],
                failed_attempts: 1,
            }
            .emit();
            BatchPublished {
                metrics: &metrics,
                claim,
                marked: 0,
                lost: 1,
                acks: vec![],
                failed_attempts: 0,
            }
            .emit();
            StaleRecovered {
                metrics: &metrics,
                report: &RecoveryReport {
                    stale: 3,
                    published: 1,
                    requeued: 2,
                    raced: 0,
                    ..RecoveryReport::default()
                },
            }
            .emit();
            ClaimFailed {
                metrics: &metrics,
                error: &failed,
            }
            .emit();
            SettleFailed {
                metrics: &metrics,
                dispatcher: "d-1",
                error: &failed,
            }
            .emit();
        });
        let messages: Vec<&str> = written.iter().map(|l| l["message"].as_str()).collect();
        assert_eq!(
            messages,
            [
                "acknowledged records whose claim was lost before the mark (left to the new holder)",
                "stale dispatch recovery",
                "outbox claim failed; retrying after the poll interval",
                "recording an outbox batch failed; its rows stay DISPATCHING for stale recovery",
            ]
        );
        assert_eq!(fields(&written[0], &["lost", "level"]), ["1", "WARN"]);
        assert_eq!(
            fields(&written[1], &["stale", "published", "requeued", "raced"]),
            ["3", "1", "2", "0"]
        );
        assert_eq!(written[3]["dispatcher"], "d-1");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for series in [
            "sluice_outbox_published_total 2",
            "sluice_outbox_publish_latency_seconds_count 2",
            "sluice_outbox_failures_total 1",
            "sluice_outbox_recovered_total{outcome=\"requeued\"} 2",
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
        assert!(
            metrics
                .readiness()
                .unwrap_err()
                .iter()
                .any(|p| p.starts_with("dispatcher: the last batch failed")),
            "a failed settle keeps the dispatcher not ready"
        );
    }
}
