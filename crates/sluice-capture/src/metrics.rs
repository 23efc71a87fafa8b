//! The capture's Prometheus metrics and its readiness (docs/capture.md#operate-it). The
//! slot's state is read by a probe on its own connection and timer ([`probe_slot`]), so a
//! scrape never queries the database. Metric names are a contract: the alert rules in
//! `deploy/` depend on them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use sqlx::{Connection, PgConnection};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What the probe last saw of the slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotSeen {
    /// Not probed yet.
    Unknown,
    /// The slot exists; whether a session streams from it.
    Exists {
        /// A walsender holds it.
        active: bool,
    },
    /// No slot of that name.
    Missing,
    /// The probe could not read it.
    Unreadable(String),
}

/// The capture's metric handles and health; cheap to clone.
#[derive(Debug, Clone)]
pub struct CaptureMetrics {
    lag: Gauge,
    active: Gauge,
    records: Counter,
    failures: Counter,
    seen: Arc<Mutex<SlotSeen>>,
    /// A session of this process streams from the slot.
    streaming: Arc<AtomicBool>,
    /// Seconds Kafka has acknowledged nothing of the oldest transaction waiting for it.
    unacknowledged: Gauge,
    /// What that gauge is computed from; outlives a session, so a session that fails on
    /// records Kafka never takes hands its wait on to the next.
    waits: Arc<Mutex<Waits>>,
}

/// Whether records wait for Kafka, and since when Kafka made no progress on them.
#[derive(Debug, Clone, Copy)]
struct Waits {
    waiting: bool,
    progress_at: Instant,
    /// The wait of a session that failed on Kafka, carried into the next ones until one of
    /// them gets an acknowledgement: records acknowledged (the process's count) when the
    /// session now streaming started. A new session's own checks cannot tell progress
    /// from records it has not sent again yet.
    carried: Option<u64>,
}

impl Waits {
    fn waited(&self, now: Instant) -> i64 {
        if !self.waiting {
            return 0;
        }
        let seconds = now.saturating_duration_since(self.progress_at).as_secs();
        i64::try_from(seconds).unwrap_or(i64::MAX)
    }
}

/// What a relay's check saw of Kafka's acknowledgements since its last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaProgress {
    /// Nothing waits for an acknowledgement.
    NothingWaits,
    /// The oldest transaction waiting got acknowledgements (or is newer).
    Progressed,
    /// None seen on it (or, at a session's first check, not known).
    NoneSeen,
}

/// How long a record may wait for Kafka's acknowledgement before the capture is not ready:
/// past librdkafka's retries through a leader election or a broker's restart.
pub const UNACKNOWLEDGED_READY_LIMIT: Duration = Duration::from_secs(15);

impl Default for CaptureMetrics {
    /// Handles no registry exports (a capture without an endpoint, tests).
    fn default() -> Self {
        Self {
            lag: Gauge::default(),
            active: Gauge::default(),
            records: Counter::default(),
            failures: Counter::default(),
            seen: Arc::new(Mutex::new(SlotSeen::Unknown)),
            streaming: Arc::new(AtomicBool::new(false)),
            unacknowledged: Gauge::default(),
            waits: Arc::new(Mutex::new(Waits {
                waiting: false,
                progress_at: Instant::now(),
                carried: None,
            })),
        }
    }
}

