//! The tokio runtimes of the commands: a single thread for the short ones, two workers and
//! the stop signals for the long-running ones.

use crate::{Failure, StopSignals};

/// A single-threaded runtime for the commands that do I/O on the main thread.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The runtime of a long-running command (two worker threads) and its stop signals,
/// installed before any start-up work (see [`StopSignals`]).
pub fn service_runtime() -> Result<(tokio::runtime::Runtime, StopSignals), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let signals = {
        let _context = runtime.enter();
        StopSignals::install()?
    };
    Ok((runtime, signals))
}
