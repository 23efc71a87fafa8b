//! The storage consumer's Prometheus metrics and readiness state.
//!
//! One [`StorageMetrics`] is made by the binary, registered in its registry, and handed to
//! the supervisor; each pipeline takes its own [`PipelineMetrics`], whose label sets are
//! resolved once at start, so an update on the hot path is an atomic add (once per batch,
//! never per record) and no lock is taken. Metric names are a contract: dashboards and
//! alert rules in `deploy/` depend on them. The recurring events that update them (a batch
//! committed, a retry, a pipeline stopping) are typed in `events.rs`, which writes each
//! one's log line with its metrics.

use crate::by_table::ByTable;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};
use sluice_core::BatchReport;
use sluice_core::clock::unix_ms;
use sluice_core::dead_letter::DeadLetterKind;
use sluice_kafka::rebalance::RebalanceCounts;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A heartbeat older than this makes a pipeline not ready.
pub const READY_MAX_HEARTBEAT_AGE: Duration = Duration::from_secs(10);

/// `{pipeline}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PipelineLabels {
    /// The pipeline's name.
    pub pipeline: String,
}

/// `{pipeline,outcome}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// The pipeline's name.
    pub pipeline: String,
    /// The table (empty: records no table was chosen for — skipped or dead-lettered first).
    pub table: String,
    /// `inserted|updated|deleted|skipped|dead_lettered`.
    pub outcome: String,
}

/// `{pipeline,kind}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The pipeline's name.
    pub pipeline: String,
    /// The dead letter's error kind.
    pub kind: String,
}

/// `{pipeline,phase}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// The pipeline's name.
    pub pipeline: String,
    /// `poll|decode|store|commit`.
    pub phase: String,
}

/// `{pipeline,topic,partition}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabels {
    /// The pipeline's name.
    pub pipeline: String,
    /// The topic (a pipeline may read several).
    pub topic: String,
    /// The partition number.
    pub partition: String,
}

/// `{pipeline,sqlstate}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SqlstateLabels {
    /// The pipeline's name.
    pub pipeline: String,
    /// The SQLSTATE, or `none` for an error without one (connection refused, TLS).
    pub sqlstate: String,
}

/// `{pipeline,event}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RebalanceLabels {
    /// The pipeline's name.
    pub pipeline: String,
    /// `assign|revoke|error`.
    pub event: String,
}