impl CaptureMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register_with_unit(
            "sluice_capture_slot_lag",
            "WAL the slot keeps from being recycled: pg_current_wal_lsn() - restart_lsn",
            Unit::Bytes,
            metrics.lag.clone(),
        );
        registry.register(
            "sluice_capture_slot_active",
            "1 when a session streams from the slot, 0 when it is idle or gone",
            metrics.active.clone(),
        );
        registry.register(
            "sluice_capture_records",
            "Change events (and outbox records) Kafka acknowledged",
            metrics.records.clone(),
        );
        registry.register(
            "sluice_capture_session_failures",
            "Capture sessions that failed and were started again",
            metrics.failures.clone(),
        );
        registry.register_with_unit(
            "sluice_capture_unacknowledged_age",
            "How long Kafka has acknowledged nothing of the oldest transaction waiting for it, across sessions (0: nothing waits)",
            Unit::Seconds,
            metrics.unacknowledged.clone(),
        );
        metrics
    }

    /// One record Kafka acknowledged.
    pub fn acknowledged(&self) {
        self.records.inc();
    }

    /// A session failed (a new one follows).
    pub fn session_failed(&self) {
        self.failures.inc();
    }

    /// Whether a session of this process streams from the slot now.
    pub fn streaming(&self, streaming: bool) {
        self.streaming.store(streaming, Ordering::Relaxed);
        if streaming {
            self.session_started(Instant::now());
        }
    }

    /// A session starts streaming at `now`: after one that left nothing waiting (or ended
    /// for another reason than Kafka) its wait starts from now; after one that failed on
    /// Kafka with records waiting, the wait goes on until this one gets an acknowledgement.
    fn session_started(&self, now: Instant) {
        let acknowledged = self.records.get();
        if let Ok(mut waits) = self.waits.lock() {
            if waits.carried.is_some() {
                waits.carried = Some(acknowledged);
            } else if !waits.waiting {
                waits.progress_at = now;
            }
        }
    }

    /// A session ended; `on_kafka`: it failed on a record Kafka did not take. Only then
    /// does the wait go on into the next session (a database outage or another process
    /// holding the slot is not Kafka's, and ends it).
    pub fn session_ended(&self, on_kafka: bool) {
        if let Ok(mut waits) = self.waits.lock() {
            if on_kafka {
                // Records Kafka did not take: waiting, since the last progress if a check
                // saw it, else from now (a session that failed before its first check).
                if !waits.waiting {
                    waits.waiting = true;
                    waits.progress_at = Instant::now();
                }
                waits.carried = Some(self.records.get());
            } else {
                waits.waiting = false;
                waits.carried = None;
            }
        }
        self.unacknowledged.set(self.waited(Instant::now()));
    }

    /// A relay's check of Kafka's progress, at `now`: sets the wait the gauge and readiness
    /// show.
    pub fn kafka_progress(&self, progress: KafkaProgress, now: Instant) {
        let acknowledged = self.records.get();
        let Ok(mut waits) = self.waits.lock() else {
            return;
        };
        match (waits.carried, progress) {
            // A carried wait ends only with an acknowledgement in this session.
            (Some(at_start), _) if acknowledged <= at_start => waits.waiting = true,
            (_, KafkaProgress::NothingWaits) => {
                waits.carried = None;
                waits.waiting = false;
                waits.progress_at = now;
            }
            (_, KafkaProgress::Progressed) => {
                waits.carried = None;
                waits.waiting = true;
                waits.progress_at = now;
            }
            (Some(_), KafkaProgress::NoneSeen) => {
                // Acknowledged since the start, but not the oldest waiting one: its wait
                // starts now.
                waits.carried = None;
                waits.waiting = true;
                waits.progress_at = now;
            }
            (None, KafkaProgress::NoneSeen) => waits.waiting = true,
        }
        self.unacknowledged.set(waits.waited(now));
    }

    /// Seconds Kafka has made no progress on what waits at `now` (0: nothing waits).
    fn waited(&self, now: Instant) -> i64 {
        self.waits.lock().map_or(0, |waits| waits.waited(now))
    }

    /// What the probe saw, with the lag when the slot exists.
    pub fn slot(&self, seen: SlotSeen, lag_bytes: Option<i64>) {
        self.active
            .set(i64::from(seen == SlotSeen::Exists { active: true }));
        // A slot gone or unreadable keeps no lag this process can know.
        self.lag.set(lag_bytes.unwrap_or_default());
        if let Ok(mut last) = self.seen.lock() {
            *last = seen;
        }
        // Between sessions (a session that fails at once on a topic Kafka does not have
        // checks nothing), the wait goes on: the probe's timer shows it.
        self.unacknowledged.set(self.waited(Instant::now()));
    }

    /// Ready when the slot exists and a session of this process streams from it (another
    /// process holding the slot does not make this one ready).
    pub fn readiness(&self) -> Result<(), Vec<String>> {
        self.readiness_at(Instant::now())
    }

    fn readiness_at(&self, now: Instant) -> Result<(), Vec<String>> {
        // The wait for Kafka first: between the sessions it makes fail, it is the cause.
        let waited = self.waited(now);
        let mut problems = Vec::new();
        if u64::try_from(waited).unwrap_or(0) >= UNACKNOWLEDGED_READY_LIMIT.as_secs() {
            problems.push(format!(
                "capture: Kafka has acknowledged none of the oldest waiting transaction's records for {waited} s (a topic that does not exist, the brokers away, or a refusal; the log names the topic when a delivery fails)"
            ));
        }
        if !self.streaming.load(Ordering::Relaxed) {
            problems.push(
                "capture: no session of this process streams (starting, snapshotting, waiting for another capture of the slot, or between sessions after a failure)".into(),
            );
            return Err(problems);
        }
        let seen = self
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or(SlotSeen::Unreadable("state unavailable".into()));
        match seen {
            SlotSeen::Exists { active: true } => {}
            SlotSeen::Exists { active: false } => {
                problems.push("capture: the slot exists but no session streams from it".into());
            }
            SlotSeen::Missing => problems.push(
                "capture: the replication slot does not exist (not made yet, or dropped: a new one starts from then, changes in between are not captured)".into(),
            ),
            SlotSeen::Unknown => problems.push("capture: the slot not checked yet".into()),
            SlotSeen::Unreadable(why) => {
                problems.push(format!("capture: the slot cannot be read: {why}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Alive while the process runs (its sessions restart themselves).
    pub fn liveness(&self) -> Result<(), Vec<String>> {
        Ok(())
    }
}

/// A replication slot as `pg_replication_slots` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotState {
    /// A session streams from it.
    pub active: bool,
    /// The WAL it keeps, in bytes (from its `restart_lsn`, what PostgreSQL may not recycle).
    pub kept_bytes: Option<i64>,
    /// Its `confirmed_flush_lsn` as PostgreSQL prints it (`0/16B3748`).
    pub confirmed: Option<String>,
}

/// The slot's activity, the WAL it keeps and its confirmed position, in one read; `None`
/// when it is missing.
pub async fn slot_state(
    conn: &mut PgConnection,
    slot: &str,
) -> Result<Option<SlotState>, sqlx::Error> {
    let row = sqlx::query_as::<_, (bool, Option<i64>, Option<String>)>(
        "SELECT active, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, \
         confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|(active, kept_bytes, confirmed)| SlotState {
        active,
        kept_bytes,
        confirmed,
    }))
}

/// Reads the slot's state every `every` until `stop`, on its own connection (made again
/// when it breaks).
pub async fn probe_slot(
    url: String,
    slot: String,
    metrics: CaptureMetrics,
    every: Duration,
    stop: CancellationToken,
) {
    let mut conn: Option<PgConnection> = None;
    loop {
        if conn.is_none() {
            match PgConnection::connect(&url).await {
                Ok(fresh) => conn = Some(fresh),
                Err(e) => metrics.slot(SlotSeen::Unreadable(e.to_string()), None),
            }
        }
        if let Some(open) = conn.as_mut() {
            match tokio::time::timeout(every, slot_state(open, &slot)).await {
                Ok(Ok(Some(state))) => metrics.slot(
                    SlotSeen::Exists {
                        active: state.active,
                    },
                    state.kept_bytes,
                ),
                Ok(Ok(None)) => metrics.slot(SlotSeen::Missing, None),
                Ok(Err(e)) => {
                    metrics.slot(SlotSeen::Unreadable(e.to_string()), None);
                    conn = None;
                }
                Err(_) => {
                    metrics.slot(
                        SlotSeen::Unreadable("the probe's query timed out".into()),
                        None,
                    );
                    conn = None;
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_while_a_session_streams_from_the_slot() {
        let metrics = CaptureMetrics::default();
        assert!(metrics.readiness().is_err(), "not probed yet");
        metrics.slot(SlotSeen::Exists { active: true }, Some(4096));
        let problems = metrics.readiness().unwrap_err();
        assert!(
            problems[0].contains("no session of this process"),
            "{problems:?}"
        );
        metrics.streaming(true);
        assert_eq!(metrics.readiness(), Ok(()));
        assert_eq!(metrics.lag.get(), 4096);
        assert_eq!(metrics.active.get(), 1);
        metrics.slot(SlotSeen::Missing, None);
        let problems = metrics.readiness().unwrap_err();
        assert!(problems[0].contains("does not exist"), "{problems:?}");
        assert_eq!(metrics.lag.get(), 0, "no slot, no lag known");
        assert_eq!(metrics.active.get(), 0);
        metrics.slot(SlotSeen::Exists { active: false }, Some(1));
        assert!(metrics.readiness().unwrap_err()[0].contains("no session"));
    }

    #[test]
    fn not_ready_while_kafka_makes_no_progress_past_the_limit_across_sessions() {
        use KafkaProgress::{NoneSeen, NothingWaits, Progressed};
        let metrics = CaptureMetrics::default();
        metrics.slot(SlotSeen::Exists { active: true }, None);
        metrics.streaming.store(true, Ordering::Relaxed);
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        metrics.session_started(at(0));
        metrics.kafka_progress(NothingWaits, at(0));
        metrics.kafka_progress(Progressed, at(1));
        metrics.kafka_progress(NoneSeen, at(4));
        assert_eq!(metrics.unacknowledged.get(), 3);
        assert_eq!(
            metrics.readiness_at(at(4)),
            Ok(()),
            "a short wait is a broker's retry"
        );
        metrics.kafka_progress(NoneSeen, at(16));
        assert_eq!(metrics.unacknowledged.get(), 15);
        let problems = metrics.readiness_at(at(16)).unwrap_err();
        assert!(
            problems[0]
                .contains("acknowledged none of the oldest waiting transaction's records for 15 s"),
            "{problems:?}"
        );
        // The session fails on Kafka; the next one has not sent the records again at its
        // first check (nothing waits there yet): the wait goes on, no ready in between.
        metrics.session_ended(true);
        metrics.streaming.store(false, Ordering::Relaxed);
        let between = metrics.readiness_at(at(18)).unwrap_err();
        assert!(between[0].contains("for 17 s"), "{between:?}");
        assert!(between[1].contains("no session"), "{between:?}");
        metrics.streaming.store(true, Ordering::Relaxed);
        metrics.session_started(at(20));
        metrics.kafka_progress(NothingWaits, at(21));
        assert!(metrics.readiness_at(at(30)).unwrap_err()[0].contains("for 29 s"));
        metrics.kafka_progress(Progressed, at(40)); // sent again: new to this session only
        assert_eq!(metrics.unacknowledged.get(), 39);
        // An acknowledgement in this session ends the carried wait: ready again.
        metrics.acknowledged();
        metrics.kafka_progress(NothingWaits, at(41));
        assert_eq!(metrics.unacknowledged.get(), 0);
        assert_eq!(metrics.readiness_at(at(41)), Ok(()));

        // Waiting when a session ends on something else (the database): the next session's
        // wait starts from its own start.
        metrics.kafka_progress(Progressed, at(42));
        metrics.kafka_progress(NoneSeen, at(50));
        metrics.session_ended(false);
        assert_eq!(
            metrics.readiness_at(at(100)),
            Ok(()),
            "nothing waits between"
        );
        metrics.session_started(at(100));
        metrics.kafka_progress(NoneSeen, at(101)); // the first check cannot tell
        assert_eq!(metrics.unacknowledged.get(), 1);
        assert_eq!(metrics.readiness_at(at(101)), Ok(()));
    }

    #[test]
    fn a_session_failing_on_kafka_before_its_first_check_starts_a_wait_another_end_ends_it() {
        let metrics = CaptureMetrics::default();
        let before = Instant::now();
        metrics.session_ended(true);
        let later = Instant::now() + Duration::from_secs(20);
        let problems = metrics.readiness_at(later).unwrap_err();
        assert!(problems[0].contains("acknowledged none"), "{problems:?}");
        let waits = *metrics.waits.lock().unwrap();
        assert!(waits.waiting && waits.progress_at >= before && waits.carried.is_some());
        // Another process holds the slot now (or the database failed): not Kafka's wait.
        metrics.session_ended(false);
        let problems = metrics.readiness_at(later).unwrap_err();
        assert!(problems[0].contains("no session"), "{problems:?}");
        assert_eq!(metrics.unacknowledged.get(), 0);
    }
}
