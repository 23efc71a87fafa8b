//! The supervisor (docs/ARCHITECTURE.md#supervisor): the process lives while all its pipelines live.
//!
//! One OS thread per pipeline, each with its own single-threaded runtime. They share only
//! the immutable settings and one cancellation token. The first pipeline to fail cancels
//! the token, so the others finish their batch in flight and stop; then the error is
//! returned and the binary exits non-zero. On SIGTERM the caller cancels the token; every
//! pipeline must be gone within the shutdown timeout.

use crate::error::{PipelineError, PipelineTotals};
use crate::metrics::{PipelineMetrics, StorageMetrics};
use crate::pipeline::run_pipeline;
use crate::selected::{Pipeline, Unplanned, plan_pipelines};
use crate::settings::StorageSettings;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why the supervisor returned an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SupervisorError {
    /// A pipeline failed; the others were stopped.
    #[error("pipeline {pipeline} failed: {source}")]
    Pipeline {
        /// Which one.
        pipeline: String,
        /// Why.
        #[source]
        source: PipelineError,
    },
    /// A pipeline's thread or runtime could not be started, or it panicked.
    #[error("pipeline {pipeline} could not run: {reason}")]
    Thread {
        /// Which one.
        pipeline: String,
        /// What happened.
        reason: String,
    },
    /// The seed sinks do not fit the database's schema (or it cannot be read).
    #[error("cannot plan the seed pipelines: {reason}")]
    Plan {
        /// Why.
        reason: String,
    },
    /// Pipelines still running when the shutdown deadline passed.
    #[error("pipelines still running {seconds} s after the stop signal: {pipelines:?}")]
    ShutdownTimeout {
        /// The stragglers.
        pipelines: Vec<String>,
        /// The deadline.
        seconds: u64,
    },
}

type Outcome = (String, Result<PipelineTotals, SupervisorError>);

/// The seed pipelines of `settings`, planned against the live schema of its database.
fn plan_seeds(settings: &StorageSettings) -> Result<Vec<Pipeline>, SupervisorError> {
    let plan_error = |reason: String| SupervisorError::Plan { reason };
    let seeds = Unplanned::seeds(settings).map_err(|e| plan_error(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| plan_error(e.to_string()))?;
    runtime.block_on(async {
        let mut conn = sluice_postgres::connect(&settings.database_url, "sinks-plan")
            .await
            .map_err(|e| plan_error(e.to_string()))?;
        let planned = plan_pipelines(&mut conn, seeds, "")
            .await
            .map_err(|e| plan_error(format!("cannot read the catalog: {e}")))?;
        let _ = sqlx::Connection::close(conn).await;
        planned.map_err(|errors| {
            let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
            plan_error(all.join("; "))
        })
    })
}

/// Runs every seed pipeline of `settings` until `stop` is cancelled or one fails.
pub fn run_pipelines(
    settings: Arc<StorageSettings>,
    metrics: &StorageMetrics,
    stop: CancellationToken,
) -> Result<Vec<(String, PipelineTotals)>, SupervisorError> {
    let pipelines = plan_seeds(&settings)?;
    run_selected(settings, pipelines, metrics, stop)
}

/// Runs `pipelines` until `stop` is cancelled or one fails; each pipeline reports to its own
/// handles of `metrics`.
pub fn run_selected(
    settings: Arc<StorageSettings>,
    pipelines: Vec<Pipeline>,
    metrics: &StorageMetrics,
    stop: CancellationToken,
) -> Result<Vec<(String, PipelineTotals)>, SupervisorError> {
    let (done_tx, done_rx) = mpsc::channel::<Outcome>();
    let mut running: Vec<String> = Vec::new();
    for pipeline in pipelines {
        let identity = pipeline.identity();
        let metrics = metrics.pipeline(&identity.name, &identity.unresolved_kind);
        let spawned = spawn_pipeline(
            identity.name.clone(),
            Arc::clone(&settings),
            pipeline,
            metrics,
            stop.clone(),
            done_tx.clone(),
        );
        match spawned {
            Ok(()) => running.push(identity.name),
            Err(error) => {
                stop.cancel();
                return Err(SupervisorError::Thread {
                    pipeline: identity.name,
                    reason: error.to_string(),
                });
            }
        }
    }
    drop(done_tx);
    await_pipelines(&settings, running, &done_rx, &stop)
}

/// Starts `pipeline` (called `name`) on a thread of its own, with its own single-threaded
/// runtime; the thread sends its outcome to `done` before it ends, panics included.
fn spawn_pipeline(
    name: String,
    settings: Arc<StorageSettings>,
    pipeline: Pipeline,
    metrics: PipelineMetrics,
    token: CancellationToken,
    done: mpsc::Sender<Outcome>,
) -> std::io::Result<()> {
    let spawned = std::thread::Builder::new()
        .name(format!("pipeline-{name}"))
        .spawn(move || {
            let run = || match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime
                    .block_on(run_pipeline(&settings, &pipeline, &metrics, &token))
                    .map_err(|source| SupervisorError::Pipeline {
                        pipeline: name.clone(),
                        source,
                    }),
                Err(error) => Err(SupervisorError::Thread {
                    pipeline: name.clone(),
                    reason: error.to_string(),
                }),
            };
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                .unwrap_or_else(|_| {
                    Err(SupervisorError::Thread {
                        pipeline: name.clone(),
                        reason: "the pipeline thread panicked".into(),
                    })
                });
            // The receiver only disappears if the supervisor itself is gone.
            let _ = done.send((name, outcome));
        });
    spawned.map(|_| ())
}

/// Waits for every pipeline of `running` to report: the first error cancels `stop` (the
/// others finish their batch in flight and stop), and once `stop` is cancelled every
/// pipeline must be gone within the shutdown timeout.
fn await_pipelines(
    settings: &StorageSettings,
    mut running: Vec<String>,
    done_rx: &mpsc::Receiver<Outcome>,
    stop: &CancellationToken,
) -> Result<Vec<(String, PipelineTotals)>, SupervisorError> {
    let mut first_error: Option<SupervisorError> = None;
    let mut totals = Vec::new();
    let mut deadline: Option<Instant> = None;
    while !running.is_empty() {
        if stop.is_cancelled() && deadline.is_none() {
            deadline = Some(Instant::now() + settings.shutdown_timeout);
        }
        let wait = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => std::time::Duration::from_millis(200),
        };
        match done_rx.recv_timeout(wait) {
            Ok((name, outcome)) => {
                running.retain(|k| *k != name);
                match outcome {
                    Ok(t) => totals.push((name, t)),
                    Err(error) => {
                        stop.cancel();
                        first_error.get_or_insert(error);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(SupervisorError::ShutdownTimeout {
                        pipelines: running,
                        seconds: settings.shutdown_timeout.as_secs(),
                    });
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Every thread reports before it ends, panics included; this is unreachable
                // unless a thread was killed from outside.
                stop.cancel();
                for name in running.drain(..) {
                    first_error.get_or_insert(SupervisorError::Thread {
                        pipeline: name,
                        reason: "the pipeline thread ended without reporting".into(),
                    });
                }
            }
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(totals),
    }
}
