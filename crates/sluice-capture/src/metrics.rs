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
use std::time::Duration;
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
    /// Seconds the oldest record handed to Kafka has waited for its acknowledgement.
    unacknowledged: Gauge,
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
            "How long the oldest record handed to Kafka has waited for its acknowledgement (0: none waits)",
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

    /// Whether a session of this process streams from the slot now (a new session has
    /// nothing waiting for Kafka yet).
    pub fn streaming(&self, streaming: bool) {
        self.streaming.store(streaming, Ordering::Relaxed);
        self.unacknowledged.set(0);
    }

    /// How long the oldest record handed to Kafka has waited for its acknowledgement
    /// (`None`: nothing waits).
    pub fn unacknowledged_for(&self, waited: Option<Duration>) {
        let seconds = waited.map_or(0, |w| i64::try_from(w.as_secs()).unwrap_or(i64::MAX));
        self.unacknowledged.set(seconds);
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
    }

    /// Ready when the slot exists and a session of this process streams from it (another
    /// process holding the slot does not make this one ready).
    pub fn readiness(&self) -> Result<(), Vec<String>> {
        if !self.streaming.load(Ordering::Relaxed) {
            return Err(vec![
                "capture: no session of this process streams (starting, snapshotting, waiting for another capture of the slot, or between sessions after a failure)".into(),
            ]);
        }
        let seen = self
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or(SlotSeen::Unreadable("state unavailable".into()));
        let waited = self.unacknowledged.get();
        if u64::try_from(waited).unwrap_or(0) >= UNACKNOWLEDGED_READY_LIMIT.as_secs() {
            return Err(vec![format!(
                "capture: a record handed to Kafka {waited} s ago is not acknowledged yet (a topic that does not exist, the brokers away, or a refusal; the log names the topic when its delivery fails)"
            )]);
        }
        match seen {
            SlotSeen::Exists { active: true } => Ok(()),
            SlotSeen::Exists { active: false } => Err(vec![
                "capture: the slot exists but no session streams from it".into(),
            ]),
            SlotSeen::Missing => Err(vec![
                "capture: the replication slot does not exist (not made yet, or dropped: a new one starts from then, changes in between are not captured)".into(),
            ]),
            SlotSeen::Unknown => Err(vec!["capture: the slot not checked yet".into()]),
            SlotSeen::Unreadable(why) => Err(vec![format!("capture: the slot cannot be read: {why}")]),
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
    fn not_ready_while_a_record_waits_for_kafka_past_the_limit() {
        let metrics = CaptureMetrics::default();
        metrics.slot(SlotSeen::Exists { active: true }, None);
        metrics.streaming(true);
        metrics.unacknowledged_for(Some(Duration::from_secs(3)));
        assert_eq!(
            metrics.readiness(),
            Ok(()),
            "a short wait is a broker's retry"
        );
        metrics.unacknowledged_for(Some(UNACKNOWLEDGED_READY_LIMIT));
        let problems = metrics.readiness().unwrap_err();
        assert!(
            problems[0].contains("15 s ago is not acknowledged"),
            "{problems:?}"
        );
        assert_eq!(metrics.unacknowledged.get(), 15);
        metrics.unacknowledged_for(None);
        assert_eq!(metrics.readiness(), Ok(()));
        metrics.unacknowledged_for(Some(Duration::from_secs(60)));
        metrics.streaming(false);
        metrics.streaming(true);
        assert_eq!(
            metrics.readiness(),
            Ok(()),
            "a new session waits for nothing yet"
        );
    }
}
