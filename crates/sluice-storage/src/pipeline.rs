//! The batch loop of one pipeline (docs/ARCHITECTURE.md#batch-loop).
//!
//! Invariant: an offset is committed to Kafka only after the PostgreSQL transaction that
//! holds its batch's effect has committed. No state survives from one poll to the next,
//! so a rebalance in the middle of a batch only means the uncommitted batch is redelivered
//! to whoever gets the partition, and `ON CONFLICT` makes that a no-op.
//!
//! A pipeline is a reader thread (`reader/`: poll, decode, commit offsets) and N writer
//! threads (`writer/pool.rs`, `STORAGE_WRITERS`: one connection and one transaction per batch
//! each), joined by channels. Any free writer takes the next batch of any partition with no
//! batch in flight (`queues.rs`), so a partition's batches are stored one after another in
//! poll order while the other writers store other partitions;
//! the reader decodes the next batches and commits the stored ones meanwhile, so the
//! database — the bottleneck — never waits for Kafka.

use crate::error::{PipelineError, PipelineTotals};
use crate::events::{PipelineFailed, PipelineStopped};
use crate::heartbeat::ReaderLiveness;
use crate::metrics::PipelineMetrics;
use crate::reader::{Polled, ReaderParts, WriterEvent, run_reader};
use crate::selected::{Identity, Pipeline};
use crate::settings::StorageSettings;
use crate::sink::Tables;
use crate::writer::pool::{WriterChannels, WriterParts, run_writers};
use sluice_kafka::BatchConsumer;
use sluice_kafka::config::{ConsumerOptions, ReadAhead};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, mpsc};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs one pipeline until `stop` is cancelled (Ok) or a fatal error (Err).
pub async fn run_pipeline(
    settings: &StorageSettings,
    pipeline: &Pipeline,
    metrics: &PipelineMetrics,
    stop: &CancellationToken,
) -> Result<PipelineTotals, PipelineError> {
    metrics.set_up(true);
    let identity = pipeline.identity();
    let result = match pipeline.tables(settings.app_cache_ttl, settings.registry.as_ref()) {
        Ok(sink) => {
            let sink = Arc::new(sink);
            loop {
                // Each run has its own stop, so that a writer ending it does not stop the
                // other pipelines; a stop of the process stops it too.
                let run = stop.child_token();
                match run_sink(settings, &identity, Arc::clone(&sink), metrics, &run).await {
                    Err(error) if error.restarts() && !stop.is_cancelled() => {
                        tracing::warn!(pipeline = %identity.name, %error,
                            "starting the pipeline again from PostgreSQL's offsets");
                    }
                    other => break other,
                }
            }
        }
        Err(error) => Err(PipelineError::Declared(error)),
    };
    match &result {
        Ok(totals) => PipelineStopped { metrics, totals }.emit(),
        Err(error) => PipelineFailed { metrics, error }.emit(),
    }
    result
}

