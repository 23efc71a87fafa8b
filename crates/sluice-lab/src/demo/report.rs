//! The demo's report: rows per table, the consumer's totals, dead letters, the reviews rate,
//! the network-metrics latency and the consumer's peak memory.

use super::{DemoArgs, MIN_P99_SAMPLES};
use crate::Failure;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;

/// Prints the report of crawl `crawl`: PostgreSQL's counts, the consumer's log (`--log`)
/// and the latency of the analyzer's messages since `started_at`.
pub(super) async fn report(
    conn: &mut PgConnection,
    args: &DemoArgs,
    crawl: u32,
    started_at: DateTime<Utc>,
    peak_rss_kb: Option<u64>,
) -> Result<(), Failure> {
    println!("\n================ sluice demo report (crawl {crawl}) ================");
    println!("\nrows per table:");
    for (table, n) in sluice_postgres::ops::table_counts(conn).await? {
        println!("  {table:<20} {n:>10}");
    }
    println!("\nthis run, per pipeline (from the consumer's totals):");
    let log = std::fs::read_to_string(&args.log).unwrap_or_default();
    let reviews = print_totals(&log);
    print_dead_letters(conn).await?;
    reviews.print_rate();
    print_latency(conn, started_at).await?;
    match peak_rss_kb {
        Some(kb) => println!(
            "consumer peak memory (VmHWM): {:.1} MiB",
            kb as f64 / 1024.0
        ),
        None => println!("consumer peak memory: unavailable"),
    }
    println!(
        "\nHow to read it: 'inserted' are new rows; 'updated' are reviews whose newer crawl changed them;"
    );
    println!(
        "'skipped' are re-sent duplicates and older versions (no change); dead letters are poison messages,"
    );
    println!(
        "kept with a reason naming the field. A second `make demo` runs the next crawl: updates, no duplicates."
    );
    Ok(())
}

/// The reviews pipeline's committed batches in the consumer's log.
#[derive(Debug, Default)]
struct ReviewBatches {
    /// The first batch's timestamp.
    first: Option<DateTime<Utc>>,
    /// The last batch's timestamp.
    last: Option<DateTime<Utc>>,
    /// Records over every batch.
    records: u64,
}

impl ReviewBatches {
    /// The reviews pipeline's records/s from its first batch to its last, when it had any.
    fn print_rate(&self) {
        if let (Some(first), Some(last)) = (self.first, self.last) {
            let secs = (last - first).num_milliseconds().max(1) as f64 / 1000.0;
            println!(
                "\nreviews pipeline: {} records in {secs:.1} s = {:.0} records/s",
                self.records,
                self.records as f64 / secs
            );
        }
    }
}

/// Prints each "pipeline totals" line of the consumer's JSON `log`; the reviews pipeline's
/// committed batches.
fn print_totals(log: &str) -> ReviewBatches {
    let mut reviews = ReviewBatches::default();
    for line in log.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let field = |k: &str| event.get(k).cloned().unwrap_or(Value::Null);
        match field("message").as_str() {
            Some("pipeline totals") => println!(
                "  {:<16} records {:>7}  inserted {:>7}  updated {:>7}  skipped {:>6}  dead-lettered {:>4}",
                field("pipeline").as_str().unwrap_or("?"),
                field("records"),
                field("inserted"),
                field("updated"),
                field("skipped"),
                field("dead_lettered")
            ),
            Some("batch committed") if field("pipeline").as_str() == Some("reviews") => {
                let at = field("timestamp")
                    .as_str()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc));
                reviews.first = reviews.first.or(at);
                reviews.last = at.or(reviews.last);
                reviews.records += field("records").as_u64().unwrap_or(0);
            }
            _ => {}
        }
    }
    reviews
}

/// Prints the dead letters of every run by topic and kind, with an example each.
async fn print_dead_letters(conn: &mut PgConnection) -> Result<(), Failure> {
    println!("\ndead letters by kind (all runs):");
    let kinds = sluice_postgres::ops::dead_letters_by_kind(conn, &[]).await?;
    if kinds.is_empty() {
        println!("  none");
    }
    for (topic, kind, n, example) in kinds {
        let example: String = example.chars().take(110).collect();
        println!("  {topic:<16} {kind:<20} {n:>5}  e.g. {example}");
    }
    Ok(())
}

/// Prints the produce → insert latency of the network-metrics messages captured since
/// `started_at` (no p99 below `MIN_P99_SAMPLES` messages).
async fn print_latency(conn: &mut PgConnection, started_at: DateTime<Utc>) -> Result<(), Failure> {
    let latency: Option<(f64, f64, f64, i64)> = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.99) WITHIN GROUP (ORDER BY ms),
                max(ms)::float8, count(*)
         FROM (SELECT extract(epoch FROM inserted_at - captured_at)::float8 * 1000 AS ms
               FROM network_metrics WHERE captured_at >= $1) t HAVING count(*) > 0",
    )
    .bind(started_at)
    .fetch_optional(&mut *conn)
    .await?;
    match latency {
        Some((p50, p99, max, n)) if n >= MIN_P99_SAMPLES => println!(
            "network-metrics produce→insert latency over {n} messages during the burst: p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms"
        ),
        // Below 100 samples a 99th percentile is only the maximum under another name.
        Some((p50, _, max, n)) => println!(
            "network-metrics produce→insert latency over {n} messages during the burst: p50 {p50:.0} ms, max {max:.0} ms (too few messages for a p99)"
        ),
        None => println!("network-metrics latency: no messages this run"),
    }
    Ok(())
}
