//! The outbox bench's Markdown table and JSON figures.

use super::latency::Latency;
use super::throughput::Throughput;
use super::{OutboxBenchArgs, TARGET_EVENTS_PER_SECOND, TARGET_P99_MS};
use crate::Failure;
use serde_json::json;

/// Prints the Markdown table; the figures as the JSON file holds them.
pub(super) fn report(
    args: &OutboxBenchArgs,
    t: &Throughput,
    l: &Latency,
) -> Result<serde_json::Value, Failure> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    print_table(args, t, l, cores);
    Ok(results_json(args, t, l, cores))
}

/// The Markdown table and how its figures are measured.
fn print_table(args: &OutboxBenchArgs, t: &Throughput, l: &Latency, cores: usize) {
    let met = t.per_second >= TARGET_EVENTS_PER_SECOND;
    println!(
        "\n## sluice bench outbox — {cores} cores, acks=all, {} partitions, batch size {}\n",
        args.partitions, args.batch_size
    );
    println!("| measure | value | target | met |");
    println!("|---|---|---|---|");
    println!(
        "| enqueue (backlog, one transaction) | {:.0} events/s | | |",
        t.enqueue_per_second
    );
    println!(
        "| sustained dispatch, {} dispatchers, {} events | {:.0} events/s ({:.2} s; {:.2} s wall incl. polling for the end) | ≥ {TARGET_EVENTS_PER_SECOND:.0} events/s | {} |",
        args.dispatchers,
        t.events,
        t.per_second,
        t.seconds,
        t.wall_seconds,
        if met { "yes" } else { "NO" }
    );
    println!(
        "| (the same run after the first batch was marked at {:.2} s) | {:.0} events/s | | |",
        t.first_batch_seconds, t.steady_per_second
    );
    let (mean_batch, claim_ms, publish_ms, mark_ms) = t.per_batch();
    println!(
        "| per batch ({} batches, {mean_batch:.0} events each on average) | claim {claim_ms:.1} / publish {publish_ms:.1} / mark {mark_ms:.1} ms | | |",
        t.phases.batches
    );
    println!(
        "| commit→ack latency at {:.0} events/s offered ({:.0}/s achieved), 1 dispatcher | p50 {:.1} / p99 {:.1} / max {:.1} ms ({} events) | p99 ≤ {TARGET_P99_MS:.0} ms | {} |",
        args.latency_rate,
        l.enqueue_per_second,
        l.p50,
        l.p99,
        l.max,
        l.count,
        if l.p99 <= TARGET_P99_MS { "yes" } else { "NO" }
    );
    println!(
        "\nLatency = published_at − created_at, both PostgreSQL's clock: created_at is the \
         enqueue transaction's start (now()), published_at is set by the statement that \
         records the broker's acknowledgement (acks=all). Throughput = events / (last \
         published_at − the commit of the backlog, clock_timestamp() just before it; the dispatchers \
         were started and idle before)."
    );
}

/// The figures as the JSON file holds them.
fn results_json(
    args: &OutboxBenchArgs,
    t: &Throughput,
    l: &Latency,
    cores: usize,
) -> serde_json::Value {
    let met = t.per_second >= TARGET_EVENTS_PER_SECOND;
    let (mean_batch, claim_ms, publish_ms, mark_ms) = t.per_batch();
    json!({
        "cores": cores,
        "partitions": args.partitions,
        "batch_size": args.batch_size,
        "throughput": {
            "events": t.events,
            "dispatchers": args.dispatchers,
            "keys": args.keys,
            "enqueue_events_per_second": t.enqueue_per_second,
            "seconds": t.seconds,
            "wall_seconds": t.wall_seconds,
            "events_per_second": t.per_second,
            "first_batch_marked_after_seconds": t.first_batch_seconds,
            "events_per_second_after_first_batch": t.steady_per_second,
            "target_events_per_second": TARGET_EVENTS_PER_SECOND,
            "met": met,
            "batches": t.phases.batches,
            "mean_events_per_batch": mean_batch,
            "per_batch_ms": {"claim": claim_ms, "publish": publish_ms, "mark": mark_ms},
        },
        "latency_ms": {
            "offered_rate": args.latency_rate,
            "achieved_rate": l.enqueue_per_second,
            "count": l.count,
            "p50": l.p50,
            "p99": l.p99,
            "max": l.max,
            "target_p99": TARGET_P99_MS,
            "met": l.p99 <= TARGET_P99_MS,
            "definition": "published_at - created_at (PostgreSQL clock; created_at = enqueue transaction start, published_at = ack recorded)",
        },
    })
}