/// Moves the group's offsets into PostgreSQL if they are not there yet, retrying a database
/// that is down (a pipeline started again right after PostgreSQL crashed finds it coming up).
async fn adopt(
    settings: &StorageSettings,
    pipeline: &Identity,
    admin: &sluice_kafka::Admin,
    stop: &CancellationToken,
) -> Result<(), PipelineError> {
    let mut delays = settings.db_retry.delays();
    loop {
        let attempt = async {
            let mut conn = sluice_postgres::connect(&settings.database_url, &pipeline.name)
                .await
                .map_err(crate::offsets::AdoptError::from)?;
            crate::offsets::adopt_group(&mut conn, admin, &pipeline.group, &pipeline.topics)
                .await?;
            let _ = sqlx::Connection::close(conn).await;
            Ok::<_, crate::offsets::AdoptError>(())
        };
        let error = match attempt.await {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        // A cluster just started answers `NotCoordinator` while `__consumer_offsets` is made.
        let transient = match &error {
            crate::offsets::AdoptError::Database(e) => {
                sluice_postgres::disposition(e) == sluice_core::Disposition::Retry
            }
            crate::offsets::AdoptError::Kafka(e) => {
                sluice_kafka::error::disposition(e) == sluice_core::Disposition::Retry
            }
        };
        match delays.next() {
            Some(delay) if transient && !stop.is_cancelled() => {
                tracing::warn!(pipeline = %pipeline.name, %error, delay_ms = delay.as_millis() as u64,
                    "cannot move the group's offsets into PostgreSQL yet; retrying");
                tokio::time::sleep(delay).await;
            }
            _ => return Err(error.into()),
        }
    }
}

/// Runs one pipeline through `sink`.
async fn run_sink(
    settings: &StorageSettings,
    pipeline: &Identity,
    sink: Arc<Tables>,
    metrics: &PipelineMetrics,
    stop: &CancellationToken,
) -> Result<PipelineTotals, PipelineError> {
    // A typo in a topic name (or a topic not created yet) would otherwise leave a healthy-
    // looking pipeline that consumes nothing forever.
    let Some(admin) = checked_admin(settings, pipeline, stop).await? else {
        tracing::info!(pipeline = %pipeline.name, "stop signal before the pipeline started");
        return Ok(PipelineTotals::default());
    };
    adopt(settings, pipeline, &admin, stop).await?;
    drop(admin);
    let consumer = subscribe(settings, pipeline)?;

    let (to_writers, channels, events) = writer_channels(pipeline.writers);
    let liveness = ReaderLiveness::default();
    let reader = {
        let parts = ReaderParts {
            sink: Arc::clone(&sink),
            name: pipeline.name.clone(),
            consumer,
            batch_size: pipeline.batch_size,
            batch_bytes: pipeline.batch_bytes,
            writers: pipeline.writers,
            poll_timeout: settings.poll_timeout,
            linger: settings.linger,
            to_writers,
            events,
            stop: stop.clone(),
            liveness: liveness.clone(),
            metrics: metrics.clone(),
        };
        std::thread::Builder::new()
            .name(format!("pipeline-{}-kafka", pipeline.name))
            .spawn(move || run_reader(parts))
            .map_err(PipelineError::Thread)?
    };

    // The pipeline's own thread runs nothing else while its writers run.
    let parts = WriterParts {
        settings,
        pipeline,
        sink: &sink,
        metrics,
        stop,
    };
    let written = run_writers(parts, channels, &liveness);
    if written.is_err() {
        // Make the reader stop too; it still commits the batches stored before the error.
        stop.cancel();
    }
    let read = reader
        .join()
        .unwrap_or_else(|_| Err(PipelineError::ReaderPanicked));
    written.and(read)
}

/// How long the pipeline's first metadata request may wait for a broker.
const METADATA_WAIT: Duration = Duration::from_secs(15);

/// Whether `error` is the client finding no broker to ask (a wrong address, a listener of
/// another protocol, a network that drops the connection).
fn is_unreachable(error: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as Code;
    matches!(
        error.rdkafka_error_code(),
        Some(
            Code::BrokerTransportFailure
                | Code::AllBrokersDown
                | Code::OperationTimedOut
                | Code::Resolve
                | Code::SSL
                | Code::Authentication
        )
    )
}

/// A Kafka admin client, once the pipeline's topics are known to exist; `None` when `stop`
/// came first. The check waits up to [`METADATA_WAIT`] for an unreachable broker, on a thread
/// of its own (never joined), so that a stop signal meanwhile ends the process at once.
async fn checked_admin(
    settings: &StorageSettings,
    pipeline: &Identity,
    stop: &CancellationToken,
) -> Result<Option<sluice_kafka::Admin>, PipelineError> {
    let (kafka, identity) = (settings.kafka.clone(), pipeline.clone());
    let (done, checked) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("pipeline-{}-check", pipeline.name))
        .spawn(move || {
            let check = sluice_kafka::Admin::new(&kafka, METADATA_WAIT)
                .map_err(PipelineError::from)
                .and_then(|admin| check_topics(&admin, &identity).map(|()| admin));
            // The receiver is gone only when the stop signal came first.
            let _ = done.send(check);
        })
        .map_err(PipelineError::Thread)?;
    let check = tokio::select! {
        check = checked => check,
        () = stop.cancelled() => return Ok(None),
    };
    let Ok(check) = check else {
        // The thread ended without sending: it panicked.
        return Err(PipelineError::Thread(std::io::Error::other(
            "the topic check's thread ended without an answer",
        )));
    };
    check.map(Some).map_err(|error| match error {
        PipelineError::Kafka(source) if is_unreachable(&source) => {
            PipelineError::KafkaUnreachable(Box::new(crate::error::KafkaUnreachable {
                bootstrap: settings.kafka.bootstrap_servers.clone(),
                seconds: METADATA_WAIT.as_secs(),
                source,
            }))
        }
        other => other,
    })
}

