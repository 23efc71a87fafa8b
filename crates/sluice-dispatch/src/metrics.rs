//! The dispatcher's Prometheus metrics and its readiness and liveness.
//!
//! Counters and the latency histogram are updated by the dispatch loop once per batch; the
//! table-wide gauges (`sluice_outbox_events{status}`, the oldest pending age) and the
//! reachability of the database and the broker are refreshed by [`crate::probe`] on its own
//! timer and connection, so a scrape never queries the database. Metric names are a
//! contract: the alert rules and the dashboard in `deploy/` depend on them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use sluice_core::clock::unix_ms;
use sluice_outbox::status::OutboxStatus;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// `{status}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

/// `{outcome}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// A probed dependency: not checked yet, reachable, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reach {
    Unknown,
    Ok,
    Failing(String),
}

#[derive(Debug)]
struct Health {
    database: Mutex<Reach>,
    broker: Mutex<Reach>,
    /// The last batch's error, cleared by the next batch that runs.
    batch_error: Mutex<Option<String>>,
    /// When the dispatch loop last went round (ms since the epoch; 0 = not started).
    last_tick_ms: AtomicU64,
    /// The longest a healthy loop goes without a round.
    live_within: Duration,
    /// Per topic whose stale-dispatch search failed: in how many rounds in a row, and why.
    recovery_failing: Mutex<BTreeMap<String, (u32, String)>>,
}

/// Rounds in a row a topic's stale-dispatch search fails before the dispatcher is not ready.
pub const RECOVERY_STUCK_ROUNDS: u32 = 3;

/// The dispatcher's metric handles and health state; cheap to clone.
#[derive(Debug, Clone)]
pub struct DispatchMetrics {
    events: Family<StatusLabels, Gauge>,
    oldest_pending: Gauge<f64, AtomicU64>,
    published: Counter,
    latency: Histogram,
    failures: Counter,
    recovered: [Counter; 3],
    unsettled: Gauge,
    health: Arc<Health>,
}

impl Default for DispatchMetrics {
    /// Handles that no registry exports (a dispatcher without an endpoint).
    fn default() -> Self {
        Self::unregistered(Duration::from_secs(120))
    }
}

