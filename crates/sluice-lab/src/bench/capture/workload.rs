//! The changes the relayers carry: the table and its publication, the warm-up, the backlog
//! (transactions of 1,000 changes: half inserts, 30 % updates, 20 % deletes, the same
//! statements for every relayer on a table emptied before it starts) and the steady load of
//! the latency phase (one change per transaction, paced).

use super::events::{self, Record};
use super::relayer::{Kind, Relayer, now_ms};
use super::{CaptureBenchArgs, Env};
use crate::Failure;
use anyhow::anyhow;
use serde_json::Value;
use sluice_core::KafkaClientSettings;
use sqlx::{Connection, PgConnection};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Changes per transaction of the backlog.
const TRANSACTION: usize = 1_000;
/// The first id of the steady phase's rows (the backlog's are below it).
const STEADY_IDS: i64 = 1_000_000_000;

/// The table (a numeric, a JSON document, a timestamp with time zone: the logical types a
/// relayer converts) and the publication of it.
pub(super) async fn create(env: &Env) -> Result<(), Failure> {
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA {id};
         CREATE TABLE {table} (
             id bigint PRIMARY KEY,
             name text NOT NULL,
             amount numeric(12,2) NOT NULL,
             tags jsonb NOT NULL,
             seq bigint NOT NULL,
             at timestamptz NOT NULL
         );
         CREATE PUBLICATION {publication} FOR TABLE {table};",
        id = env.id,
        table = env.table(),
        publication = env.publication(),
    ))
    .execute(&mut conn)
    .await?;
    Ok(())
}

/// Empties the table before a relayer starts (its slot, made after, does not see this).
pub(super) async fn empty(env: &Env) -> Result<(), Failure> {
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    sqlx::raw_sql(&format!("TRUNCATE {}", env.table()))
        .execute(&mut conn)
        .await?;
    Ok(())
}

/// Drops the run's slots, topics, publication and schema; what fails is said, not returned (the run's
/// result matters more).
pub(super) async fn drop_all(env: &Env) {
    let result = async {
        let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
        // A relayer stopped by an error or Ctrl-C leaves its slot: its session ends with it.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left: i64 = sqlx::query_scalar(
                "WITH dropped AS (SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE slot_name LIKE $1 || '\\_%' AND NOT active) \
                 SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1 || '\\_%') \
                        - (SELECT count(*) FROM dropped)",
            )
            .bind(&env.id)
            .fetch_one(&mut conn)
            .await?;
            if left == 0 || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for kind in [Kind::Debezium, Kind::Sluice] {
            // Already deleted after a finished measurement.
            let _ = events::delete_topic(&env.kafka, &events::topic(env, kind)).await;
        }
        sqlx::raw_sql(&format!(
            "DROP PUBLICATION IF EXISTS {}; DROP SCHEMA IF EXISTS {} CASCADE",
            env.publication(),
            env.id
        ))
        .execute(&mut conn)
        .await?;
        Ok::<_, Failure>(())
    }
    .await;
    if let Err(e) = result {
        eprintln!("dropping the bench's schema {}: {e:?}", env.id);
    }
}

/// Changes row 0 once a second until a record of it arrives (the relayer streams), then
/// waits until the topic's end stays put for a second; seconds it took.
pub(super) async fn warm_up(
    env: &Env,
    kafka: &KafkaClientSettings,
    topic: &str,
    relayer: &mut Relayer,
) -> Result<f64, Failure> {
    let started = Instant::now();
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    let before: i64 = events::ends(kafka, topic)?.iter().sum();
    for n in 0..180 {
        sqlx::query(&format!(
            "INSERT INTO {} VALUES (0, 'warm-up', 0, '{{}}', $1, now()) \
             ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq",
            env.table()
        ))
        .bind(n)
        .execute(&mut conn)
        .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        relayer.check_alive()?;
        if events::ends(kafka, topic)?.iter().sum::<i64>() > before {
            let mut last = events::ends(kafka, topic)?;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let now = events::ends(kafka, topic)?;
                if now == last {
                    return Ok(started.elapsed().as_secs_f64());
                }
                last = now;
            }
        }
    }
    Err(anyhow!("{}: no warm-up record in 180 s", relayer.kind).into())
}

