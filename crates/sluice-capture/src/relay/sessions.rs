//! Capture sessions one after another until the stop: each connects, makes sure the slot
//! exists (created at the first start, with no snapshot: changes from then on), streams from
//! the slot's confirmed position through the [`Relay`], and ends. A failure a new session
//! may get past (a broken connection, the slot still held by a dead session's walsender, a
//! Kafka delivery that failed) starts one after a back-off (1 s doubling to 30 s, reset
//! after a session that ran a minute); anything else ends the capture, a record Kafka
//! refuses for good too ([`RelayError::disposition`]). A new session re-sends what the last
//! one had not confirmed: duplicates, never a gap.

use super::run::{Relay, RelayError, RelayReport};
use super::state::{SnapshotState, StateTopic};
use crate::Lsn;
use crate::debezium::Envelope;
use crate::error::{CaptureError, sqlstate};
use crate::metrics::CaptureMetrics;
use crate::outbox::RouteError;
use crate::settings::CaptureSettings;
use crate::snapshot::SnapshotCopy;
use crate::source::{Session, SlotSnapshot};
use sluice_core::disposition::Disposition;
use sluice_core::retry::Backoff;
use sluice_kafka::ResilientProducer;
use sqlx::Connection;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Between sessions after a retryable failure.
const BACKOFF: Backoff = Backoff {
    max_attempts: u32::MAX,
    base: Duration::from_secs(1),
    cap: Duration::from_secs(30),
};

/// A session that ran this long resets the back-off.
const HEALTHY: Duration = Duration::from_secs(60);

