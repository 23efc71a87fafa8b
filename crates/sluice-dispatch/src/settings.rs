//! Settings of the outbox dispatcher (`sluice dispatch`), parsed from the
//! environment by a pure function, like the storage consumer's [`sluice_core::Settings`]
//! and through the same reader ([`EnvReader`]).
//!
//! [`OutboxSettings::from_lookup`] takes any `name → value` lookup and returns one immutable
//! value, or a [`SettingsError`] naming the variable. The back-off rule of a failed publish
//! ([`OutboxSettings::after_failed_publish`]) lives here too, so it is tested without a
//! database.
//!
//! Not a setting: `SLUICE_FAILPOINT` (`before-publish` / `after-publish`) is test-only fault
//! injection — the dispatcher SIGKILLs itself at that point of its first batch. It is read
//! by `Failpoint` (the `failpoint` module), which exists only with this crate's `failpoints`
//! feature (a production build ignores the variable), and is deliberately absent from
//! [`VARIABLES`].

use sluice_core::KafkaClientSettings;
use sluice_core::retry::{self, Backoff};
use sluice_core::settings::{EnvReader, SettingsError};
use std::collections::BTreeMap;
use std::time::Duration;

/// The longest back-off between two publish attempts of one event.
pub const MAX_BACKOFF: Duration = retry::MAX_DELAY;

/// Slack kept between "the last record of a claim is resolved" and "the claim is stale":
/// the time a delivery report or the broker's append may trail the producer's own timeout.
pub const STALE_MARGIN: Duration = Duration::from_secs(1);

/// The shortest time a dispatcher must have to hand a claimed batch to the producer.
pub const MIN_SEND_WINDOW: Duration = Duration::from_secs(1);

/// Every variable: (name, default, meaning), for `--help`.
pub const VARIABLES: [(&str, &str, &str); 11] = [
    (
        "DATABASE_URL",
        "(required)",
        "the database holding outbox_events",
    ),
    ("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092", "the brokers"),
    (
        "KAFKA_<NAME>",
        "(none)",
        "librdkafka property <name>, lower-case with _ → .",
    ),
    ("OUTBOX_BATCH_SIZE", "100", "events claimed per batch"),
    (
        "OUTBOX_POLL_INTERVAL_MS",
        "1000",
        "poll when no NOTIFY arrives",
    ),
    (
        "OUTBOX_MAX_ATTEMPTS",
        "10",
        "failed publishes before FAILURE",
    ),
    (
        "OUTBOX_BACKOFF_BASE_MS",
        "500",
        "first back-off; doubles, capped at 5 min",
    ),
    (
        "OUTBOX_STALE_DISPATCH_SECONDS",
        "60",
        "DISPATCHING this long is checked against Kafka; at least delivery timeout + 2 s",
    ),
    (
        "OUTBOX_DELIVERY_TIMEOUT_MS",
        "30000",
        "the producer's message.timeout.ms: a publish not acknowledged by then fails",
    ),
    (
        "OUTBOX_RETENTION_DAYS",
        "7",
        "SUCCESS/PUBLISHED rows older than this are purged",
    ),
    (
        "OUTBOX_DISPATCHER_ID",
        "hostname-pid",
        "recorded in claimed_by",
    ),
];

/// The validated, immutable settings of one dispatcher process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxSettings {
    /// `DATABASE_URL`.
    pub database_url: String,
    /// `KAFKA_BOOTSTRAP_SERVERS` and the `KAFKA_*` client properties.
    pub kafka: KafkaClientSettings,
    /// `OUTBOX_BATCH_SIZE`: events claimed per batch.
    pub batch_size: u32,
    /// `OUTBOX_POLL_INTERVAL_MS`: the longest wait without a notification.
    pub poll_interval: Duration,
    /// `OUTBOX_MAX_ATTEMPTS`: failed publishes before FAILURE.
    pub max_attempts: u32,
    /// `OUTBOX_BACKOFF_BASE_MS`: the back-off after the first failed publish.
    pub backoff_base: Duration,
    /// `OUTBOX_STALE_DISPATCH_SECONDS`: a DISPATCHING row older than this is recovered.
    /// Always at least `delivery_timeout` + [`STALE_MARGIN`] + [`MIN_SEND_WINDOW`].
    pub stale_dispatch: Duration,
    /// `OUTBOX_DELIVERY_TIMEOUT_MS`: the dispatcher producer's `message.timeout.ms`.
    pub delivery_timeout: Duration,
    /// `OUTBOX_RETENTION_DAYS`: age after which SUCCESS and PUBLISHED rows are purged.
    pub retention: Duration,
    /// `OUTBOX_DISPATCHER_ID`: this dispatcher's name in `claimed_by`.
    pub dispatcher_id: String,
}

