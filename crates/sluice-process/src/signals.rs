//! Stop signals: SIGTERM and SIGINT end a long-running command after its work in flight.

use crate::Failure;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a stop signal has arrived: the process finishes its work in flight and takes
/// nothing new, so its readiness is 503 from then on (one long-running command a process).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Whether SIGTERM or SIGINT has arrived ([`StopSignals::recv`] returned).
pub fn stopping() -> bool {
    STOPPING.load(Ordering::Relaxed)
}

/// SIGTERM and SIGINT, listened to from the moment a long-running command has a runtime.
///
/// As PID 1 in a container a signal without a handler is ignored, and tokio drops a signal
/// that arrives while no stream listens; so each command installs these once, before its
/// start-up work (migrations, connecting, checking tables), and keeps them to the end: a
/// stop requested during start-up is seen as soon as the command looks.
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopSignals")
    }
}

impl StopSignals {
    /// Installs the handlers; needs the runtime's context (`Runtime::enter` or inside it).
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for the next SIGTERM or SIGINT (one received since the last call counts);
    /// returns its name. From then on the process is [`stopping`].
    pub async fn recv(&mut self) -> &'static str {
        let signal = tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        };
        STOPPING.store(true, Ordering::Relaxed);
        signal
    }
}

/// Runs `task` until it ends or SIGTERM/SIGINT arrives; on a signal, cancels `stop` and waits
/// for the task to finish its work in flight. `what` names the task in logs and errors.
pub async fn run_until_signal<T, E>(
    what: &str,
    signals: &mut StopSignals,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<Result<T, E>>,
) -> Result<T, Failure>
where
    E: Into<anyhow::Error>,
{
    let mut task = task;
    let finished = tokio::select! {
        signal = signals.recv() => {
            tracing::info!("{signal}: {what} finishes the work in flight");
            None
        }
        result = &mut task => Some(result),
    };
    stop.cancel();
    let result = match finished {
        Some(result) => result,
        None => task.await,
    };
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(Failure::from(error.into())),
        Err(join) => Err(anyhow::anyhow!("the {what} task failed: {join}").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    #[test]
    fn a_task_that_ends_hands_back_its_value_and_cancels_the_token() {
        runtime().block_on(async {
            let mut signals = StopSignals::install().expect("signal handlers");
            let stop = CancellationToken::new();
            let task = tokio::spawn(async { Ok::<_, std::io::Error>(7) });
            let value = run_until_signal("test", &mut signals, stop.clone(), task).await;
            assert_eq!(value.expect("the task's value"), 7);
            assert!(stop.is_cancelled());
        });
    }

    #[test]
    fn a_task_that_fails_is_exit_1_and_a_panic_names_the_task() {
        runtime().block_on(async {
            let mut signals = StopSignals::install().expect("signal handlers");
            let task = tokio::spawn(async { Err::<(), _>(std::io::Error::other("broke")) });
            let failure = run_until_signal("test", &mut signals, CancellationToken::new(), task)
                .await
                .expect_err("the task failed");
            assert_eq!(
                (failure.code(), failure.error().to_string()),
                (1, "broke".into())
            );

            let task = tokio::spawn(async { panic!("boom") as Result<(), std::io::Error> });
            let failure =
                run_until_signal("dispatcher", &mut signals, CancellationToken::new(), task)
                    .await
                    .expect_err("the task panicked");
            assert!(
                failure
                    .error()
                    .to_string()
                    .starts_with("the dispatcher task failed"),
                "{}",
                failure.error()
            );
        });
    }
}
