//! Record sizes (`--sizes-pairs N`): records of ~1 KB, ~100 KB and ~900 KB, produced
//! uncompressed to a 3-partition topic, drained by `sluice run` through one declared
//! always-update sink with the defaults (a table `(id int primary key, v text)`, or `v jsonb`
//! with `--sizes-column jsonb`): each drain's rows/s and `sluice run`'s peak RSS
//! (docs/ARCHITECTURE.md#memory). With `--baseline-sluice`, each size is drained by this build
//! and by the baseline in ABBA pairs and the medians are compared.

use super::Env;
use super::drain::{Stored, check_alive, run_command, stop_run, wait_joined, wait_stored};
use crate::Failure;
use anyhow::anyhow;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sluice_kafka::Admin;
use sqlx::PgConnection;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// (records, bytes each): the sizes of issue 41's table.
pub(super) const SIZES: [(usize, usize); 3] =
    [(200_000, 1024), (5_000, 100 * 1024), (1_000, 900 * 1024)];

/// One drain of one topic by one build.
#[derive(Debug, Clone, Copy)]
pub(super) struct Drain {
    /// Rows per second from the group's join to the last record stored.
    pub(super) rate: f64,
    /// `sluice run`'s peak RSS, MiB.
    pub(super) rss_mib: f64,
    /// `sluice run`'s CPU seconds (user + system) over its whole life.
    pub(super) cpu_s: f64,
}

/// One drain's topic, table and sink file.
pub(super) struct Size {
    /// Records produced.
    pub(super) count: usize,
    /// Bytes each.
    pub(super) bytes: usize,
    /// The table's and the sink's name (`docs<KiB>`).
    pub(super) name: String,
    /// The topic the records are in.
    pub(super) topic: String,
    /// The sinks file `sluice run` reads.
    pub(super) file: PathBuf,
}

/// Every size, `pairs` drains by each build (ABBA order when there is a baseline); prints a
/// table and returns it as JSON.
pub(super) async fn run(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    pairs: usize,
    base_env: Option<&Env>,
    column: &str,
) -> Result<serde_json::Value, Failure> {
    let mut table = Vec::new();
    println!(
        "| records | size ({column}) | this rows/s | this peak RSS | baseline rows/s | baseline peak RSS | this/baseline |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (count, bytes) in SIZES {
        let size = Size::prepare(env, base_env, admin, conn, column, (count, bytes)).await?;
        let (this, base) = drain_pairs(env, base_env, admin, conn, &size, pairs).await?;
        table.push(size.row(column, &this, &base));
        admin.delete_topic(&size.topic).await?;
        let _ = std::fs::remove_file(&size.file);
    }
    Ok(serde_json::Value::Array(table))
}

/// `pairs` drains of `size` by this build and as many by the baseline (when there is one),
/// in ABBA order, each into an emptied table: (this build's, the baseline's).
async fn drain_pairs(
    env: &Env,
    base_env: Option<&Env>,
    admin: &Admin,
    conn: &mut PgConnection,
    size: &Size,
    pairs: usize,
) -> Result<(Vec<Drain>, Vec<Drain>), Failure> {
    let name = &size.name;
    let (mut this, mut base) = (Vec::new(), Vec::new());
    for pair in 0..pairs {
        let order: [bool; 2] = if pair.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for is_this in order {
            let side = if is_this { Some(env) } else { base_env };
            let Some(side) = side else { continue };
            let schema = &side.schema;
            sqlx::raw_sql(&format!("TRUNCATE {schema}.{name}; CHECKPOINT"))
                .execute(&mut *conn)
                .await?;
            let tag = format!("{name}-{pair}-{}", if is_this { "a" } else { "b" });
            let drained = drain(side, admin, size, &tag).await?;
            if is_this { &mut this } else { &mut base }.push(drained);
        }
    }
    Ok((this, base))
}

impl Size {
    /// The topic (produced), the table `(id, v <column>)` (in the baseline's schema too) and
    /// the sinks file of `count` records of `bytes` each.
    async fn prepare(
        env: &Env,
        base_env: Option<&Env>,
        admin: &Admin,
        conn: &mut PgConnection,
        column: &str,
        (count, bytes): (usize, usize),
    ) -> Result<Size, Failure> {
        let name = format!("docs{}", bytes / 1024);
        let topic = format!("{}-{name}", env.id);
        admin.ensure_topic(&topic, 3).await?;
        for schema in std::iter::once(env).chain(base_env).map(|e| &e.schema) {
            sqlx::raw_sql(&format!(
                "CREATE TABLE {schema}.{name} (id INT PRIMARY KEY, v {column} NOT NULL)"
            ))
            .execute(&mut *conn)
            .await?;
        }
        produce(env, &topic, count, bytes).await?;
        let file = PathBuf::from(format!(".stack/bench-{}-{name}.toml", env.id));
        std::fs::write(
            &file,
            format!(
                "[[sink]]\nname = \"{name}\"\ntopic = \"{topic}\"\ntable = \"{name}\"\n\
                 key = [\"id\"]\nconflict = \"always-update\"\n[sink.columns]\n\
                 id = {{ field = \"id\" }}\nv = {{ field = \"v\" }}\n"
            ),
        )?;
        Ok(Size {
            count,
            bytes,
            name,
            topic,
            file,
        })
    }

