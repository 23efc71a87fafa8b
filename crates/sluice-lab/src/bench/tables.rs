//! Many tables (`--tables-pairs N`, issue 45): one backlog over 20 topics of 3 partitions,
//! one table each of the same shape, drained by `sluice run` two ways in ABBA pairs — A, one
//! sink (`topic_pattern` over the 20 topics, `table = "<schema>.{1}"`, `columns = "auto"`,
//! docs/sinks.md#many-tables) against B, 20 sinks (one per topic and table, the same columns
//! listed, or `columns = "auto"` with `--tables-b-columns auto`). Each drain starts from
//! fresh consumer groups into emptied tables and ends when PostgreSQL's offsets cover the
//! backlog; then every table must hold exactly its rows (count and sums of its keys and of a
//! column), so a fast wrong drain fails the bench. Per drain: rows/s from the first record in
//! a pipeline's hands and from the process's start, `sluice run`'s CPU per record (its whole
//! life) and peak RSS (`VmHWM`), its threads at the end.

mod drain;
mod mapping;

use super::Env;
use super::sizes::{letters, produce_values};
use crate::Failure;
use anyhow::anyhow;
use drain::{Drain, Side};
use sluice_kafka::Admin;
use sqlx::PgConnection;
use std::path::PathBuf;

/// Topics, and tables, of the bench.
pub(super) const TABLES: usize = 20;

/// The tables' shape: a key and common types (the records' fields have the same names).
const COLUMNS: &str = "id BIGINT PRIMARY KEY, app TEXT NOT NULL, rating INT NOT NULL, \
    title TEXT, amount NUMERIC(12,2), at TIMESTAMPTZ, helpful BIGINT, verified BOOLEAN";
/// The topic and table names of table `k` (0-based) of the run `env`.
fn names(env: &Env, k: usize) -> (String, String) {
    mapping::names(&env.id, k)
}

/// Record `n` of table `k`: its global id (`n * 20 + k`, so a record in the wrong table
/// shows in the sums) and its JSON value (~220 bytes).
fn record(n: usize, k: usize, block: &str) -> (i64, Vec<u8>) {
    let id = n * TABLES + k;
    let start = (id * 7919) % 60_000;
    let at = chrono::DateTime::from_timestamp(1_764_000_000 + i64::try_from(id).unwrap_or(0), 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    let value = serde_json::json!({
        "id": id, "app": format!("com.bench.app{}", id % 1000), "rating": rating(id),
        "title": &block[start..start + 60], "amount": (id % 1_000_000) as f64 / 100.0,
        "at": at, "helpful": id % 997, "verified": id.is_multiple_of(3),
    });
    (
        i64::try_from(id).unwrap_or(i64::MAX),
        value.to_string().into_bytes(),
    )
}

fn rating(id: usize) -> i64 {
    i64::try_from(id % 5).unwrap_or(0) + 1
}

/// What table `k` holds after a drain: (rows, sum of ids, sum of ratings).
fn expected(k: usize, per_table: &[usize]) -> (i64, i64, i64) {
    (0..per_table[k]).fold((0, 0, 0), |(rows, ids, ratings), n| {
        let id = n * TABLES + k;
        let id64 = i64::try_from(id).unwrap_or(i64::MAX);
        (rows + 1, ids + id64, ratings + rating(id))
    })
}

/// The tables and topics made, `count` records produced over them, `pairs` ABBA pairs of the
/// two sides; prints a table and returns it as JSON. The topics and mapping files are removed
/// whether or not it succeeded (the schema, with the tables, goes in the bench's teardown).
pub(super) async fn run(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    options: &Options<'_>,
) -> Result<serde_json::Value, Failure> {
    let &Options {
        count,
        pairs,
        b_columns,
        a_writers,
    } = options;
    let sides = [one_sink(env, a_writers)?, many_sinks(env, b_columns)?];
    let measured = measure(env, admin, conn, count, pairs, &sides).await;
    for k in 0..TABLES {
        admin.delete_topic(&names(env, k).0).await?;
    }
    for side in &sides {
        let _ = std::fs::remove_file(&side.file);
    }
    let [a, b] = measured?;
    Ok(report(count, b_columns, a_writers, &a, &b))
}

/// What a run of the mode is asked for.
pub(super) struct Options<'a> {
    /// Records over the 20 topics.
    pub(super) count: usize,
    /// ABBA pairs.
    pub(super) pairs: usize,
    /// How the 20 sinks name their columns (`listed` or `auto`).
    pub(super) b_columns: &'a str,
    /// The one sink's writers (`STORAGE_WRITERS`), when not the default.
    pub(super) a_writers: Option<usize>,
}

