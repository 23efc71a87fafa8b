//! Error handling: every consumer error goes through the stall watch (ridden out, or the
//! pipeline ends with [`ConsumeError::Stalled`]); a fence as a static member is either the
//! client fencing its own previous session (it is built again and rejoins) or a
//! configuration error ([`ConsumeError::Fenced`]).

use super::{BatchConsumer, ConsumeError, subscribe_to};
use crate::rebalance::RebalanceCounter;
use crate::stall::{ErrorClass, Verdict};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::time::{Duration, Instant};

/// What the stall watch is keyed by: an error code, or the topic's absence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Trouble {
    Code(i32),
    TopicMissing,
}

/// How often one kind of consumer error is logged while it keeps coming.
const QUIET_FOR: Duration = Duration::from_secs(30);

/// The errors logged lately, each with when it may be logged again and how many of it were
/// not logged since.
#[derive(Debug, Default)]
pub(super) struct Quiet(std::collections::HashMap<Trouble, (Instant, u64)>);

impl Quiet {
    /// Whether an error of `key` seen at `now` is to be logged: `Some(n)` with the `n` not
    /// logged before it, or `None` (counted) within [`QUIET_FOR`] of the last one logged.
    pub(super) fn allow(&mut self, key: Trouble, now: Instant) -> Option<u64> {
        match self.0.get_mut(&key) {
            Some((until, suppressed)) if now < *until => {
                *suppressed += 1;
                None
            }
            _ => {
                let suppressed = self.0.get(&key).map_or(0, |(_, n)| *n);
                self.0.insert(key, (now + QUIET_FOR, 0));
                Some(suppressed)
            }
        }
    }
}

impl BatchConsumer {
    /// Handles one consumer error: a fatal one (or a fence) at once, any other through the
    /// stall watch (ridden out, or [`ConsumeError::Stalled`] once it outlasts the bound).
    pub(super) fn on_error(&mut self, error: KafkaError) -> Result<(), ConsumeError> {
        if crate::error::flags(&error).fatal {
            // The client's own account of its fatal state, when it has one.
            let (code, detail) = self.consumer.client().fatal_error().unwrap_or_else(|| {
                let code = error
                    .rdkafka_error_code()
                    .unwrap_or(RDKafkaErrorCode::Fatal);
                (code, error.to_string())
            });
            if code == RDKafkaErrorCode::FencedInstanceId
                || error.rdkafka_error_code() == Some(RDKafkaErrorCode::FencedInstanceId)
            {
                return self.on_fenced(detail);
            }
            return Err(ConsumeError::Stalled {
                topic: self.label.clone(),
                stuck: self.stuck_partitions(None),
                cause: format!("{error} ({detail})"),
                for_: Duration::ZERO,
                reports: 1,
            });
        }
        let class = crate::error::consumer_error_class(&error);
        let key = error
            .rdkafka_error_code()
            .map_or(Trouble::Code(i32::MIN), |code| Trouble::Code(code as i32));
        let now = Instant::now();
        match self.watch.observe(key.clone(), class, now) {
            Verdict::Ride => {
                if class == ErrorClass::Transient {
                    self.last_transient = Some(now);
                }
                // An outage repeats one error many times a second at first (each broker,
                // each reconnect; librdkafka's own log line says each): said once per key
                // and period, with how many were not said since.
                let Some(suppressed) = self.quiet.allow(key, now) else {
                    return Ok(());
                };
                if class == ErrorClass::Transient {
                    tracing::warn!(topics = %self.label, %error, suppressed,
                        "consumer error (the client retries)");
                } else {
                    tracing::warn!(topics = %self.label, %error, suppressed,
                        bound_s = self.watch.bound().as_secs(),
                        "consumer error; the pipeline stops if it keeps coming back for the bound");
                }
                Ok(())
            }
            Verdict::Stalled { for_, reports } => {
                let since = Instant::now().checked_sub(for_);
                Err(ConsumeError::Stalled {
                    topic: self.label.clone(),
                    stuck: self.stuck_partitions(since),
                    cause: error.to_string(),
                    for_,
                    reports,
                })
            }
        }
    }

