//! The capture bench's table (Markdown, with sluice's figures against Debezium's measured in
//! the same run, and the goals) and its JSON file.

use super::{CaptureBenchArgs, Measured, TARGET_MEMORY_SHARE, TARGET_P99_MS, TARGET_RATE_RATIO};
use crate::Failure;
use anyhow::anyhow;
use serde_json::json;

/// Prints the table, writes the JSON; an error when the two relayers' events differed.
pub(super) fn report(
    args: &CaptureBenchArgs,
    measured: &[Measured],
    same_events: Option<bool>,
) -> Result<(), Failure> {
    let find = |name: &str| measured.iter().find(|m| m.relayer == name);
    let (debezium, sluice) = (find("debezium"), find("sluice"));
    let ratio = |f: &dyn Fn(&Measured) -> f64| ratio(sluice, debezium, f);
    table(debezium, sluice);
    match same_events {
        Some(true) => println!("\nThe backlog's events were the same for both, key by key."),
        Some(false) => println!("\nThe backlog's events DIFFERED (see above)."),
        None => {}
    }
    println!("machine: {}", super::super::report::machine());
    println!("the Connect worker's JVM: {}", args.connect_jvm);
    let misplaced: usize = measured.iter().map(|m| m.misplaced).sum();
    let json = json!({
        "changes": args.changes,
        "steady_rate": args.rate,
        "steady_seconds": args.seconds,
        "connect_jvm": args.connect_jvm,
        "connector_properties": args.connector,
        "worker_properties": args.worker,
        "machine": super::super::report::machine(),
        "measured": measured,
        "same_events": same_events,
        "ratios": {
            "events_per_second": ratio(&|m| m.events_per_second),
            "peak_rss": ratio(&|m| m.peak_rss_mib),
            "drain_cpu": ratio(&|m| m.drain_cpu_s),
        },
        "targets": {
            "events_per_second_ratio": TARGET_RATE_RATIO,
            "peak_rss_share": TARGET_MEMORY_SHARE,
            "p99_ms": TARGET_P99_MS,
        },
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&json)?)?;
    println!("results: {}", args.out.display());
    if same_events == Some(false) {
        return Err(anyhow!("the relayers' events differed").into());
    }
    if misplaced > 0 {
        return Err(anyhow!(
            "{misplaced} records not in the partition of their key's murmur2 hash"
        )
        .into());
    }
    Ok(())
}

/// A row of the table: its name, the figure, its unit, and the goal with whether sluice met it.
type Row<'a> = (
    &'a str,
    &'a dyn Fn(&Measured) -> f64,
    &'a str,
    Option<(&'a str, bool)>,
);

/// The Markdown table: each figure of both, sluice's over Debezium's, the goals.
fn table(debezium: Option<&Measured>, sluice: Option<&Measured>) {
    println!();
    println!("| | Debezium (Connect) | sluice capture | sluice / Debezium | goal | met |");
    println!("|---|---:|---:|---:|---|---|");
    let cell = |m: Option<&Measured>, f: &dyn Fn(&Measured) -> f64, unit: &str| {
        m.map_or_else(|| "—".to_owned(), |m| format!("{:.1}{unit}", f(m)))
    };
    let ratio = |f: &dyn Fn(&Measured) -> f64| ratio(sluice, debezium, f);
    let rows: [Row<'_>; 8] = [
        (
            "backlog, events/s",
            &|m| m.events_per_second,
            "",
            ratio(&|m| m.events_per_second).map(|r| ("≥ 2 ×", r >= TARGET_RATE_RATIO)),
        ),
        (
            "backlog, CPU-s of the drain",
            &|m| m.drain_cpu_s,
            " s",
            None,
        ),
        (
            "CPU-s from the start to the drain's end",
            &|m| m.total_cpu_s,
            " s",
            None,
        ),
        (
            "steady, commit → Kafka p50",
            &|m| m.latency.p50_ms,
            " ms",
            None,
        ),
        (
            "steady, commit → Kafka p99",
            &|m| m.latency.p99_ms,
            " ms",
            sluice.map(|s| ("≤ 50 ms", s.latency.p99_ms <= TARGET_P99_MS)),
        ),
        (
            "steady, commit → Kafka max",
            &|m| m.latency.max_ms,
            " ms",
            None,
        ),
        ("steady, CPU-s", &|m| m.steady_cpu_s, " s", None),
        (
            "peak RSS",
            &|m| m.peak_rss_mib,
            " MiB",
            ratio(&|m| m.peak_rss_mib).map(|r| ("≤ 1/10", r <= TARGET_MEMORY_SHARE)),
        ),
    ];
    for (name, f, unit, goal) in rows {
        let r = ratio(f).map_or_else(|| "—".to_owned(), |r| format!("{r:.3}"));
        let (goal, met) = goal.map_or(("", ""), |(g, met)| (g, if met { "yes" } else { "no" }));
        println!(
            "| {name} | {} | {} | {r} | {goal} | {met} |",
            cell(debezium, f, unit),
            cell(sluice, f, unit)
        );
    }
}

/// sluice's figure over Debezium's, when both were measured.
fn ratio(
    sluice: Option<&Measured>,
    debezium: Option<&Measured>,
    f: &dyn Fn(&Measured) -> f64,
) -> Option<f64> {
    match (sluice, debezium) {
        (Some(s), Some(d)) if f(d) > 0.0 => Some(f(s) / f(d)),
        _ => None,
    }
}