/// Makes the tables and the topics, produces the backlog and drains it `pairs` times by each
/// side in ABBA order, every table checked after each drain: A's drains and B's.
async fn measure(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    count: usize,
    pairs: usize,
    sides: &[Side; 2],
) -> Result<[Vec<Drain>; 2], Failure> {
    let per_table: Vec<usize> = (0..TABLES)
        .map(|k| count / TABLES + usize::from(k < count % TABLES))
        .collect();
    let block = String::from_utf8(letters(61_000)).map_err(|e| anyhow!("{e}"))?;
    for (k, &records) in per_table.iter().enumerate() {
        let (topic, table) = names(env, k);
        sqlx::raw_sql(&format!("CREATE TABLE {table} ({COLUMNS})"))
            .execute(&mut *conn)
            .await?;
        admin.ensure_topic(&topic, 3).await?;
        produce_values(env, &topic, records, |n| record(n, k, &block).1).await?;
    }
    let truncate = format!(
        "TRUNCATE {}; CHECKPOINT",
        (0..TABLES)
            .map(|k| names(env, k).1)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut runs: [Vec<Drain>; 2] = [Vec::new(), Vec::new()];
    println!(
        "| pair | side | load (1 min) | rows/s | rows/s from start | start-up s | CPU s | CPU µs/record | peak RSS MiB | threads |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for pair in 0..pairs {
        let order = if pair.is_multiple_of(2) {
            [0, 1]
        } else {
            [1, 0]
        };
        for side in order {
            sqlx::raw_sql(&truncate).execute(&mut *conn).await?;
            let load = load_1min();
            let tag = format!("tables-{pair}-{}", ["a", "b"][side]);
            let drained = drain::drain(env, &sides[side], count, &tag).await?;
            verify(env, conn, &per_table, &sides[side]).await?;
            println!(
                "| {pair} | {} | {load} | {:.0} | {:.0} | {:.1} | {:.2} | {:.1} | {:.1} | {} |",
                sides[side].label,
                drained.rate,
                drained.with_startup,
                drained.startup_s,
                drained.cpu_s,
                drained.cpu_s * 1e6 / count as f64,
                drained.rss_mib,
                drained.threads
            );
            runs[side].push(drained);
        }
    }
    Ok(runs)
}

/// The first figure of `/proc/loadavg`.
fn load_1min() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// A: one sink over every topic, each record's table from the pattern's capture; its
/// writers `STORAGE_WRITERS` when given.
fn one_sink(env: &Env, writers: Option<usize>) -> Result<Side, Failure> {
    let file = PathBuf::from(format!(".stack/bench-{}-tables-one.toml", env.id));
    std::fs::write(&file, mapping::one_sink(&env.id, &env.schema))?;
    Ok(Side {
        label: "A one sink",
        file,
        sinks: vec![mapping::ONE_SINK.to_owned()],
        topics: (0..TABLES).map(|k| names(env, k).0).collect(),
        vars: writers
            .map(|w| ("STORAGE_WRITERS", w.to_string()))
            .into_iter()
            .collect(),
    })
}

/// B: a sink per topic and table, its columns listed (or `"auto"`).
fn many_sinks(env: &Env, columns: &str) -> Result<Side, Failure> {
    let file = PathBuf::from(format!(".stack/bench-{}-tables-many.toml", env.id));
    std::fs::write(&file, mapping::many_sinks(&env.id, &env.schema, columns))?;
    Ok(Side {
        label: "B 20 sinks",
        file,
        sinks: (0..TABLES).map(|k| names(env, k).1).collect(),
        topics: (0..TABLES).map(|k| names(env, k).0).collect(),
        vars: Vec::new(),
    })
}

/// Every table holds exactly its records: an error naming the table and the side otherwise.
async fn verify(
    env: &Env,
    conn: &mut PgConnection,
    per_table: &[usize],
    side: &Side,
) -> Result<(), Failure> {
    for k in 0..TABLES {
        let table = names(env, k).1;
        let found: (i64, i64, i64) = sqlx::query_as(&format!(
            "SELECT count(*), coalesce(sum(id), 0)::bigint, coalesce(sum(rating), 0)::bigint \
             FROM {table}"
        ))
        .fetch_one(&mut *conn)
        .await?;
        let want = expected(k, per_table);
        if found != want {
            return Err(anyhow!(
                "{}: table {table} holds (rows, sum of ids, sum of ratings) {found:?}, not {want:?}",
                side.label
            )
            .into());
        }
    }
    Ok(())
}

/// The table's last lines: each side's medians and A against B; the JSON.
fn report(
    count: usize,
    b_columns: &str,
    a_writers: Option<usize>,
    a: &[Drain],
    b: &[Drain],
) -> serde_json::Value {
    let median = |runs: &[Drain], f: fn(&Drain) -> f64| {
        super::median(&runs.iter().map(f).collect::<Vec<_>>())
    };
    let per_record = |d: &Drain| d.cpu_s * 1e6 / d.records as f64;
    // rows/s, rows/s from start, start-up s, CPU µs per record, peak RSS (median, max).
    let figures = |runs: &[Drain]| {
        [
            median(runs, |d| d.rate),
            median(runs, |d| d.with_startup),
            median(runs, |d| d.startup_s),
            median(runs, per_record),
            median(runs, |d| d.rss_mib),
            runs.iter().map(|d| d.rss_mib).fold(0.0, f64::max),
        ]
    };
    let (fa, fb) = (figures(a), figures(b));
    let ratio: [f64; 6] = std::array::from_fn(|i| fa[i] / fb[i]);
    println!();
    println!(
        "| {count} records, {TABLES} tables | rows/s | rows/s from start | start-up s | CPU µs/record | peak RSS MiB (median) | peak RSS MiB (max) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, f) in [("A one sink (median)", fa), ("B 20 sinks (median)", fb)] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
            f[0], f[1], f[2], f[3], f[4], f[5]
        );
    }
    let shown: Vec<String> = ratio.iter().map(|r| format!("{r:.3}")).collect();
    println!("| A / B | {} |", shown.join(" | "));
    println!("{}", super::report::machine());
    let side = |f: [f64; 6], runs: &[Drain]| {
        serde_json::json!({
            "rows_per_second": f[0], "rows_per_second_from_start": f[1], "startup_s": f[2],
            "cpu_us_per_record": f[3], "peak_rss_mib_median": f[4], "peak_rss_mib_max": f[5],
            "runs": runs.iter().map(|d| serde_json::json!({
                "rows_per_second": d.rate, "rows_per_second_from_start": d.with_startup,
                "startup_s": d.startup_s, "cpu_s": d.cpu_s, "peak_rss_mib": d.rss_mib,
                "threads": d.threads,
            })).collect::<Vec<_>>(),
        })
    };
    serde_json::json!({
        "records": count,
        "tables": TABLES,
        "b_columns": b_columns,
        "a_writers": a_writers,
        "a_one_sink": side(fa, a),
        "b_many_sinks": side(fb, b),
        "a_over_b": {"rows_per_second": ratio[0], "rows_per_second_from_start": ratio[1],
                     "startup": ratio[2], "cpu_per_record": ratio[3],
                     "peak_rss_median": ratio[4], "peak_rss_max": ratio[5]},
        "machine": super::report::machine(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_hold_every_column_and_sum_to_what_each_table_is_checked_against() {
        let block = String::from_utf8(letters(61_000)).unwrap_or_default();
        let per_table: Vec<usize> = (0..TABLES).map(|k| 3 + k % 2).collect();
        for (k, &records) in per_table.iter().enumerate() {
            let (mut ids, mut ratings) = (0, 0);
            for n in 0..records {
                let (id, value) = record(n, k, &block);
                let value: serde_json::Value = serde_json::from_slice(&value)
                    .unwrap_or_else(|e| panic!("record {n} of table {k}: {e}"));
                let fields = value.as_object().map(|o| o.len()).unwrap_or(0);
                assert_eq!(fields, mapping::FIELDS.len());
                assert!(mapping::FIELDS.iter().all(|f| !value[*f].is_null()));
                assert_eq!(value["id"].as_i64(), Some(id));
                assert!(
                    value["amount"].is_number(),
                    "a NUMERIC column reads a number"
                );
                ids += id;
                ratings += value["rating"].as_i64().unwrap_or(0);
            }
            let rows = i64::try_from(records).unwrap_or(0);
            assert_eq!(expected(k, &per_table), (rows, ids, ratings));
        }
    }
}