/// Fails if a topic the pipeline names does not exist (a pattern may match nothing yet: its
/// topics are picked up when they are created).
fn check_topics(admin: &sluice_kafka::Admin, pipeline: &Identity) -> Result<(), PipelineError> {
    for topic in pipeline.topics.named() {
        if admin.partition_count(topic)?.is_none() {
            return Err(PipelineError::MissingTopic {
                topic: topic.clone(),
                variable: pipeline.topic_source.clone(),
            });
        }
    }
    Ok(())
}

/// The pipeline's consumer, subscribed to its topics, starting each partition assigned at
/// PostgreSQL's offset (docs/ARCHITECTURE.md#offsets).
fn subscribe(
    settings: &StorageSettings,
    pipeline: &Identity,
) -> Result<BatchConsumer, PipelineError> {
    let starts = crate::offsets::PostgresStarts::new(
        &settings.database_url,
        &pipeline.group,
        settings.auto_offset_reset,
        &settings.kafka,
    );
    let client_id = format!("sluice-{}-{}", pipeline.name, std::process::id());
    let instance = settings.group_instance_id_of(&pipeline.name);
    let consumer = BatchConsumer::subscribe(
        &ConsumerOptions {
            batch_tuning: Some(ReadAhead {
                batch_bytes: pipeline.batch_bytes,
            }),
            client: &settings.kafka,
            group: &pipeline.group,
            auto_offset_reset: settings.auto_offset_reset.as_str(),
            session_timeout: settings.session_timeout,
            max_poll_interval: settings.max_poll_interval,
            client_id: &client_id,
            group_instance_id: instance.as_deref(),
        },
        &pipeline.topics,
        settings.consumer_error_timeout,
        Some(Arc::new(starts)),
    )?;
    tracing::info!(pipeline = %pipeline.name, topics = %pipeline.topics,
        subscribed = ?consumer.subscribed(), group = %pipeline.group,
        group_instance_id = instance.as_deref().unwrap_or("(dynamic)"),
        batch_size = pipeline.batch_size, batch_bytes = pipeline.batch_bytes,
        writers = pipeline.writers, "pipeline started");
    Ok(consumer)
}

/// The channels between the reader and `writers` writers (at least one): the reader's end
/// of the writers' batch channel, each writer's ends, and the reader's end of the reports.
fn writer_channels(
    writers: usize,
) -> (
    crossbeam_channel::Sender<Polled>,
    Vec<WriterChannels>,
    Receiver<WriterEvent>,
) {
    // Any free writer takes the next batch: one per writer waits in the channel while the
    // writers store others; the queues hold at most two more per writer
    // (crates/sluice-storage/src/queues.rs).
    let writers = writers.max(1);
    let (events_tx, events) = mpsc::channel::<WriterEvent>();
    let (to_writers, batches) = crossbeam_channel::bounded::<Polled>(writers);
    let channels = (0..writers)
        .map(|_| WriterChannels {
            batches: batches.clone(),
            events: events_tx.clone(),
        })
        .collect();
    drop(events_tx);
    (to_writers, channels, events)
}