/// Runs sessions until `stop` is cancelled (then returns what they did) or a failure no
/// new session can get past.
pub async fn capture(
    settings: &CaptureSettings,
    producer: &ResilientProducer,
    metrics: &CaptureMetrics,
    stop: CancellationToken,
) -> Result<RelayReport, RelayError> {
    let envelope = Envelope::new(settings.envelope.clone());
    let mut total = RelayReport::default();
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        let started = Instant::now();
        let ended = session(settings, producer, &envelope, metrics, &stop).await;
        // Only a failure on Kafka carries the wait for it into the next session; any other
        // end (a database failure before or while streaming, another process holding the
        // slot) ends it.
        metrics.session_ended(matches!(ended, Err(RelayError::Kafka { .. })));
        match ended {
            Ok(report) => {
                total.transactions += report.transactions;
                total.records += report.records;
                total.confirmed = report.confirmed.or(total.confirmed);
                failures = 0;
            }
            Err(error) if error.disposition() == Disposition::Retry => {
                if !matches!(error, RelayError::Busy { .. }) {
                    metrics.session_failed();
                }
                failures = if started.elapsed() >= HEALTHY {
                    1
                } else {
                    failures.saturating_add(1)
                };
                let delay = BACKOFF.nominal(failures);
                tracing::warn!(%error, retry_in_ms = delay.as_millis(), "capture session failed; a new one resumes from the slot's confirmed position");
                // What the failed session queued may still be delivered (re-sent again by
                // the next one: a duplicate, in order).
                let _ = producer.flush(Duration::from_secs(5));
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(delay) => {}
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(total)
}

/// One session: the slot (created when missing, with its initial snapshot when wanted), the
/// stream from its confirmed position, the relay until the stop or a failure.
async fn session(
    settings: &CaptureSettings,
    producer: &ResilientProducer,
    envelope: &Envelope,
    metrics: &CaptureMetrics,
    stop: &CancellationToken,
) -> Result<RelayReport, RelayError> {
    let mut catalog = lock_slot(settings).await?;
    publication_exists(settings, &mut catalog).await?;
    outbox_tables_exist(settings, &mut catalog).await?;
    slot_fits(settings, &mut catalog).await?;
    let (state, retake) = match &settings.snapshot {
        Some(topic) => {
            let (state, retake) = snapshot_state(settings, topic, producer, &mut catalog).await?;
            (Some(state), retake)
        }
        None => (None, None),
    };
    let mut session = Session::connect(&settings.source).await?;
    let wanted = state
        .as_ref()
        .map_or(SlotSnapshot::Nothing, |_| SlotSnapshot::Export);
    tracing::info!(
        slot = settings.source.slot(),
        "creating the replication slot unless it exists (a new slot waits for the transactions open now to end)"
    );
    match session.create_slot(false, wanted).await {
        Ok(slot) => {
            tracing::info!(slot = %slot.name, consistent_point = %slot.consistent_point, "replication slot created: changes committed from here on are captured");
            if let (Some(state), Some(exported)) = (&state, &slot.snapshot) {
                let stamp = restart_lsn(&slot.name, &mut catalog).await?;
                let from = (Some(exported.as_str()), stamp);
                let copy = snapshot_copy(&mut catalog, settings, envelope, producer, from);
                initial_snapshot(copy, state, producer).await?;
            }
        }
        Err(CaptureError::Replication(e)) if sqlstate(&e.to_string()) == Some("42710") => {
            // The slot exists: resume from its confirmed position, on a fresh session.
            session = Session::connect(&settings.source).await?;
            if let (Some(state), Some(from)) = (&state, retake) {
                let copy = snapshot_copy(&mut catalog, settings, envelope, producer, (None, from));
                initial_snapshot(copy, state, producer).await?;
            }
        }
        Err(error) => return Err(error.into()),
    }
    let mut stream = session.start().await?;
    tracing::info!(
        slot = settings.source.slot(),
        publication = settings.source.publication(),
        "capture session streaming"
    );
    metrics.streaming(true);
    let report = Relay {
        stream: &mut stream,
        catalog: &mut catalog,
        producer,
        envelope,
        routing: &settings.routing,
        metrics,
        heartbeat: settings.heartbeat,
    }
    .run(stop.cancelled())
    .await;
    metrics.streaming(false);
    let report = report?;
    // The transport reports the confirmed position on its status tick, and ending the
    // session does not report it once more: wait for one tick, or the next session
    // re-sends what this one confirmed last (duplicates, not a loss).
    tokio::time::sleep(settings.source.status_interval() + Duration::from_millis(100)).await;
    if let Err(error) = stream.shutdown().await {
        tracing::warn!(%error, "the replication session did not end cleanly");
    }
    Ok(report)
}

/// The copy of the publication's tables on `catalog`: in the snapshot the slot exported, or
/// (`None`) in one of now, its records stamped with `from`'s position.
fn snapshot_copy<'a>(
    catalog: &'a mut sqlx::PgConnection,
    settings: &'a CaptureSettings,
    envelope: &'a Envelope,
    producer: &'a ResilientProducer,
    (exported, consistent_point): (Option<&'a str>, Lsn),
) -> SnapshotCopy<'a> {
    SnapshotCopy {
        conn: catalog,
        exported,
        consistent_point,
        publication: settings.source.publication(),
        envelope,
        routing: &settings.routing,
        producer,
    }
}

/// The initial snapshot (a slot's first, or one taken again); then `streaming` is recorded.
async fn initial_snapshot(
    copy: SnapshotCopy<'_>,
    state: &StateTopic,
    producer: &ResilientProducer,
) -> Result<(), RelayError> {
    let report = copy.run().await?;
    state
        .record(producer, SnapshotState::Streaming)
        .await
        .map_err(|source| state_topic_error(state, source))?;
    tracing::info!(
        tables = report.tables,
        records = report.records,
        "initial snapshot sent: streaming from the slot's confirmed position"
    );
    Ok(())
}

/// The session's catalog connection, holding the slot's lock: one capture per slot, as a
/// second would take the snapshot beside the first's, or stream the slot during it. The lock is the
/// connection's (session-level), held as long as it.
async fn lock_slot(settings: &CaptureSettings) -> Result<sqlx::PgConnection, RelayError> {
    let connecting = |source| RelayError::Catalog {
        table: "(connecting)".into(),
        source,
    };
    let mut catalog = sqlx::PgConnection::connect(&settings.database_url)
        .await
        .map_err(connecting)?;
    // The catalog's text (a default's expression, a snapshot's values) in the replication
    // session's formats, whatever the server's, database's or role's defaults.
    // (A query without arguments goes as a simple query, several statements in one.)
    sqlx::Executor::execute(
        &mut catalog,
        "SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres'; SET TimeZone = 'UTC'; \
         SET extra_float_digits = 3; SET bytea_output = 'hex'; SET lc_monetary = 'C'",
    )
    .await
    .map_err(connecting)?;
    let held: bool = sqlx::query_scalar(
        "SELECT pg_try_advisory_lock(hashtextextended('sluice capture ' || $1, 0))",
    )
    .bind(settings.source.slot())
    .fetch_one(&mut catalog)
    .await
    .map_err(|source| RelayError::Catalog {
        table: "(the capture's lock)".into(),
        source,
    })?;
    if held {
        Ok(catalog)
    } else {
        Err(RelayError::Busy {
            slot: settings.source.slot().to_owned(),
        })
    }
}

/// The state topic of a capture that snapshots, and the stamp of a copy cut short that is
/// taken again. Before a slot is created, `snapshotting` is recorded, so that a crash at any
/// point after it is known. A slot whose copy was cut short (the last state says
/// `snapshotting`) is kept: its copy is taken again, of the database as it is now, its records
/// stamped with the slot's restart position (before every change it streams), and the stream
/// then starts from its confirmed position (where it has streamed nothing: its consistent
/// point), so that every change since — a delete of a row the first copy sent, above all —
/// follows the copy, as Debezium re-snapshots into the slot it keeps. (The slot was dropped
/// and made anew: the changes between the two slots' points were never sent, and rows the
/// first copy sent and that were deleted meanwhile stayed in every replica.) A slot that lost
/// the WAL it needs (`wal_status = lost`) cannot stream: it is dropped and made anew.
async fn snapshot_state(
    settings: &CaptureSettings,
    topic: &str,
    producer: &ResilientProducer,
    catalog: &mut sqlx::PgConnection,
) -> Result<(StateTopic, Option<Lsn>), RelayError> {
    let slot = settings.source.slot();
    let key = (
        settings.envelope.prefix.as_str(),
        settings.envelope.database.as_str(),
        slot,
    );
    let state = StateTopic::new(&settings.kafka, topic, key);
    let kafka = |source| state_topic_error(&state, source);
    state.ensure().await.map_err(kafka)?;
    let found: Option<(Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT restart_lsn::text, wal_status FROM pg_replication_slots WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_optional(&mut *catalog)
    .await
    .map_err(slot_error)?;
    let retaking = match found {
        Some(_) => state.last().await.map_err(kafka)? == Some(SnapshotState::Snapshotting),
        None => false,
    };
    let restart = match found {
        // The WAL it needs is gone (max_slot_wal_keep_size): only a new slot can stream.
        Some((_, Some(status))) if retaking && status == "lost" => {
            tracing::error!(
                slot,
                "the initial snapshot did not complete and the slot lost the WAL it needs: dropping it to take the snapshot again from a new one (changes between the two are not sent)"
            );
            drop_slot(slot, catalog).await.map_err(slot_error)?;
            None
        }
        Some((restart, _)) if retaking => Some(restart),
        Some(_) => return Ok((state, None)),
        None => None,
    };
    let Some(restart) = restart else {
        state
            .record(producer, SnapshotState::Snapshotting)
            .await
            .map_err(kafka)?;
        return Ok((state, None));
    };
    let from = restart
        .and_then(|lsn| lsn.parse::<Lsn>().ok())
        .ok_or_else(|| {
            slot_error(sqlx::Error::Protocol(format!(
                "slot {slot} has no restart position to take its cut-short snapshot again from"
            )))
        })?;
    tracing::warn!(
        slot,
        %from,
        "the initial snapshot did not complete: taking it again, then streaming from the slot's confirmed position"
    );
    Ok((state, Some(from)))
}

/// A failed read of the replication slot's row in the catalog.
fn slot_error(source: sqlx::Error) -> RelayError {
    RelayError::Catalog {
        table: "(the replication slot)".into(),
        source,
    }
}

/// Drops the replication slot `slot` (when it exists).
async fn drop_slot(slot: &str, catalog: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
         WHERE slot_name = $1",
    )
    .bind(slot)
    .execute(catalog)
    .await
    .map(|_| ())
}

/// The slot's restart position: no change it decodes has an earlier LSN (a transaction
/// open across its consistent point has changes before that point).
async fn restart_lsn(slot: &str, catalog: &mut sqlx::PgConnection) -> Result<Lsn, RelayError> {
    let restart: Option<String> = sqlx::query_scalar(
        "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_optional(&mut *catalog)
    .await
    .map_err(slot_error)?
    .flatten();
    restart
        .and_then(|lsn| lsn.parse::<Lsn>().ok())
        .ok_or_else(|| {
            slot_error(sqlx::Error::Protocol(format!(
                "slot {slot} has no restart position"
            )))
        })
}

/// The publication exists (a missing one would otherwise show only when the first change is
/// decoded, after the slot was made and its snapshot recorded as complete).
async fn publication_exists(
    settings: &CaptureSettings,
    catalog: &mut sqlx::PgConnection,
) -> Result<(), RelayError> {
    let publication = settings.source.publication();
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)")
            .bind(publication)
            .fetch_one(&mut *catalog)
            .await
            .map_err(|source| RelayError::Catalog {
                table: format!("publication {publication}"),
                source,
            })?;
    if exists {
        Ok(())
    } else {
        Err(RelayError::NoPublication {
            publication: publication.to_owned(),
        })
    }
}

/// A slot of `CAPTURE_SLOT`'s name that exists is a logical slot of `pgoutput` in the source
/// database: any other (a physical slot, another decoder's, another database's) would be
/// refused by every session's start, each failure retried as if it might pass.
async fn slot_fits(
    settings: &CaptureSettings,
    catalog: &mut sqlx::PgConnection,
) -> Result<(), RelayError> {
    let slot = settings.source.slot();
    let found: Option<(String, Option<String>, Option<String>, String)> = sqlx::query_as(
        "SELECT slot_type, plugin, database, current_database() FROM pg_replication_slots \
         WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_optional(&mut *catalog)
    .await
    .map_err(slot_error)?;
    let Some((kind, plugin, database, here)) = found else {
        return Ok(());
    };
    let what = if kind != "logical" {
        format!("is a {kind} slot")
    } else if plugin.as_deref() != Some("pgoutput") {
        format!("decodes with {}", plugin.as_deref().unwrap_or("no plugin"))
    } else if database.as_deref() != Some(here.as_str()) {
        format!(
            "belongs to database {}",
            database.as_deref().unwrap_or("(none)")
        )
    } else {
        return Ok(());
    };
    Err(RelayError::ForeignSlot {
        slot: slot.to_owned(),
        what,
        database: here,
    })
}

/// Every table of `CAPTURE_OUTBOX_TABLES` exists: a mistyped name would relay that table's
/// rows as change events (or never see them), silently.
async fn outbox_tables_exist(
    settings: &CaptureSettings,
    catalog: &mut sqlx::PgConnection,
) -> Result<(), RelayError> {
    for table in &settings.routing.outbox_tables {
        let (schema, name) = table.split_once('.').unwrap_or(("", table));
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2)",
        )
        .bind(schema)
        .bind(name)
        .fetch_one(&mut *catalog)
        .await
        .map_err(|source| RelayError::Catalog {
            table: table.clone(),
            source,
        })?;
        if !exists {
            return Err(RouteError::NoSuchTable {
                table: table.clone(),
            }
            .into());
        }
    }
    Ok(())
}

/// A failure of the state topic's client, naming the topic.
fn state_topic_error(state: &StateTopic, source: rdkafka::error::KafkaError) -> RelayError {
    RelayError::StateTopic {
        topic: state.topic().to_owned(),
        source,
    }
}