/// Fails when writing the backlog took near `wal_sender_timeout`: the paused relayer's
/// replication connection may then have been ended by the server, and its reconnection would
/// be inside the measured window.
pub(super) async fn check_pause(env: &Env, write_seconds: f64) -> Result<(), Failure> {
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    let timeout_ms: i64 = sqlx::query_scalar(
        "SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout'",
    )
    .fetch_one(&mut conn)
    .await?;
    println!("   the backlog committed in {write_seconds:.1} s");
    if timeout_ms > 0 && write_seconds * 1000.0 > timeout_ms as f64 * 0.8 {
        return Err(anyhow!(
            "writing the backlog took {write_seconds:.1} s, near wal_sender_timeout ({timeout_ms} ms): \
             fewer --changes"
        )
        .into());
    }
    Ok(())
}

/// What the backlog should bring.
pub(super) struct Expected {
    /// Change events.
    pub(super) events: usize,
    /// Records: the events and a tombstone after each delete.
    pub(super) records: usize,
}

/// Commits `changes` changes in transactions of [`TRANSACTION`]: per transaction, half new
/// rows, 30 % updates of the oldest live rows (which then count as the newest), 20 %
/// deletes of the oldest.
pub(super) async fn backlog(env: &Env, changes: usize) -> Result<Expected, Failure> {
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    let table = env.table();
    let insert = format!(
        "INSERT INTO {table} SELECT g, 'item ' || g || ' ✓', (g % 100000) / 100.0, \
         jsonb_build_object('g', g, 'tags', jsonb_build_array('a', g % 7, null)), g, \
         timestamptz '2026-01-01 00:00:00+00' + g * interval '1 millisecond' \
         FROM generate_series($1::bigint, $2::bigint) g"
    );
    let update = format!(
        "UPDATE {table} SET amount = amount + 1, seq = seq + 1000000, name = name || '+' \
         WHERE id = ANY($1)"
    );
    let delete = format!("DELETE FROM {table} WHERE id = ANY($1)");
    let mut live: VecDeque<i64> = VecDeque::new();
    let (mut next, mut written, mut deletes) = (1i64, 0usize, 0usize);
    while written < changes {
        let size = TRANSACTION.min(changes - written);
        let inserts = size.div_ceil(2);
        let mut tx = conn.begin().await?;
        let last = next + i64::try_from(inserts).unwrap_or(0) - 1;
        sqlx::query(&insert)
            .bind(next)
            .bind(last)
            .execute(&mut *tx)
            .await?;
        live.extend(next..=last);
        next = last + 1;
        let updated: Vec<i64> = (0..(size * 3 / 10).min(live.len()))
            .filter_map(|_| live.pop_front())
            .collect();
        sqlx::query(&update)
            .bind(&updated)
            .execute(&mut *tx)
            .await?;
        live.extend(&updated);
        let deleted: Vec<i64> = (0..(size - inserts - updated.len()).min(live.len()))
            .filter_map(|_| live.pop_front())
            .collect();
        sqlx::query(&delete)
            .bind(&deleted)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        written += inserts + updated.len() + deleted.len();
        deletes += deleted.len();
    }
    Ok(Expected {
        events: written,
        records: written + deletes,
    })
}

/// The latency phase's figures, milliseconds.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Latency {
    pub(super) changes: usize,
    /// Changes per second the writers achieved.
    pub(super) offered_per_second: f64,
    pub(super) p50_ms: f64,
    pub(super) p99_ms: f64,
    pub(super) max_ms: f64,
}

/// One writer's changes: (tag, wall-clock ms when its statement was sent). The tag is the
/// row's new `seq` for an insert or update, minus its id for a delete.
type Sent = Vec<(i64, f64)>;