    /// Fenced as a static member. Either another live process joined with the same
    /// `group.instance.id` (a configuration error: exit with a clear message rather than
    /// fence each other back and forth), or the client fenced itself: after a broker
    /// restart or a coordinator move, librdkafka may join again without its member id, and
    /// the coordinator then fences the session it still holds — which is this process's own.
    /// So a fence that comes within a minute of a broker-side error is taken for the second
    /// case and the client is built again and rejoins, at most three times in ten minutes;
    /// any other fence ends the pipeline. Records already polled stay valid: a batch whose
    /// partitions the new client does not own is simply not committed and comes again.
    fn on_fenced(&mut self, detail: String) -> Result<(), ConsumeError> {
        let now = Instant::now();
        let fenced = ConsumeError::Fenced {
            group: self.group.clone(),
            instance: self.instance.clone().unwrap_or_default(),
            detail,
        };
        if !may_rejoin_after_fence(now, self.last_transient, &mut self.rejoins) {
            return Err(fenced);
        }
        tracing::warn!(topics = %self.label, group = %self.group, rejoins = self.rejoins.len() + 1,
            error = %fenced, "fenced right after a broker disruption (the client fencing its own \
            previous session); building the client again and rejoining");
        let consumer: BaseConsumer<RebalanceCounter> =
            self.config.create_with_context(self.rebalances.clone())?;
        subscribe_to(&consumer, &self.subscribed)?;
        self.consumer = consumer;
        self.rejoins.push(now);
        // The new client holds nothing back; the next `hold` pauses again what it names.
        self.held.clear();
        Ok(())
    }
}

/// Whether a fence at `now` is taken for self-fencing (see `BatchConsumer::on_fenced`): a
/// broker-side error within the last minute, and fewer than three rejoins in ten minutes.
/// Forgets rejoins older than ten minutes.
fn may_rejoin_after_fence(
    now: Instant,
    last_transient: Option<Instant>,
    rejoins: &mut Vec<Instant>,
) -> bool {
    const SELF_FENCE_WINDOW: Duration = Duration::from_secs(60);
    const REJOIN_WINDOW: Duration = Duration::from_secs(600);
    const MAX_REJOINS: usize = 3;
    rejoins.retain(|t| now.saturating_duration_since(*t) < REJOIN_WINDOW);
    let after_broker_trouble =
        last_transient.is_some_and(|t| now.saturating_duration_since(t) < SELF_FENCE_WINDOW);
    after_broker_trouble && rejoins.len() < MAX_REJOINS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_kind_of_error_is_logged_once_a_period_with_the_count_not_logged() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut quiet = Quiet::default();
        let down = Trouble::Code(-195);
        assert_eq!(quiet.allow(down.clone(), at(0)), Some(0));
        for ms in [50, 100, 29_000] {
            assert_eq!(quiet.allow(down.clone(), at(ms)), None);
        }
        // Another kind is its own.
        assert_eq!(quiet.allow(Trouble::TopicMissing, at(100)), Some(0));
        assert_eq!(quiet.allow(down.clone(), at(30_000)), Some(3));
        assert_eq!(quiet.allow(down.clone(), at(30_001)), None);
        assert_eq!(quiet.allow(down, at(60_000)), Some(1));
    }

    #[test]
    fn a_fence_is_taken_for_self_fencing_only_right_after_broker_trouble_and_rarely() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut rejoins = Vec::new();
        // No broker trouble: another live process has the id.
        assert!(!may_rejoin_after_fence(at(100), None, &mut rejoins));
        assert!(!may_rejoin_after_fence(at(100), Some(at(30)), &mut rejoins));
        // Right after a broker restart: rejoin, but three times at most in ten minutes.
        for i in 0..3 {
            assert!(may_rejoin_after_fence(
                at(100 + i),
                Some(at(90)),
                &mut rejoins
            ));
            rejoins.push(at(100 + i));
        }
        assert!(!may_rejoin_after_fence(
            at(110),
            Some(at(105)),
            &mut rejoins
        ));
        // Ten minutes later the budget is back.
        assert!(may_rejoin_after_fence(at(800), Some(at(790)), &mut rejoins));
        assert!(rejoins.is_empty(), "old rejoins forgotten");
    }
}