/// What to do with an event whose publish failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailedPublish {
    /// Back to PENDING, claimable again after `delay`; `attempts` failed so far.
    Retry {
        /// Failed attempts, this one included.
        attempts: u32,
        /// The back-off before the next attempt.
        delay: Duration,
    },
    /// The attempt limit is reached: FAILURE.
    GiveUp {
        /// Failed attempts, this one included.
        attempts: u32,
    },
}

impl OutboxSettings {
    /// Builds the settings from a `name → value` lookup, without `KAFKA_*` client
    /// properties (see [`OutboxSettings::from_vars`]).
    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
        default_id: &str,
    ) -> Result<Self, SettingsError> {
        Self::from_vars(lookup, [], default_id)
    }

    /// Builds the settings from a `name → value` lookup and the names of the variables that
    /// exist (the `KAFKA_*` client properties are found among them); empty values count as
    /// unset. `default_id` is the dispatcher id when `OUTBOX_DISPATCHER_ID` is unset (the
    /// binary passes `hostname-pid`).
    pub fn from_vars<'a>(
        lookup: &dyn Fn(&str) -> Option<String>,
        names: impl IntoIterator<Item = &'a str>,
        default_id: &str,
    ) -> Result<Self, SettingsError> {
        let kafka = KafkaClientSettings::from_vars(lookup, names)?;
        let env = EnvReader::new(lookup);
        let database_url = env.database_url()?;
        let retention_days = env.number("OUTBOX_RETENTION_DAYS", 7)?;
        if retention_days > 36_500 {
            return Err(SettingsError::invalid(
                "OUTBOX_RETENTION_DAYS",
                &retention_days.to_string(),
                "at most 36500 days",
            ));
        }
        let dispatcher_id = env.string("OUTBOX_DISPATCHER_ID", default_id);
        let stale_seconds = env.number("OUTBOX_STALE_DISPATCH_SECONDS", 60)?;
        let stale_dispatch = Duration::from_secs(stale_seconds);
        let delivery_ms = env.number("OUTBOX_DELIVERY_TIMEOUT_MS", 30_000)?;
        if !(100..=900_000).contains(&delivery_ms) {
            return Err(SettingsError::invalid(
                "OUTBOX_DELIVERY_TIMEOUT_MS",
                &delivery_ms.to_string(),
                "between 100 and 900000 milliseconds",
            ));
        }
        let delivery_timeout = Duration::from_millis(delivery_ms);
        // Stale recovery must never see a claim whose records can still reach Kafka: a
        // dispatcher hands its batch to the producer within the send window after the
        // claim, and each record is acknowledged or failed within the delivery timeout.
        if stale_dispatch < delivery_timeout + STALE_MARGIN + MIN_SEND_WINDOW {
            return Err(SettingsError::StaleDispatchTooShort {
                stale_seconds,
                delivery_ms,
                slack_s: (STALE_MARGIN + MIN_SEND_WINDOW).as_secs(),
            });
        }
        Ok(Self {
            database_url,
            kafka,
            batch_size: env.small("OUTBOX_BATCH_SIZE", 100)?,
            poll_interval: env.millis("OUTBOX_POLL_INTERVAL_MS", 1000)?,
            max_attempts: env.small("OUTBOX_MAX_ATTEMPTS", 10)?,
            backoff_base: env.millis("OUTBOX_BACKOFF_BASE_MS", 500)?,
            stale_dispatch,
            delivery_timeout,
            retention: Duration::from_secs(retention_days * 86_400),
            dispatcher_id,
        })
    }

    /// [`OutboxSettings::from_lookup`] over a map (tests).
    pub fn from_map(
        map: &BTreeMap<String, String>,
        default_id: &str,
    ) -> Result<Self, SettingsError> {
        Self::from_vars(
            &|name| map.get(name).cloned(),
            map.keys().map(String::as_str),
            default_id,
        )
    }

    /// How long after its claim a dispatcher may still hand a claimed event to the
    /// producer: the stale timeout minus the delivery timeout and [`STALE_MARGIN`]. An event
    /// not sent by then is requeued without an attempt, so every record of a claim is
    /// acknowledged or failed before stale recovery may look at the claim.
    pub fn send_window(&self) -> Duration {
        self.stale_dispatch
            .saturating_sub(self.delivery_timeout)
            .saturating_sub(STALE_MARGIN)
    }

    /// The publish back-off: the shared policy ([`Backoff`]) from
    /// `OUTBOX_BACKOFF_BASE_MS`, capped at [`MAX_BACKOFF`].
    pub fn publish_backoff(&self) -> Backoff {
        Backoff {
            max_attempts: self.max_attempts,
            base: self.backoff_base,
            cap: MAX_BACKOFF,
        }
    }

    /// The nominal back-off before attempt `attempts + 1`: base × 2^(attempts − 1), capped
    /// at [`MAX_BACKOFF`] (jitter takes up to a tenth off it).
    pub fn backoff(&self, attempts: u32) -> Duration {
        self.publish_backoff().nominal(attempts)
    }

    /// The rule of `mark_publish_failed`: `failed_before` attempts had failed before this
    /// one; PENDING with back-off (jittered by `jitter`, in `[0, 1)`), or FAILURE once the
    /// attempt limit is reached.
    pub fn after_failed_publish(&self, failed_before: u32, jitter: f64) -> AfterFailedPublish {
        let attempts = failed_before.saturating_add(1);
        if attempts >= self.max_attempts {
            AfterFailedPublish::GiveUp { attempts }
        } else {
            AfterFailedPublish::Retry {
                attempts,
                delay: self.publish_backoff().delay(attempts, jitter),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid `DATABASE_URL` and `pairs` (which may replace it).
    fn settings(pairs: &[(&str, &str)]) -> Result<OutboxSettings, SettingsError> {
        let mut map: BTreeMap<String, String> = [(
            "DATABASE_URL".to_owned(),
            "postgres://u@127.0.0.1:5432/db".to_owned(),
        )]
        .into();
        for (k, v) in pairs {
            map.insert((*k).to_owned(), (*v).to_owned());
        }
        OutboxSettings::from_map(&map, "host-1")
    }

    #[test]
    fn defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.kafka.bootstrap_servers, "127.0.0.1:9092");
        assert_eq!(s.batch_size, 100);
        assert_eq!(s.poll_interval, Duration::from_millis(1000));
        assert_eq!(s.max_attempts, 10);
        assert_eq!(s.backoff_base, Duration::from_millis(500));
        assert_eq!(s.stale_dispatch, Duration::from_secs(60));
        assert_eq!(s.delivery_timeout, Duration::from_secs(30));
        assert_eq!(s.send_window(), Duration::from_secs(29));
        assert_eq!(s.retention, Duration::from_secs(7 * 86_400));
        assert_eq!(s.dispatcher_id, "host-1");
        let s = settings(&[("OUTBOX_DISPATCHER_ID", " d2 "), ("OUTBOX_BATCH_SIZE", "7")]).unwrap();
        assert_eq!(s.dispatcher_id, "d2");
        assert_eq!(s.batch_size, 7);
    }

    #[test]
    fn each_invalid_value_names_its_variable() {
        for (name, value) in [
            ("OUTBOX_BATCH_SIZE", "0"),
            ("OUTBOX_BATCH_SIZE", "99999999999"),
            ("OUTBOX_POLL_INTERVAL_MS", "soon"),
            ("OUTBOX_MAX_ATTEMPTS", "-1"),
            ("OUTBOX_BACKOFF_BASE_MS", "1.5"),
            ("OUTBOX_STALE_DISPATCH_SECONDS", "0"),
            ("OUTBOX_RETENTION_DAYS", "100000"),
            ("OUTBOX_DELIVERY_TIMEOUT_MS", "50"),
            ("OUTBOX_DELIVERY_TIMEOUT_MS", "ten"),
            ("DATABASE_URL", "mysql://x"),
            ("KAFKA_ACKS", "1"),
            ("KAFKA_BOOTSTRAP_SERVERS", "no-port"),
        ] {
            let error = settings(&[(name, value)]).unwrap_err();
            assert_eq!(error.variable(), name, "{name}={value}");
        }
        let missing = OutboxSettings::from_map(&BTreeMap::new(), "h").unwrap_err();
        assert_eq!(missing.variable(), "DATABASE_URL");
    }

    #[test]
    fn stale_timeout_must_exceed_the_delivery_timeout() {
        // The old defaults (stale 60 s, producer timeout 120 s) are refused, naming both.
        let error = settings(&[("OUTBOX_DELIVERY_TIMEOUT_MS", "120000")]).unwrap_err();
        assert_eq!(error.variable(), "OUTBOX_STALE_DISPATCH_SECONDS");
        assert!(
            error.expected().contains("OUTBOX_DELIVERY_TIMEOUT_MS"),
            "{error:?}"
        );
        // Exactly delivery + margin + the shortest send window is accepted, 1 ms more is not.
        let ok = settings(&[
            ("OUTBOX_STALE_DISPATCH_SECONDS", "5"),
            ("OUTBOX_DELIVERY_TIMEOUT_MS", "3000"),
        ])
        .unwrap();
        assert_eq!(ok.send_window(), Duration::from_secs(1));
        let error = settings(&[
            ("OUTBOX_STALE_DISPATCH_SECONDS", "5"),
            ("OUTBOX_DELIVERY_TIMEOUT_MS", "3001"),
        ])
        .unwrap_err();
        assert_eq!(error.variable(), "OUTBOX_STALE_DISPATCH_SECONDS");
        // A stale timeout alone below the default delivery timeout is refused too.
        let error = settings(&[("OUTBOX_STALE_DISPATCH_SECONDS", "5")]).unwrap_err();
        assert_eq!(error.variable(), "OUTBOX_STALE_DISPATCH_SECONDS");
        // For every accepted pair, the send window plus the delivery timeout plus the margin
        // fits in the stale timeout.
        for stale in 1..=40_u64 {
            for delivery in (100..=40_000_u64).step_by(700) {
                if let Ok(s) = settings(&[
                    ("OUTBOX_STALE_DISPATCH_SECONDS", &stale.to_string()),
                    ("OUTBOX_DELIVERY_TIMEOUT_MS", &delivery.to_string()),
                ]) {
                    assert!(s.send_window() >= MIN_SEND_WINDOW);
                    assert!(
                        s.send_window() + s.delivery_timeout + STALE_MARGIN <= s.stale_dispatch
                    );
                }
            }
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let s = settings(&[]).unwrap();
        let delays: Vec<_> = (1..=4).map(|a| s.backoff(a).as_millis()).collect();
        assert_eq!(delays, vec![500, 1000, 2000, 4000]);
        assert_eq!(s.backoff(20), MAX_BACKOFF);
        assert_eq!(s.backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn failure_after_the_attempt_limit() {
        let s = settings(&[("OUTBOX_MAX_ATTEMPTS", "3")]).unwrap();
        assert_eq!(
            s.after_failed_publish(0, 0.0),
            AfterFailedPublish::Retry {
                attempts: 1,
                delay: Duration::from_millis(500)
            }
        );
        assert_eq!(
            s.after_failed_publish(1, 0.0),
            AfterFailedPublish::Retry {
                attempts: 2,
                delay: Duration::from_millis(1000)
            }
        );
        assert_eq!(
            s.after_failed_publish(2, 0.0),
            AfterFailedPublish::GiveUp { attempts: 3 }
        );
        assert_eq!(
            s.after_failed_publish(1, 0.5),
            AfterFailedPublish::Retry {
                attempts: 2,
                delay: Duration::from_millis(950)
            },
            "jitter takes up to a tenth off"
        );
        let once = settings(&[("OUTBOX_MAX_ATTEMPTS", "1")]).unwrap();
        assert_eq!(
            once.after_failed_publish(0, 0.0),
            AfterFailedPublish::GiveUp { attempts: 1 }
        );
    }
}
