//! Test-only fault injection: `SLUICE_FAILPOINT=retry-after-forward` makes a tier consumer
//! SIGKILL its own process right after a forward to the next tier or the dead-letter topic
//! was acknowledged, before the tier's source offset is committed (the window the
//! forward-then-commit order must survive). Unset, empty or any other value: no fault.
//! Never set it in production.
//!
//! Only builds with the `failpoints` feature read the variable; without it [`armed`] is
//! always false and nothing here is compiled into the binary.

#[cfg(feature = "failpoints")]
use std::time::Duration;

/// The environment variable (shared with the outbox dispatcher's failpoints).
pub const VAR: &str = "SLUICE_FAILPOINT";
/// The value that arms this failpoint.
pub const RETRY_AFTER_FORWARD: &str = "retry-after-forward";

/// Whether this process's environment arms the failpoint.
#[cfg(not(feature = "failpoints"))]
pub fn armed() -> bool {
    false
}

/// Whether this process's environment arms the failpoint.
#[cfg(feature = "failpoints")]
pub fn armed() -> bool {
    let armed = std::env::var(VAR).is_ok_and(|v| v.trim() == RETRY_AFTER_FORWARD);
    if armed {
        tracing::warn!("{VAR}={RETRY_AFTER_FORWARD}: this retry consumer will fail on purpose");
    }
    armed
}

/// Kills this process with SIGKILL (no destructor, no flush, no commit), as `kill -9` from
/// outside would; aborts if the signal could not be sent (never reached without the
/// feature: [`armed`] is false).
pub fn trigger() -> ! {
    #[cfg(feature = "failpoints")]
    kill_self();
    #[cfg(not(feature = "failpoints"))]
    std::process::abort()
}

#[cfg(feature = "failpoints")]
fn kill_self() -> ! {
    tracing::warn!("failpoint {RETRY_AFTER_FORWARD} reached: SIGKILL");
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    // The signal is delivered asynchronously; give it a moment before the fallback.
    std::thread::sleep(Duration::from_secs(5));
    std::process::abort()
}