fn duration_histogram() -> Histogram {
    // 100 µs … ~52 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

fn records_histogram() -> Histogram {
    // 1 … 4096 records.
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

/// `metric`, registered in `registry` as `name` with `help` (and `unit`).
fn registered<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    metric: M,
) -> M {
    match unit {
        Some(unit) => registry.register_with_unit(name, help, unit, metric.clone()),
        None => registry.register(name, help, metric.clone()),
    }
    metric
}

/// A readiness entry for each of `pipelines` (by name), each in its default state.
fn health_of<N: AsRef<str>>(pipelines: &[N]) -> Arc<BTreeMap<String, Arc<PipelineHealth>>> {
    Arc::new(
        pipelines
            .iter()
            .map(|name| {
                (
                    name.as_ref().to_owned(),
                    Arc::new(PipelineHealth::default()),
                )
            })
            .collect(),
    )
}

/// The families of every storage metric, and each pipeline's readiness state.
#[derive(Debug, Clone)]
pub struct StorageMetrics {
    records: Family<OutcomeLabels, Counter>,
    dead_letters: Family<KindLabels, Counter>,
    batch_duration: Family<PhaseLabels, Histogram, fn() -> Histogram>,
    batch_records: Family<PipelineLabels, Histogram, fn() -> Histogram>,
    consumer_lag: Family<PartitionLabels, Gauge>,
    consumer_lag_seconds: Family<PipelineLabels, Gauge<f64, AtomicU64>>,
    db_retries: Family<SqlstateLabels, Counter>,
    commit_failures: Family<PipelineLabels, Counter>,
    rebalances: Family<RebalanceLabels, Counter>,
    pipeline_up: Family<PipelineLabels, Gauge>,
    health: Arc<BTreeMap<String, Arc<PipelineHealth>>>,
}

impl StorageMetrics {
    /// Registers every storage metric in `registry`, with a readiness entry for each of
    /// `pipelines` (the names of the configured ones).
    pub fn register<N: AsRef<str>>(registry: &mut Registry, pipelines: &[N]) -> Self {
        // Each metric once: its family, name, help and unit, registered in this order.
        Self {
            records: registered(
                registry,
                "sluice_records",
                "Records handled, by outcome (inserted, updated, skipped, dead_lettered)",
                None,
                Family::default(),
            ),
            dead_letters: registered(
                registry,
                "sluice_dead_letters",
                "Records dead-lettered, by error kind",
                None,
                Family::default(),
            ),
            batch_duration: registered(
                registry,
                "sluice_batch_duration",
                "Time a batch spent in each phase (poll, decode, store, commit)",
                Some(Unit::Seconds),
                Family::new_with_constructor(duration_histogram),
            ),
            batch_records: registered(
                registry,
                "sluice_batch_records",
                "Records per committed batch",
                None,
                Family::new_with_constructor(records_histogram),
            ),
            consumer_lag: registered(
                registry,
                "sluice_consumer_lag",
                "Records between the consumer's position and the partition's end, per assigned partition",
                None,
                Family::default(),
            ),
            consumer_lag_seconds: registered(
                registry,
                "sluice_consumer_lag",
                "Estimated age of the oldest unconsumed record: now minus the Kafka timestamp of the last committed record while lag > 0, else 0",
                Some(Unit::Seconds),
                Family::default(),
            ),
            db_retries: registered(
                registry,
                "sluice_db_retries",
                "Batches retried after a transient database error, by SQLSTATE",
                None,
                Family::default(),
            ),
            commit_failures: registered(
                registry,
                "sluice_commit_failures",
                "Offset commits that failed (the data is durable; the batch is redelivered as a no-op)",
                None,
                Family::default(),
            ),
            rebalances: registered(
                registry,
                "sluice_rebalances",
                "Consumer group rebalance events seen by the pipeline's consumer (assign, revoke, error)",
                None,
                Family::default(),
            ),
            pipeline_up: registered(
                registry,
                "sluice_pipeline_up",
                "1 while the pipeline runs, 0 once it stopped",
                None,
                Family::default(),
            ),
            health: health_of(pipelines),
        }
    }

    /// The handles of one pipeline, label sets resolved once. Unknown references (package
    /// names, lookup keys) count under `unresolved_kind` (a sink's first lookup's kind).
    pub fn pipeline(&self, name: &str, unresolved_kind: &str) -> PipelineMetrics {
        let name = name.to_owned();
        let phase = |phase: &str| {
            self.batch_duration.get_or_create_owned(&PhaseLabels {
                pipeline: name.clone(),
                phase: phase.to_owned(),
            })
        };
        let labels = PipelineLabels {
            pipeline: name.clone(),
        };
        PipelineMetrics {
            kinds: DeadLetterKind::ALL.map(|kind| {
                let kind = match kind {
                    DeadLetterKind::UnknownApplication => unresolved_kind,
                    other => other.as_str(),
                };
                self.dead_letters.get_or_create_owned(&KindLabels {
                    pipeline: name.clone(),
                    kind: kind.to_owned(),
                })
            }),
            poll: phase("poll"),
            decode: phase("decode"),
            store: phase("store"),
            commit: phase("commit"),
            batch_records: self.batch_records.get_or_create_owned(&labels),
            lag_seconds: self.consumer_lag_seconds.get_or_create_owned(&labels),
            commit_failures: self.commit_failures.get_or_create_owned(&labels),
            rebalances: RebalanceCounts::EVENTS.map(|event| {
                self.rebalances.get_or_create_owned(&RebalanceLabels {
                    pipeline: name.clone(),
                    event: event.to_owned(),
                })
            }),
            up: self.pipeline_up.get_or_create_owned(&labels),
            health: self.health.get(&name).cloned().unwrap_or_default(),
            families: self.clone(),
            name,
        }
    }

    /// Why the process is not ready (one line per pipeline), or `Ok` when every pipeline
    /// has its assignment, a fresh heartbeat and no database retry in progress.
    pub fn readiness(&self) -> Result<(), Vec<String>> {
        let now = unix_ms();
        let problems: Vec<String> = self
            .health
            .iter()
            .filter_map(|(kind, h)| h.problem(now).map(|p| format!("{kind}: {p}")))
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

/// What `/health/ready` needs to know about one pipeline; written by the pipeline's own
/// threads, read by the HTTP server.
#[derive(Debug, Default)]
pub struct PipelineHealth {
    running: AtomicBool,
    assigned: AtomicBool,
    last_beat_ms: AtomicU64,
    /// Writers of the pipeline retrying a batch now.
    retrying: AtomicU64,
    /// The error being retried (written once per retry, never on the hot path).
    retry_reason: Mutex<String>,
}

impl PipelineHealth {
    fn problem(&self, now_ms: u64) -> Option<String> {
        if !self.running.load(Ordering::Relaxed) {
            return Some("not running".into());
        }
        if self.retrying.load(Ordering::Relaxed) > 0 {
            let reason = self
                .retry_reason
                .lock()
                .map(|r| r.clone())
                .unwrap_or_default();
            return Some(format!("retrying {reason}"));
        }
        if !self.assigned.load(Ordering::Relaxed) {
            return Some("no partitions assigned".into());
        }
        let beat = self.last_beat_ms.load(Ordering::Relaxed);
        let age = Duration::from_millis(now_ms.saturating_sub(beat));
        if beat == 0 || age > READY_MAX_HEARTBEAT_AGE {
            return Some(format!("heartbeat is {} s old", age.as_secs()));
        }
        None
    }
}

/// One pipeline's metric handles: every update is an atomic operation.
#[derive(Debug, Clone)]
pub struct PipelineMetrics {
    name: String,
    /// Dead letters by kind, in [`DeadLetterKind::ALL`] order (unknown references under the
    /// pipeline's own kind).
    kinds: [Counter; 3],
    poll: Histogram,
    decode: Histogram,
    store: Histogram,
    commit: Histogram,
    batch_records: Histogram,
    lag_seconds: Gauge<f64, AtomicU64>,
    commit_failures: Counter,
    /// Rebalance events, in [`RebalanceCounts::EVENTS`] order.
    rebalances: [Counter; 3],
    up: Gauge,
    health: Arc<PipelineHealth>,
    families: StorageMetrics,
}

impl PipelineMetrics {
    /// The pipeline's name, as its series are labelled.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pipeline started (`true`) or stopped (`false`).
    pub fn set_up(&self, up: bool) {
        self.up.set(i64::from(up));
        self.health.running.store(up, Ordering::Relaxed);
    }

    /// The pipeline's heartbeat was touched.
    pub fn beat(&self) {
        self.health.last_beat_ms.store(unix_ms(), Ordering::Relaxed);
    }

    /// Whether the consumer holds at least one partition.
    pub fn set_assigned(&self, assigned: bool) {
        self.health.assigned.store(assigned, Ordering::Relaxed);
    }

    /// A transient database error: the batch is retried after a back-off.
    pub fn retrying(&self, sqlstate: Option<&str>, error: &str) {
        self.families
            .db_retries
            .get_or_create(&SqlstateLabels {
                pipeline: self.name.clone(),
                sqlstate: sqlstate.unwrap_or("none").to_owned(),
            })
            .inc();
        if let Ok(mut reason) = self.health.retry_reason.lock() {
            *reason = format!("the database: {error}");
        }
    }

    /// A writer's batch waits for the schema registry: readiness says why (no database
    /// retry is counted).
    pub fn waiting_for_registry(&self, error: &str) {
        if let Ok(mut reason) = self.health.retry_reason.lock() {
            *reason = format!("the schema registry: {error}");
        }
    }

    /// A writer starts retrying a batch (call once, before its first [`Self::retrying`]).
    pub fn retries_begin(&self) {
        self.health.retrying.fetch_add(1, Ordering::Relaxed);
    }

    /// That writer's retries are over (the batch stored, or the pipeline stopped); once per
    /// [`Self::retries_begin`].
    pub fn retries_over(&self) {
        let _ = self
            .health
            .retrying
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// A committed batch (its transaction; the offset commit is counted separately).
    pub fn batch(
        &self,
        report: &BatchReport,
        tables: &ByTable,
        records: usize,
        phases: [Duration; 4],
    ) {
        let rest = tables.rest(report);
        for share in tables.tables().iter().chain(std::iter::once(&rest)) {
            let counts = [
                ("inserted", share.write.inserted),
                ("updated", share.write.updated),
                ("deleted", share.write.deleted),
                ("skipped", share.write.skipped),
                ("dead_lettered", share.dead_lettered),
            ];
            for (outcome, count) in counts {
                // A table's series exist once it had one; the rest's only when it has one.
                if count == 0 && share.table.is_empty() {
                    continue;
                }
                self.families
                    .records
                    .get_or_create(&OutcomeLabels {
                        pipeline: self.name.clone(),
                        table: share.table.to_string(),
                        outcome: outcome.to_owned(),
                    })
                    .inc_by(count);
            }
        }
        let [decode_errors, unknown, violations] = &self.kinds;
        // The decoding's dead letters of a sink of many tables that name no table or no
        // route count under their own kind, not as decode errors.
        let mut other_kinds = 0;
        for (kind, count) in tables.decode_kinds() {
            other_kinds += count;
            self.families
                .dead_letters
                .get_or_create(&KindLabels {
                    pipeline: self.name.clone(),
                    kind: (*kind).to_owned(),
                })
                .inc_by(*count);
        }
        decode_errors.inc_by(report.decode_errors.saturating_sub(other_kinds));
        unknown.inc_by(report.unknown_applications);
        violations.inc_by(report.constraint_violations);
        self.batch_records.observe(records as f64);
        let [poll, decode, store, commit] = phases;
        self.poll.observe(poll.as_secs_f64());
        self.decode.observe(decode.as_secs_f64());
        self.store.observe(store.as_secs_f64());
        self.commit.observe(commit.as_secs_f64());
    }

    /// Exports the consumer's rebalance counts (`counts`, in [`RebalanceCounts::EVENTS`]
    /// order) beyond those already exported (`seen`, updated). A consumer built again
    /// starts from zero: a count below `seen` is all new.
    pub fn rebalanced(&self, counts: [u64; 3], seen: &mut [u64; 3]) {
        for ((counter, now), before) in self.rebalances.iter().zip(counts).zip(seen.iter_mut()) {
            let new = if now >= *before { now - *before } else { now };
            counter.inc_by(new);
            *before = now;
        }
    }

    /// An offset commit failed.
    pub fn commit_failed(&self) {
        self.commit_failures.inc();
    }

    /// The lag of the assigned partitions (the others' series are removed) and the
    /// estimated age of the oldest unconsumed record.
    pub fn set_lag(
        &self,
        partitions: &[(String, i32, i64)],
        previous: &[(String, i32)],
        lag_seconds: f64,
    ) {
        for (topic, p) in previous {
            if !partitions.iter().any(|(t, q, _)| t == topic && q == p) {
                self.families
                    .consumer_lag
                    .remove(&self.partition(topic, *p));
            }
        }
        for (topic, p, lag) in partitions {
            self.families
                .consumer_lag
                .get_or_create(&self.partition(topic, *p))
                .set(*lag);
        }
        self.lag_seconds.set(lag_seconds);
    }

    fn partition(&self, topic: &str, partition: i32) -> PartitionLabels {
        PartitionLabels {
            pipeline: self.name.clone(),
            topic: topic.to_owned(),
            partition: partition.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipeline_is_retrying_while_any_of_its_writers_is() {
        let mut registry = Registry::default();
        let metrics = StorageMetrics::register(&mut registry, &["reviews"]);
        let p = metrics.pipeline("reviews", "unknown_application");
        p.set_up(true);
        p.set_assigned(true);
        p.beat();
        p.retries_begin();
        p.retries_begin();
        p.retries_over();
        assert!(
            metrics.readiness().is_err(),
            "the other writer still retries"
        );
        p.retries_over();
        assert_eq!(metrics.readiness(), Ok(()));
    }

    #[test]
    fn names_follow_the_contract() {
        let mut registry = Registry::default();
        let metrics = StorageMetrics::register(&mut registry, &["reviews"]);
        let p = metrics.pipeline("reviews", "unknown_application");
        p.set_up(true);
        p.retries_begin();
        p.retrying(Some("57P01"), "terminating connection");
        p.commit_failed();
        p.set_lag(&[("crawl.reviews".into(), 0, 5)], &[], 1.5);
        let mut seen = [0; 3];
        p.rebalanced([2, 1, 0], &mut seen);
        p.rebalanced([3, 1, 0], &mut seen);
        // A rebuilt consumer counts from zero again.
        p.rebalanced([1, 0, 0], &mut seen);
        let report = BatchReport {
            records: 3,
            decode_errors: 2,
            write: sluice_core::WriteOutcome {
                inserted: 1,
                ..Default::default()
            },
            ..BatchReport::default()
        };
        // One dead letter named its table, the other no table.
        let mut tables = ByTable::default();
        let table: std::sync::Arc<str> = std::sync::Arc::from("reviews");
        tables.of(&table).write.inserted += 1;
        tables.of(&table).dead_lettered += 1;
        p.batch(&report, &tables, 3, [Duration::ZERO; 4]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "sluice_records_total{pipeline=\"reviews\",table=\"reviews\",outcome=\"inserted\"} 1",
            "sluice_records_total{pipeline=\"reviews\",table=\"\",outcome=\"dead_lettered\"} 1",
            "sluice_records_total{pipeline=\"reviews\",table=\"reviews\",outcome=\"dead_lettered\"} 1",
            "sluice_dead_letters_total{pipeline=\"reviews\",kind=\"decode_error\"} 2",
            "sluice_batch_duration_seconds_bucket{",
            "sluice_batch_records_count{pipeline=\"reviews\"} 1",
            "sluice_consumer_lag{pipeline=\"reviews\",topic=\"crawl.reviews\",partition=\"0\"} 5",
            "sluice_consumer_lag_seconds{pipeline=\"reviews\"} 1.5",
            "sluice_db_retries_total{pipeline=\"reviews\",sqlstate=\"57P01\"} 1",
            "sluice_commit_failures_total{pipeline=\"reviews\"} 1",
            "sluice_pipeline_up{pipeline=\"reviews\"} 1",
            "sluice_rebalances_total{pipeline=\"reviews\",event=\"assign\"} 4",
            "sluice_rebalances_total{pipeline=\"reviews\",event=\"revoke\"} 1",
            "sluice_rebalances_total{pipeline=\"reviews\",event=\"error\"} 0",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
        let not_ready = metrics.readiness().unwrap_err();
        assert!(
            not_ready[0].contains("reviews: retrying the database"),
            "{not_ready:?}"
        );
        p.retries_over();
        p.retries_over(); // one too many is harmless
        p.set_assigned(true);
        p.beat();
        assert_eq!(metrics.readiness(), Ok(()));
    }
}
