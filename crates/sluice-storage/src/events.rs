//! The storage consumer's recurring events, one type each (as Vector's `internal_events`):
//! [`emit`](BatchCommitted::emit) writes the event's log line and updates its metrics, so an
//! event's fields are listed in one place.
//!
//! The metric handles are those of [`PipelineMetrics`] (registered in `metrics.rs`, which
//! knows nothing of this module). Every line's `pipeline` field is the name those handles
//! are labelled with, so a line and its series always name the same pipeline. Log messages
//! and field names are read by tests and tools (`batch committed`, `pipeline failed`,
//! `pipeline stopped`, the `*_us` phases): change them only together with their readers.

use crate::error::{PipelineError, PipelineTotals};
use crate::metrics::PipelineMetrics;
use sluice_core::BatchReport;
use sluice_kafka::Record;
use std::collections::BTreeSet;
use std::time::Duration;

/// Where a batch's time went (reported by [`BatchCommitted`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct Phases {
    /// Waiting for and copying the records out of the client (a poll's time is shared by
    /// the batches its records went to).
    pub poll: Duration,
    /// Decoding and validating.
    pub decode: Duration,
    /// The writer waiting for this batch after finishing its previous one (a non-zero
    /// value means the database side was starved by the Kafka side).
    pub writer_wait: Duration,
    /// The database transaction, retries included.
    pub store: Duration,
    /// The synchronous offset commit.
    pub commit: Duration,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A batch's transaction committed and the reader tried to commit its offsets: one INFO
/// line with every counter and where the time went (`batch committed`, or `batch stored;
/// offset commit failed`), and the batch's records, dead letters and phase durations in
/// the metrics.
#[derive(Debug)]
pub struct BatchCommitted<'a> {
    /// The pipeline's metric handles (its name labels the line).
    pub metrics: &'a PipelineMetrics,
    /// The batch's records (their count and partitions).
    pub records: &'a [Record],
    /// The writer that stored it.
    pub writer: usize,
    /// What the batch did.
    pub report: &'a BatchReport,
    /// Each table's share of it (the tables of its one transaction).
    pub tables: &'a crate::by_table::ByTable,
    /// Where its time went.
    pub phases: &'a Phases,
    /// Whether its offsets were committed too (a failed commit is [`OffsetCommitFailed`];
    /// the batch is durable all the same).
    pub offsets_committed: bool,
}

impl BatchCommitted<'_> {
    /// Counts the batch and logs its line.
    pub fn emit(self) {
        let Self {
            metrics,
            records,
            writer,
            report,
            tables,
            phases,
            offsets_committed,
        } = self;
        metrics.batch(
            report,
            tables,
            records.len(),
            [phases.poll, phases.decode, phases.store, phases.commit],
        );
        let message = if offsets_committed {
            "batch committed"
        } else {
            "batch stored; offset commit failed"
        };
        let partitions: BTreeSet<i32> = records.iter().map(|r| r.partition).collect();
        tracing::info!(
            pipeline = %metrics.name(),
            records = report.records,
            inserted = report.write.inserted,
            updated = report.write.updated,
            skipped = report.write.skipped,
            dead_lettered = report.dead_lettered(),
            decode_errors = report.decode_errors,
            unknown_applications = report.unknown_applications,
            constraint_violations = report.constraint_violations,
            dead_letters_new = report.dead_letters_inserted,
            retries = report.retries,
            partitions = ?partitions,
            tables = ?tables.names(),
            writer,
            poll_us = micros(phases.poll),
            decode_us = micros(phases.decode),
            writer_wait_us = micros(phases.writer_wait),
            store_us = micros(phases.store),
            commit_us = micros(phases.commit),
            "{message}"
        );
    }
}

/// A transient database error: the writer drops its connection and stores the batch again
/// after a back-off. Counted by SQLSTATE; the error is what readiness reports meanwhile.
#[derive(Debug)]
pub struct BatchRetrying<'a> {
    /// The pipeline's metric handles (its name labels the line).
    pub metrics: &'a PipelineMetrics,
    /// Which writer of the pipeline retries.
    pub writer: usize,
    /// The error.
    pub error: &'a sqlx::Error,
    /// The retry about to be made: 1 for the batch's first.
    pub retry: u32,
    /// The back-off before it.
    pub delay: Duration,
}