/// `--rate` changes/s for `--seconds` from `--writers` connections, one change per
/// transaction (2 inserts, 2 updates, 1 delete in every 5); each change's record's append time
/// minus the moment its statement was sent.
pub(super) async fn steady(
    env: &Env,
    args: &CaptureBenchArgs,
    topic: &str,
    relayer: &mut Relayer,
    start: &[i64],
) -> Result<Latency, Failure> {
    let total = (args.rate * args.seconds as f64).round() as usize;
    if total == 0 {
        return Err(Failure::config(anyhow!(
            "--rate × --seconds is no change at all"
        )));
    }
    let writers = args.writers.max(1);
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(1e-3));
    let begin = tokio::time::Instant::now() + Duration::from_millis(200);
    let began = now_ms() + 200.0;
    let mut handles = Vec::new();
    for w in 0..writers {
        let url = env.url.clone();
        let table = env.table();
        handles.push(tokio::spawn(async move {
            let mut conn = sluice_postgres::connect(&url, "bench").await?;
            let ks = (w..total).step_by(writers);
            write_paced(&mut conn, &table, w, ks, |k| begin + interval * k as u32).await
        }));
    }
    let mut sent: HashMap<i64, f64> = HashMap::new();
    let mut deletes = 0;
    for handle in handles {
        let (writer_sent, writer_deletes) = handle.await.map_err(|e| anyhow!("writer: {e}"))??;
        sent.extend(writer_sent);
        deletes += writer_deletes;
    }
    let offered = total as f64 / ((now_ms() - began) / 1000.0);
    let end = events::wait_for(
        &env.kafka,
        topic,
        start,
        total + deletes,
        relayer,
        Duration::from_secs(300),
    )
    .await?;
    let mut latencies = Vec::with_capacity(total);
    events::scan(&env.kafka, topic, start, &end, |record| {
        if let Some(tag) = tag(&record)? {
            let sent = sent
                .get(&tag)
                .ok_or_else(|| anyhow!("a record of change {tag}, which was not sent"))?;
            latencies.push(record.timestamp_ms as f64 - sent);
        }
        Ok(())
    })?;
    if latencies.len() != total {
        return Err(anyhow!("{} of {total} changes came back", latencies.len()).into());
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Ok(Latency {
        changes: total,
        offered_per_second: offered,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
    })
}

/// Writer `w`'s changes `ks`, each at its time; what it sent, and how many deletes.
async fn write_paced(
    conn: &mut PgConnection,
    table: &str,
    w: usize,
    ks: impl Iterator<Item = usize>,
    at: impl Fn(usize) -> tokio::time::Instant,
) -> Result<(Sent, usize), Failure> {
    let mut live: VecDeque<i64> = VecDeque::new();
    let mut next = STEADY_IDS + i64::try_from(w).unwrap_or(0) * 10_000_000;
    let mut sent = Sent::new();
    let mut deletes = 0;
    for k in ks {
        tokio::time::sleep_until(at(k)).await;
        let seq = STEADY_IDS + i64::try_from(k).unwrap_or(0);
        let sent_at = now_ms();
        match k % 5 {
            2 | 3 if !live.is_empty() => {
                let id = live.pop_front().unwrap_or_default();
                sqlx::query(&format!(
                    "UPDATE {table} SET seq = $2, amount = amount + 1 WHERE id = $1"
                ))
                .bind(id)
                .bind(seq)
                .execute(&mut *conn)
                .await?;
                live.push_back(id);
                sent.push((seq, sent_at));
            }
            4 if !live.is_empty() => {
                let id = live.pop_front().unwrap_or_default();
                sqlx::query(&format!("DELETE FROM {table} WHERE id = $1"))
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
                sent.push((-id, sent_at));
                deletes += 1;
            }
            _ => {
                sqlx::query(&format!(
                    "INSERT INTO {table} VALUES ($1, 'steady', 1.5, '{{\"k\": 1}}', $2, now())"
                ))
                .bind(next)
                .bind(seq)
                .execute(&mut *conn)
                .await?;
                live.push_back(next);
                next += 1;
                sent.push((seq, sent_at));
            }
        }
    }
    Ok((sent, deletes))
}

/// The tag of a change event (see [`Sent`]); `None` for a tombstone.
fn tag(record: &Record<'_>) -> Result<Option<i64>, Failure> {
    let Some(value) = record.value else {
        return Ok(None);
    };
    let value: Value = serde_json::from_slice(value)?;
    let payload = value.get("payload").unwrap_or(&value);
    let field = |image: &str, name: &str| {
        payload
            .get(image)
            .and_then(|i| i.get(name))
            .and_then(Value::as_i64)
    };
    let tag = match payload.get("op").and_then(Value::as_str) {
        Some("c" | "u") => field("after", "seq"),
        Some("d") => field("before", "id").map(|id| -id),
        _ => None,
    };
    tag.map(Some)
        .ok_or_else(|| anyhow!("a record that is no change of the steady phase: {value}").into())
}
