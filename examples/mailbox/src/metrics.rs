//! The mailbox consumer's metrics and health: records by outcome, and whether it holds
//! partitions and its loop goes round.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_core::clock::unix_ms;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The loop goes round at least this often (it wakes every second to look at its
/// assignment); older means stuck.
const LIVE_WITHIN: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// The outcomes counted, in the order of `MailboxMetrics::record`'s index.
pub const OUTCOMES: [&str; 7] = [
    "applied",
    "rejected",
    "completed",
    "skipped",
    "ignored",
    "missing_row",
    "failed",
];

/// The consumer's handles; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct MailboxMetrics {
    records: Arc<[Counter; 7]>,
    up: Gauge,
    running: Arc<AtomicBool>,
    assigned: Arc<AtomicBool>,
    last_tick_ms: Arc<AtomicU64>,
}

impl MailboxMetrics {
    /// Registers `sluice_mailbox_records_total{outcome}` and `sluice_mailbox_up`.
    pub fn register(registry: &mut Registry) -> Self {
        let family = Family::<OutcomeLabels, Counter>::default();
        let records = OUTCOMES.map(|outcome| {
            family.get_or_create_owned(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
        });
        let metrics = Self {
            records: Arc::new(records),
            ..Self::default()
        };
        registry.register(
            "sluice_mailbox_records",
            "Mailbox records handled, by outcome",
            family,
        );
        registry.register(
            "sluice_mailbox_up",
            "1 while the mailbox consumer runs",
            metrics.up.clone(),
        );
        metrics
    }

    /// One record with outcome `OUTCOMES[index]`.
    pub(super) fn record(&self, index: usize) {
        if let Some(counter) = self.records.get(index) {
            counter.inc();
        }
    }

    /// The consumer started or stopped.
    pub(super) fn set_running(&self, running: bool) {
        self.up.set(i64::from(running));
        self.running.store(running, Ordering::Relaxed);
    }

    /// The loop went round; `assigned`: the consumer holds at least one partition.
    pub(super) fn tick(&self, assigned: bool) {
        self.assigned.store(assigned, Ordering::Relaxed);
        self.last_tick_ms.store(unix_ms(), Ordering::Relaxed);
    }

    /// `Ok` while the consumer runs and holds partitions.
    pub fn readiness(&self) -> Result<(), Vec<String>> {
        if !self.running.load(Ordering::Relaxed) {
            return Err(vec!["mailbox: not running".into()]);
        }
        if !self.assigned.load(Ordering::Relaxed) {
            return Err(vec!["mailbox: no partitions assigned".into()]);
        }
        Ok(())
    }

    /// `Ok` while the loop goes round.
    pub fn liveness(&self) -> Result<(), Vec<String>> {
        let last = self.last_tick_ms.load(Ordering::Relaxed);
        let age = Duration::from_millis(unix_ms().saturating_sub(last));
        if last != 0 && age > LIVE_WITHIN {
            return Err(vec![format!(
                "mailbox: the consumer loop has not gone round for {} s",
                age.as_secs()
            )]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_outcome_and_is_ready_once_assigned() {
        let mut registry = Registry::default();
        let m = MailboxMetrics::register(&mut registry);
        assert!(m.readiness().is_err());
        m.set_running(true);
        m.tick(false);
        assert_eq!(
            m.readiness(),
            Err(vec!["mailbox: no partitions assigned".to_owned()])
        );
        m.tick(true);
        assert_eq!(m.readiness(), Ok(()));
        assert_eq!(m.liveness(), Ok(()));
        m.record(0);
        m.record(5);
        m.record(5);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "sluice_mailbox_records_total{outcome=\"applied\"} 1",
            "sluice_mailbox_records_total{outcome=\"missing_row\"} 2",
            "sluice_mailbox_records_total{outcome=\"rejected\"} 0",
            "sluice_mailbox_up 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