impl BatchRetrying<'_> {
    /// Counts the retry, keeps its error for readiness, and logs a WARN line.
    pub fn emit(self) {
        let Self {
            metrics,
            writer,
            error,
            retry,
            delay,
        } = self;
        metrics.retrying(
            sluice_postgres::sqlstate(error).as_deref(),
            &error.to_string(),
        );
        tracing::warn!(pipeline = %metrics.name(), writer, %error, retry,
            delay_ms = millis(delay), "transient database error; retrying the batch");
    }
}

/// A batch's offset commit failed: its data is durable and is redelivered as a no-op
/// (too many in a row stop the pipeline, [`PipelineError::CommitFailures`]).
#[derive(Debug)]
pub struct OffsetCommitFailed<'a> {
    /// The pipeline's metric handles (its name labels the line).
    pub metrics: &'a PipelineMetrics,
    /// The client's error.
    pub error: &'a rdkafka::error::KafkaError,
    /// Failures in a row, this one included.
    pub consecutive: u32,
}

impl OffsetCommitFailed<'_> {
    /// Counts the failure and logs a WARN line.
    pub fn emit(self) {
        let Self {
            metrics,
            error,
            consecutive,
        } = self;
        metrics.commit_failed();
        tracing::warn!(pipeline = %metrics.name(), %error, consecutive,
            "offset commit failed; the data is durable and will be redelivered as a no-op");
    }
}

/// A pipeline stopped cleanly (its batches in flight committed): down in the metrics, and
/// its totals in an INFO line.
#[derive(Debug)]
pub struct PipelineStopped<'a> {
    /// The pipeline's metric handles (its name labels the line).
    pub metrics: &'a PipelineMetrics,
    /// What it did.
    pub totals: &'a PipelineTotals,
}

impl PipelineStopped<'_> {
    /// Marks the pipeline down and logs its totals.
    pub fn emit(self) {
        let Self { metrics, totals } = self;
        metrics.set_up(false);
        tracing::info!(pipeline = %metrics.name(), batches = totals.batches,
            records = totals.report.records, "pipeline stopped");
    }
}

/// A pipeline stopped with an error (which stops the process): down in the metrics, and
/// the error in an ERROR line.
#[derive(Debug)]
pub struct PipelineFailed<'a> {
    /// The pipeline's metric handles (its name labels the line).
    pub metrics: &'a PipelineMetrics,
    /// Why it stopped.
    pub error: &'a PipelineError,
}