fn latency_histogram() -> Histogram {
    // 1 ms … ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl DispatchMetrics {
    /// The recovery outcomes, in the order of the `recovered` counters.
    pub const RECOVERY_OUTCOMES: [&'static str; 3] = ["published", "requeued", "raced"];

    fn unregistered(live_within: Duration) -> Self {
        let recovered = Family::<OutcomeLabels, Counter>::default();
        let events = Family::<StatusLabels, Gauge>::default();
        for status in OutboxStatus::ALL {
            // Every status is exported from the start, zero included.
            drop(events.get_or_create(&StatusLabels {
                status: status.as_str().to_owned(),
            }));
        }
        Self {
            events,
            oldest_pending: Gauge::default(),
            published: Counter::default(),
            latency: latency_histogram(),
            failures: Counter::default(),
            unsettled: Gauge::default(),
            recovered: Self::RECOVERY_OUTCOMES.map(|outcome| {
                recovered.get_or_create_owned(&OutcomeLabels {
                    outcome: outcome.to_owned(),
                })
            }),
            health: Arc::new(Health {
                database: Mutex::new(Reach::Unknown),
                broker: Mutex::new(Reach::Unknown),
                batch_error: Mutex::new(None),
                last_tick_ms: AtomicU64::new(0),
                live_within,
                recovery_failing: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// Registers every outbox metric in `registry`. `live_within` is the longest a healthy
    /// dispatch loop goes without a round (a batch waits at most for its delivery timeout).
    pub fn register(registry: &mut Registry, live_within: Duration) -> Self {
        let recovered = Family::<OutcomeLabels, Counter>::default();
        let mut metrics = Self::unregistered(live_within);
        metrics.recovered = Self::RECOVERY_OUTCOMES.map(|outcome| {
            recovered.get_or_create_owned(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
        });
        registry.register(
            "sluice_outbox_events",
            "Outbox rows per status (refreshed every few seconds by the dispatcher's probe)",
            metrics.events.clone(),
        );
        registry.register_with_unit(
            "sluice_outbox_oldest_pending_age",
            "Seconds since the oldest due PENDING row became due; 0 when none is due",
            Unit::Seconds,
            metrics.oldest_pending.clone(),
        );
        registry.register(
            "sluice_outbox_published",
            "Events this dispatcher published and marked PUBLISHED",
            metrics.published.clone(),
        );
        registry.register_with_unit(
            "sluice_outbox_publish_latency",
            "From the enqueuing transaction (its start) to the broker's acknowledgement",
            Unit::Seconds,
            metrics.latency.clone(),
        );
        registry.register(
            "sluice_outbox_failures",
            "Failed publish attempts (requeued with back-off, or moved to FAILURE at the limit)",
            metrics.failures.clone(),
        );
        registry.register(
            "sluice_outbox_recovered",
            "Stale DISPATCHING rows settled by recovery: found in Kafka (published), requeued, or moved by someone else (raced)",
            recovered,
        );
        registry.register(
            "sluice_outbox_recovery_unsettled",
            "Stale DISPATCHING rows the last recovery round left because their topic could not be searched",
            metrics.unsettled.clone(),
        );
        metrics
    }

    /// A batch settled: `published` rows marked, `acks` the (enqueue time, ack time) of
    /// each acknowledged record, `failures` failed publish attempts.
    pub fn batch(
        &self,
        published: usize,
        acks: impl IntoIterator<Item = (SystemTime, SystemTime)>,
        failures: usize,
    ) {
        self.published.inc_by(published as u64);
        self.failures.inc_by(failures as u64);
        for (enqueued, acked) in acks {
            let latency = acked.duration_since(enqueued).unwrap_or(Duration::ZERO);
            self.latency.observe(latency.as_secs_f64());
        }
    }

    /// A recovery round's outcomes.
    pub fn recovered(&self, published: usize, requeued: usize, raced: usize) {
        for (counter, n) in self.recovered.iter().zip([published, requeued, raced]) {
            counter.inc_by(n as u64);
        }
    }

    /// A recovery round ended: `failed` the topics whose search failed (with why),
    /// `unsettled` the rows it left for that reason. A topic missing from `failed` was
    /// searched (or had no stale row) and is forgotten.
    pub fn recovery_done(&self, failed: &[(String, String)], unsettled: usize) {
        self.unsettled
            .set(i64::try_from(unsettled).unwrap_or(i64::MAX));
        if let Ok(mut failing) = self.health.recovery_failing.lock() {
            let before = std::mem::take(&mut *failing);
            for (topic, why) in failed {
                let rounds = before.get(topic).map_or(0, |(n, _)| *n) + 1;
                failing.insert(topic.clone(), (rounds, why.clone()));
            }
        }
    }

    /// The dispatch loop goes round.
    pub fn tick(&self) {
        self.health.last_tick_ms.store(unix_ms(), Ordering::Relaxed);
    }

    /// A batch ran: `batch_error` is its failure, if it failed (kept until the next batch).
    pub fn batch_done(&self, batch_error: Option<String>) {
        self.tick();
        if let Ok(mut slot) = self.health.batch_error.lock() {
            *slot = batch_error;
        }
    }

    /// The probe's view of the table: rows per status and the oldest due PENDING row's age.
    pub fn set_table(&self, counts: &BTreeMap<OutboxStatus, i64>, oldest_pending: Option<f64>) {
        for (status, n) in counts {
            self.events
                .get_or_create(&StatusLabels {
                    status: status.as_str().to_owned(),
                })
                .set(*n);
        }
        self.oldest_pending.set(oldest_pending.unwrap_or(0.0));
    }

    /// The probe reached the database (`Ok`) or not (why).
    pub fn set_database(&self, result: Result<(), String>) {
        set_reach(&self.health.database, result);
    }

    /// The probe reached the broker (`Ok`) or not (why).
    pub fn set_broker(&self, result: Result<(), String>) {
        set_reach(&self.health.broker, result);
    }

    /// `Ok` when the database and the broker answered the last probe, the last batch did
    /// not fail and stale-dispatch recovery is not stuck on a topic
    /// ([`RECOVERY_STUCK_ROUNDS`]); otherwise one line per part that is not ready.
    pub fn readiness(&self) -> Result<(), Vec<String>> {
        let mut problems = vec![];
        for (part, reach) in [
            ("database", &self.health.database),
            ("broker", &self.health.broker),
        ] {
            match reach.lock().map(|r| r.clone()) {
                Ok(Reach::Ok) => {}
                Ok(Reach::Unknown) => problems.push(format!("{part}: not checked yet")),
                Ok(Reach::Failing(why)) => problems.push(format!("{part}: unreachable: {why}")),
                Err(_) => problems.push(format!("{part}: state unavailable")),
            }
        }
        if let Ok(Some(error)) = self.health.batch_error.lock().map(|e| e.clone()) {
            problems.push(format!("dispatcher: the last batch failed: {error}"));
        }
        if let Ok(failing) = self.health.recovery_failing.lock() {
            for (topic, (rounds, why)) in failing.iter() {
                if *rounds >= RECOVERY_STUCK_ROUNDS {
                    problems.push(format!(
                        "recovery: searching {topic} for stale dispatches failed {rounds} rounds \
                         in a row (its rows stay DISPATCHING): {why}"
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// `Ok` while the dispatch loop goes round within its bound.
    pub fn liveness(&self) -> Result<(), Vec<String>> {
        let last = self.health.last_tick_ms.load(Ordering::Relaxed);
        if last == 0 {
            // Not started yet (connecting, checking the table): alive.
            return Ok(());
        }
        let age = Duration::from_millis(unix_ms().saturating_sub(last));
        if age > self.health.live_within {
            Err(vec![format!(
                "dispatcher: the dispatch loop has not gone round for {} s (bound {} s)",
                age.as_secs(),
                self.health.live_within.as_secs()
            )])
        } else {
            Ok(())
        }
    }
}

fn set_reach(slot: &Mutex<Reach>, result: Result<(), String>) {
    if let Ok(mut reach) = slot.lock() {
        *reach = match result {
            Ok(()) => Reach::Ok,
            Err(why) => Reach::Failing(why),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn names_follow_the_contract() {
        let mut registry = Registry::default();
        let m = DispatchMetrics::register(&mut registry, Duration::from_secs(60));
        let t0 = std::time::UNIX_EPOCH + Duration::from_secs(1_000);
        m.batch(2, [(t0, t0 + Duration::from_millis(3)); 2], 1);
        m.recovered(1, 2, 0);
        let counts = BTreeMap::from([(OutboxStatus::Pending, 7), (OutboxStatus::Failure, 1)]);
        m.set_table(&counts, Some(12.5));
        let text = encode(&registry);
        for line in [
            "sluice_outbox_events{status=\"PENDING\"} 7",
            "sluice_outbox_events{status=\"FAILURE\"} 1",
            "sluice_outbox_events{status=\"PUBLISHED\"} 0",
            "sluice_outbox_oldest_pending_age_seconds 12.5",
            "sluice_outbox_published_total 2",
            "sluice_outbox_publish_latency_seconds_count 2",
            "sluice_outbox_publish_latency_seconds_bucket{le=\"0.004\"} 2",
            "sluice_outbox_failures_total 1",
            "sluice_outbox_recovered_total{outcome=\"published\"} 1",
            "sluice_outbox_recovered_total{outcome=\"requeued\"} 2",
            "sluice_outbox_recovered_total{outcome=\"raced\"} 0",
            "sluice_outbox_recovery_unsettled 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn a_topic_whose_recovery_search_keeps_failing_makes_the_dispatcher_not_ready() {
        let mut registry = Registry::default();
        let m = DispatchMetrics::register(&mut registry, Duration::from_secs(60));
        m.set_database(Ok(()));
        m.set_broker(Ok(()));
        let failed = vec![("orders".to_owned(), "deadline".to_owned())];
        for _ in 1..RECOVERY_STUCK_ROUNDS {
            m.recovery_done(&failed, 4);
            assert_eq!(m.readiness(), Ok(()), "a failed round or two is ridden out");
        }
        m.recovery_done(&failed, 4);
        let problems = m.readiness().unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains("orders") && problems[0].contains("3 rounds in a row"),
            "{problems:?}"
        );
        assert!(encode(&registry).contains("sluice_outbox_recovery_unsettled 4"));
        // Another topic failing does not carry the count over; a round that searched
        // `orders` clears it.
        m.recovery_done(&[("audit".to_owned(), "down".to_owned())], 1);
        assert_eq!(m.readiness(), Ok(()));
        m.recovery_done(&[], 0);
        assert!(encode(&registry).contains("sluice_outbox_recovery_unsettled 0"));
    }

    #[test]
    fn ready_only_when_both_ends_answer_and_the_last_batch_ran() {
        let m = DispatchMetrics::default();
        let before = m.readiness().unwrap_err();
        assert_eq!(
            before,
            vec!["database: not checked yet", "broker: not checked yet"]
        );
        m.set_database(Ok(()));
        m.set_broker(Err("all brokers down".into()));
        assert_eq!(
            m.readiness().unwrap_err(),
            vec!["broker: unreachable: all brokers down"]
        );
        m.set_broker(Ok(()));
        m.batch_done(Some("connection refused".into()));
        assert_eq!(
            m.readiness().unwrap_err(),
            vec!["dispatcher: the last batch failed: connection refused"]
        );
        m.tick();
        assert!(
            m.readiness().is_err(),
            "a tick alone keeps the batch's error"
        );
        m.batch_done(None);
        assert_eq!(m.readiness(), Ok(()));
    }

    #[test]
    fn live_while_the_loop_goes_round() {
        let m = DispatchMetrics::unregistered(Duration::from_secs(5));
        assert_eq!(m.liveness(), Ok(()), "not started yet counts as alive");
        m.tick();
        assert_eq!(m.liveness(), Ok(()));
        m.health
            .last_tick_ms
            .store(unix_ms() - 6_000, Ordering::Relaxed);
        let dead = m.liveness().unwrap_err();
        assert!(dead[0].contains("has not gone round for 6 s"), "{dead:?}");
    }
}
