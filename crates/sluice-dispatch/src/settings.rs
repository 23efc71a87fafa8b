//! Settings of the outbox dispatcher (`sluice dispatch`), parsed from the
//! environment by a pure function, like the storage consumer's `StorageSettings`
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
//! [`variables`].

use sluice_core::KafkaClientSettings;
use sluice_core::retry::{self, Backoff};
use sluice_core::settings::forms::{Count, Count32, DatabaseUrl, Given, Millis};
use sluice_core::settings::kafka_client::{self, Servers};
use sluice_core::settings::{EnvReader, SettingsError, Var, Variable};
use std::collections::BTreeMap;
use std::time::Duration;

/// The longest back-off between two publish attempts of one event.
pub const MAX_BACKOFF: Duration = retry::MAX_DELAY;

/// Slack kept between "the last record of a claim is resolved" and "the claim is stale":
/// the time a delivery report or the broker's append may trail the producer's own timeout.
pub const STALE_MARGIN: Duration = Duration::from_secs(1);

/// The shortest time a dispatcher must have to hand a claimed batch to the producer.
pub const MIN_SEND_WINDOW: Duration = Duration::from_secs(1);

/// `DATABASE_URL`.
pub const DATABASE_URL: Var<DatabaseUrl> =
    sluice_core::settings::DATABASE_URL.with_help("the database holding outbox_events");
/// `KAFKA_BOOTSTRAP_SERVERS`.
pub const BOOTSTRAP_SERVERS: Var<Servers> =
    kafka_client::BOOTSTRAP_SERVERS.with_help("the brokers");
/// `OUTBOX_BATCH_SIZE`.
pub const BATCH_SIZE: Var<Count32> = Var::new("OUTBOX_BATCH_SIZE", 100, "events claimed per batch");
/// `OUTBOX_BATCH_BYTES`.
pub const BATCH_BYTES: Var<Count> = Var::new(
    "OUTBOX_BATCH_BYTES",
    4_194_304,
    "bytes of payloads and headers (as stored) claimed per batch; an event larger than this is \
     a batch of its own",
);
/// `OUTBOX_POLL_INTERVAL_MS`.
pub const POLL_INTERVAL: Var<Millis> = Var::new(
    "OUTBOX_POLL_INTERVAL_MS",
    1000,
    "poll when no NOTIFY arrives",
);
/// `OUTBOX_MAX_ATTEMPTS`.
pub const MAX_ATTEMPTS: Var<Count32> =
    Var::new("OUTBOX_MAX_ATTEMPTS", 10, "failed publishes before FAILURE");
/// `OUTBOX_BACKOFF_BASE_MS`.
pub const BACKOFF_BASE: Var<Millis> = Var::new(
    "OUTBOX_BACKOFF_BASE_MS",
    500,
    "first back-off; doubles, capped at 5 min",
);
/// `OUTBOX_STALE_DISPATCH_SECONDS`.
pub const STALE_DISPATCH: Var<Count> = Var::new(
    "OUTBOX_STALE_DISPATCH_SECONDS",
    60,
    "DISPATCHING this long is checked against Kafka; at least delivery timeout + 2 s",
);
/// `OUTBOX_DELIVERY_TIMEOUT_MS`.
pub const DELIVERY_TIMEOUT: Var<Count> = Var::new(
    "OUTBOX_DELIVERY_TIMEOUT_MS",
    30_000,
    "the producer's message.timeout.ms: a publish not acknowledged by then fails",
);
/// `OUTBOX_RETENTION_DAYS`.
pub const RETENTION_DAYS: Var<Count> = Var::new(
    "OUTBOX_RETENTION_DAYS",
    7,
    "SUCCESS/PUBLISHED rows older than this are purged",
);
/// `OUTBOX_DISPATCHER_ID`: its default is given by the binary (`hostname-pid`).
pub const DISPATCHER_ID: Var<Given> = Var::new(
    "OUTBOX_DISPATCHER_ID",
    "hostname-pid",
    "recorded in claimed_by",
);

/// Every variable, with its default and meaning, for `--help` and the docs' check (docs/outbox.md).
pub fn variables() -> Vec<Variable> {
    vec![
        DATABASE_URL.variable(),
        BOOTSTRAP_SERVERS.variable(),
        kafka_client::PROPERTIES,
        BATCH_SIZE.variable(),
        BATCH_BYTES.variable(),
        POLL_INTERVAL.variable(),
        MAX_ATTEMPTS.variable(),
        BACKOFF_BASE.variable(),
        STALE_DISPATCH.variable(),
        DELIVERY_TIMEOUT.variable(),
        RETENTION_DAYS.variable(),
        DISPATCHER_ID.variable(),
    ]
}

/// The validated, immutable settings of one dispatcher process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxSettings {
    /// `DATABASE_URL`.
    pub database_url: String,
    /// `KAFKA_BOOTSTRAP_SERVERS` and the `KAFKA_*` client properties.
    pub kafka: KafkaClientSettings,
    /// `OUTBOX_BATCH_SIZE`: events claimed per batch.
    pub batch_size: u32,
    /// `OUTBOX_BATCH_BYTES`: bytes of payloads and headers (as stored) claimed per batch.
    pub batch_bytes: u64,
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
        let names: Vec<&str> = names.into_iter().collect();
        let kafka = KafkaClientSettings::from_vars(lookup, names.iter().copied())?;
        let env = EnvReader::new(lookup);
        no_stray_outbox_variables(&env, &names)?;
        let database_url = DATABASE_URL.read(&env)?;
        let retention_days = RETENTION_DAYS.read(&env)?;
        if retention_days > 36_500 {
            return Err(SettingsError::invalid(
                RETENTION_DAYS.name,
                &retention_days.to_string(),
                "at most 36500 days",
            ));
        }
        let dispatcher_id = DISPATCHER_ID.read_or(&env, default_id.to_owned())?;
        let stale_seconds = STALE_DISPATCH.read(&env)?;
        let stale_dispatch = Duration::from_secs(stale_seconds);
        let delivery_ms = DELIVERY_TIMEOUT.read(&env)?;
        if !(100..=900_000).contains(&delivery_ms) {
            return Err(SettingsError::invalid(
                DELIVERY_TIMEOUT.name,
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
            batch_size: BATCH_SIZE.read(&env)?,
            batch_bytes: BATCH_BYTES.read(&env)?,
            poll_interval: POLL_INTERVAL.read(&env)?,
            max_attempts: MAX_ATTEMPTS.read(&env)?,
            backoff_base: BACKOFF_BASE.read(&env)?,
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

/// An `OUTBOX_*` variable the dispatcher does not read is an error naming it: a typo
/// (`OUTBOX_RETENTIONDAYS`) would otherwise leave the default in force without a word.
fn no_stray_outbox_variables(env: &EnvReader<'_>, names: &[&str]) -> Result<(), SettingsError> {
    let read: Vec<String> = variables()
        .into_iter()
        .map(|v| v.name.into_owned())
        .filter(|name| name.starts_with("OUTBOX_"))
        .collect();
    for name in names {
        if !name.starts_with("OUTBOX_") || read.iter().any(|known| known == name) {
            continue;
        }
        // An empty value counts as unset, here as everywhere.
        let Some(value) = env.raw(name).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        return Err(SettingsError::invalid(
            name,
            &value,
            &format!("no such setting: the dispatcher reads {}", read.join(", ")),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