    /// The size's line of the table, printed, and as JSON.
    fn row(&self, column: &str, this: &[Drain], base: &[Drain]) -> serde_json::Value {
        let (count, size) = (self.count, self.bytes);
        let median_of = |runs: &[Drain], f: fn(&Drain) -> f64| {
            super::median(&runs.iter().map(f).collect::<Vec<_>>())
        };
        let peak_of = |runs: &[Drain]| runs.iter().map(|d| d.rss_mib).fold(0.0, f64::max);
        let this_rate = median_of(this, |d| d.rate);
        let (base_rate, base_rss) = if base.is_empty() {
            (f64::NAN, f64::NAN)
        } else {
            (median_of(base, |d| d.rate), peak_of(base))
        };
        println!(
            "| {count} | {} KiB | {this_rate:.0} | {:.1} MiB | {base_rate:.0} | {base_rss:.1} MiB | {:.3} |",
            size / 1024,
            peak_of(this),
            this_rate / base_rate
        );
        serde_json::json!({
            "records": count,
            "bytes_each": size,
            "column": column,
            "this": {"rows_per_second": this_rate, "peak_rss_mib": peak_of(this),
                     "runs": this.iter().map(|d| [d.rate, d.rss_mib]).collect::<Vec<_>>()},
            "baseline": (!base.is_empty()).then(|| serde_json::json!({
                "rows_per_second": base_rate, "peak_rss_mib": base_rss,
                "runs": base.iter().map(|d| [d.rate, d.rss_mib]).collect::<Vec<_>>()})),
            "ratio": (!base.is_empty()).then_some(this_rate / base_rate),
        })
    }
}

/// One drain of `size` by `env.sluice`: a fresh group, from its join until every record is
/// stored.
pub(super) async fn drain(
    env: &Env,
    admin: &Admin,
    size: &Size,
    tag: &str,
) -> Result<Drain, Failure> {
    let count = size.count;
    let prefix = format!("{}-{tag}", env.id);
    let log = PathBuf::from(format!(".stack/bench-{tag}.log"));
    let mut cmd = run_command(env, &prefix, tag, &log)?;
    cmd.env("SLUICE_SINKS_FILE", &size.file);
    let mut child = cmd.spawn()?;
    let group = format!("{prefix}.{}", size.name);
    wait_joined(admin, std::slice::from_ref(&group), &mut child, &log).await?;
    let started = Instant::now();
    let end = i64::try_from(count).unwrap_or(i64::MAX);
    let timeout = Some(Duration::from_secs(600));
    let goal = Stored {
        group: &group,
        topic: &size.topic,
        end,
    };
    wait_stored(env, goal, &mut child, &log, timeout).await?;
    let elapsed = started.elapsed();
    check_alive(&mut child, &log)?;
    let rss_kb = crate::demo::peak_rss_kb(child.id()).unwrap_or(0);
    let cpu_s = super::drain::cpu_seconds(child.id()).unwrap_or(0.0);
    stop_run(&mut child, &log)?;
    Ok(Drain {
        rate: count as f64 / elapsed.as_secs_f64(),
        rss_mib: rss_kb as f64 / 1024.0,
        cpu_s,
    })
}

/// Produces `count` records of about `size` bytes, uncompressed (`{"id": n, "v": "<letters>"}`,
/// each a different window of one block of pseudo-random letters).
async fn produce(env: &Env, topic: &str, count: usize, size: usize) -> Result<(), Failure> {
    let block = letters(size + 65_536);
    produce_values(env, topic, count, |id| {
        let head = format!(r#"{{"id": {id}, "v": ""#);
        let start = (id * 7919) % 65_536;
        let body = &block[start..start + size.saturating_sub(head.len() + 2).max(1)];
        let mut value = Vec::with_capacity(size + 2);
        value.extend_from_slice(head.as_bytes());
        value.extend_from_slice(body);
        value.extend_from_slice(b"\"}");
        value
    })
    .await
}

/// `n` pseudo-random lower-case letters (the same every run).
pub(super) fn letters(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect()
}

/// Produces `count` records, uncompressed, keyed by their number, the values `value_of`
/// makes of it.
pub(super) async fn produce_values(
    env: &Env,
    topic: &str,
    count: usize,
    mut value_of: impl FnMut(usize) -> Vec<u8>,
) -> Result<(), Failure> {
    let producer: FutureProducer = sluice_kafka::config::admin_config(&env.settings.kafka)
        .set("compression.type", "none")
        .set("linger.ms", "5")
        .create()?;
    let mut pending = Vec::new();
    for id in 0..count {
        let value = value_of(id);
        let key = id.to_string();
        let mut record = FutureRecord::to(topic)
            .key(key.as_bytes())
            .payload(value.as_slice());
        loop {
            match producer.send_result(record) {
                Ok(delivery) => {
                    pending.push(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((error, _)) => return Err(anyhow!("produce to {topic}: {error}").into()),
            }
        }
        if pending.len() >= 2_000 {
            for delivery in pending.drain(..) {
                wait_delivered(delivery, topic).await?;
            }
        }
    }
    for delivery in pending {
        wait_delivered(delivery, topic).await?;
    }
    Ok(())
}

async fn wait_delivered(
    delivery: rdkafka::producer::DeliveryFuture,
    topic: &str,
) -> Result<(), Failure> {
    match delivery.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((error, _))) => Err(anyhow!("produce to {topic}: {error}").into()),
        Err(_) => Err(anyhow!("produce to {topic}: delivery cancelled").into()),
    }
}