impl PipelineFailed<'_> {
    /// Marks the pipeline down and logs why.
    pub fn emit(self) {
        let Self { metrics, error } = self;
        metrics.set_up(false);
        tracing::error!(pipeline = %metrics.name(), %error, "pipeline failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::StorageMetrics;
    use prometheus_client::registry::Registry;
    use std::collections::BTreeMap;

    /// The lines `emit` writes.
    fn lines(emit: impl FnOnce()) -> Vec<BTreeMap<String, String>> {
        sluice_testkit::log_lines(emit)
    }

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    fn record(partition: i32) -> Record {
        Record {
            payload: Some(b"x".to_vec()),
            ..Record::at("t", partition, 1)
        }
    }

    #[test]
    fn a_committed_batch_is_one_line_and_its_metrics() {
        let mut registry = Registry::default();
        let metrics = StorageMetrics::register(&mut registry, &["reviews"]);
        let p = metrics.pipeline("reviews", "unknown_application");
        let records = [record(2), record(0), record(2)];
        let report = BatchReport {
            records: 3,
            decode_errors: 1,
            retries: 1,
            ..BatchReport::default()
        };
        let phases = Phases {
            store: Duration::from_micros(1500),
            ..Phases::default()
        };
        let mut tables = crate::by_table::ByTable::default();
        tables.of(&std::sync::Arc::from("reviews")).write.inserted += 1;
        let emit = |offsets_committed| {
            lines(|| {
                BatchCommitted {
                    metrics: &p,
                    records: &records,
                    writer: 1,
                    report: &report,
                    tables: &tables,
                    phases: &phases,
                    offsets_committed,
                }
                .emit();
            })
        };
        let committed = emit(true);
        assert_eq!(committed.len(), 1);
        let line = &committed[0];
        for (field, value) in [
            ("level", "INFO"),
            ("message", "batch committed"),
            ("pipeline", "reviews"),
            ("records", "3"),
            ("decode_errors", "1"),
            ("dead_lettered", "1"),
            ("retries", "1"),
            ("partitions", "{0, 2}"),
            ("tables", "[\"reviews\"]"),
            ("writer", "1"),
            ("store_us", "1500"),
            ("poll_us", "0"),
            ("writer_wait_us", "0"),
        ] {
            assert_eq!(line.get(field).map(String::as_str), Some(value), "{line:?}");
        }
        let stored = emit(false);
        assert_eq!(stored[0]["message"], "batch stored; offset commit failed");
        let text = encode(&registry);
        for series in [
            "sluice_batch_records_count{pipeline=\"reviews\"} 2",
            "sluice_dead_letters_total{pipeline=\"reviews\",kind=\"decode_error\"} 2",
            "sluice_batch_duration_seconds_count{pipeline=\"reviews\",phase=\"store\"} 2",
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
    }

    #[test]
    fn a_retry_an_offset_commit_failure_and_a_failed_pipeline_each_log_and_count() {
        let mut registry = Registry::default();
        let metrics = StorageMetrics::register(&mut registry, &["reviews"]);
        let p = metrics.pipeline("reviews", "unknown_application");
        p.set_up(true);
        let db = sqlx::Error::Protocol("connection reset".into());
        let kafka = rdkafka::error::KafkaError::Canceled;
        let failed = PipelineError::ReaderPanicked;
        let written = lines(|| {
            BatchRetrying {
                metrics: &p,
                writer: 1,
                error: &db,
                retry: 2,
                delay: Duration::from_millis(250),
            }
            .emit();
            OffsetCommitFailed {
                metrics: &p,
                error: &kafka,
                consecutive: 3,
            }
            .emit();
            PipelineFailed {
                metrics: &p,
                error: &failed,
            }
            .emit();
        });
        let messages: Vec<&str> = written.iter().map(|l| l["message"].as_str()).collect();
        assert_eq!(
            messages,
            [
                "transient database error; retrying the batch",
                "offset commit failed; the data is durable and will be redelivered as a no-op",
                "pipeline failed",
            ]
        );
        let [retrying, commit, pipeline] = &written[..] else {
            unreachable!()
        };
        assert_eq!(
            (
                retrying["writer"].as_str(),
                retrying["retry"].as_str(),
                retrying["delay_ms"].as_str()
            ),
            ("1", "2", "250")
        );
        assert!(
            retrying["error"].contains("connection reset"),
            "{retrying:?}"
        );
        assert_eq!(commit["consecutive"], "3");
        assert_eq!(
            (pipeline["level"].as_str(), pipeline["pipeline"].as_str()),
            ("ERROR", "reviews")
        );
        assert_eq!(pipeline["error"], "the reader thread panicked");
        let text = encode(&registry);
        for series in [
            "sluice_db_retries_total{pipeline=\"reviews\",sqlstate=\"none\"} 1",
            "sluice_commit_failures_total{pipeline=\"reviews\"} 1",
            "sluice_pipeline_up{pipeline=\"reviews\"} 0",
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
    }

    #[test]
    fn a_stopped_pipeline_logs_its_totals_and_is_down() {
        let mut registry = Registry::default();
        let metrics = StorageMetrics::register(&mut registry, &["reviews"]);
        let p = metrics.pipeline("reviews", "unknown_application");
        p.set_up(true);
        let totals = PipelineTotals {
            batches: 4,
            report: BatchReport {
                records: 9,
                ..BatchReport::default()
            },
        };
        let written = lines(|| {
            PipelineStopped {
                metrics: &p,
                totals: &totals,
            }
            .emit();
        });
        let line = &written[0];
        assert_eq!(
            (
                line["message"].as_str(),
                line["batches"].as_str(),
                line["records"].as_str()
            ),
            ("pipeline stopped", "4", "9")
        );
        assert!(encode(&registry).contains("sluice_pipeline_up{pipeline=\"reviews\"} 0"));
    }
}
