//! Test-only fault injection, compiled only with the `failpoints` feature (off in every
//! production build; the kill tests turn it on through dev-dependencies).
//!
//! The environment variable `SLUICE_FAILPOINT`, read once when a [`crate::Dispatcher`] is
//! created, makes the process SIGKILL itself at a chosen point of a batch:
//! `before-publish` (the claim committed, nothing published: the rows are left DISPATCHING
//! with nothing in Kafka) or `after-publish` (every record of the batch acknowledged, none
//! marked: the rows are left DISPATCHING with their records in Kafka), or `after-next-claim`
//! (the window the pipelined loop opens: the next batch's claim committed while the batch
//! before it is acknowledged and not marked: both left DISPATCHING, only the earlier one's
//! records in Kafka).
//! `fail-first-publish` does not kill: the first event this dispatcher would publish is not
//! sent and fails as a delivery timeout would (once). Unset, empty or any other value: no
//! fault.

use std::time::Duration;

/// A test-only fault injected by `SLUICE_FAILPOINT` (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// `before-publish`: SIGKILL right after the claim commits, before publishing.
    BeforePublish,
    /// `after-publish`: SIGKILL right after the broker acknowledged the batch, before the
    /// outcomes are marked.
    AfterPublish,
    /// `after-next-claim`: SIGKILL right after a claim commits while an earlier batch is
    /// in flight, once every record of that batch is acknowledged and before it is marked
    /// (and before anything of the new claim is sent).
    AfterNextClaim,
    /// `fail-first-publish`: the first event to be published is not sent and fails once,
    /// as a delivery timeout would; no kill.
    FailFirstPublish,
}

impl Failpoint {
    /// The environment variable.
    pub const VAR: &'static str = "SLUICE_FAILPOINT";

    /// Parses a value of `SLUICE_FAILPOINT`; anything unknown is no fault.
    pub fn parse(value: &str) -> Option<Failpoint> {
        match value.trim() {
            "before-publish" => Some(Failpoint::BeforePublish),
            "after-publish" => Some(Failpoint::AfterPublish),
            "after-next-claim" => Some(Failpoint::AfterNextClaim),
            "fail-first-publish" => Some(Failpoint::FailFirstPublish),
            _ => None,
        }
    }

    /// The fault of this process, from its environment.
    pub fn from_env() -> Option<Failpoint> {
        let value = std::env::var(Self::VAR).ok()?;
        let failpoint = Self::parse(&value);
        match failpoint {
            Some(point) => tracing::warn!(
                ?point,
                "{} is set: this dispatcher will fail on purpose",
                Self::VAR
            ),
            None if value.trim().is_empty() => {}
            None => tracing::warn!(%value, "unknown {} ignored", Self::VAR),
        }
        failpoint
    }

    /// Kills this process with SIGKILL (no destructor, no flush, no mark), as `kill -9`
    /// from outside would; aborts if the signal could not be sent.
    pub(crate) fn trigger(self) -> ! {
        tracing::warn!(point = ?self, "failpoint reached: SIGKILL");
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        // The signal is delivered asynchronously; give it a moment before the fallback.
        std::thread::sleep(Duration::from_secs(5));
        std::process::abort()
    }
}

#[cfg(test)]
mod tests {
    use super::Failpoint;

    #[test]
    fn failpoint_values() {
        assert_eq!(
            Failpoint::parse("before-publish"),
            Some(Failpoint::BeforePublish)
        );
        assert_eq!(
            Failpoint::parse(" after-publish\n"),
            Some(Failpoint::AfterPublish)
        );
        assert_eq!(
            Failpoint::parse("after-next-claim"),
            Some(Failpoint::AfterNextClaim)
        );
        assert_eq!(
            Failpoint::parse("fail-first-publish"),
            Some(Failpoint::FailFirstPublish)
        );
        assert_eq!(Failpoint::parse(""), None);
        assert_eq!(Failpoint::parse("after-mark"), None);
    }
}
