//! Test-only fault injection: `SLUICE_FAILPOINT=storage-after-db-commit:N` makes `sluice run`
//! SIGKILL its own process when the N-th batch of the process has committed in PostgreSQL and
//! before its offsets are committed to Kafka — the window that re-applied batches before the
//! offsets moved into PostgreSQL. Unset, empty or any other value: no fault. Never set it in
//! production.
//!
//! Only builds with the `failpoints` feature read the variable; without it [`after_db_commit`]
//! is always `None` and nothing here kills.

/// The environment variable (shared with the dispatcher's and the retry tiers' failpoints).
pub const VAR: &str = "SLUICE_FAILPOINT";
/// The prefix of the value that arms this failpoint.
pub const AFTER_DB_COMMIT: &str = "storage-after-db-commit:";

/// The batch (1-based, counted over the process) after whose database commit the process
/// kills itself, if the environment arms the failpoint.
#[cfg(feature = "failpoints")]
pub fn after_db_commit() -> Option<u64> {
    let value = std::env::var(VAR).ok()?;
    let n = value.trim().strip_prefix(AFTER_DB_COMMIT)?.parse().ok()?;
    tracing::warn!(
        batch = n,
        "{VAR}={value}: this process kills itself on purpose"
    );
    Some(n)
}

/// Never armed without the `failpoints` feature.
#[cfg(not(feature = "failpoints"))]
pub fn after_db_commit() -> Option<u64> {
    None
}

/// Kills this process with SIGKILL (no destructor, no flush, no commit), as `kill -9` from
/// outside would; aborts if the signal could not be sent.
pub fn kill_self() -> ! {
    tracing::warn!("failpoint reached: SIGKILL");
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    // The signal is delivered asynchronously; give it a moment before the fallback.
    std::thread::sleep(std::time::Duration::from_secs(5));
    std::process::abort()
}
