//! The storage bench's Markdown table and JSON file.

use super::cost::{COST_ROUNDS, Compared};

/// This build's drain against an earlier build's (`--baseline-sluice`).
pub(super) struct Baseline {
    /// The baseline executable, as given.
    pub(super) exe: String,
    /// A = this build, B = the baseline.
    pub(super) compared: Compared,
}
use super::{BenchArgs, chart, latency, restart, runlog};
use crate::Failure;
use serde_json::json;
use std::collections::BTreeMap;

/// The machine the bench ran on, for the chart: CPU model, cores, load, date.
pub(super) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!(
        "{cores} cores ({cpu}), load average {load} at the end, {} UTC; Kafka, PostgreSQL and sluice on the same machine",
        chrono::Utc::now().format("%Y-%m-%d %H:%M")
    )
}

/// The rates and ratios of the U/S comparisons.
pub(super) struct Figures {
    pub(super) u: f64,
    pub(super) u_update: f64,
    /// U over 1, 2 and 4 connections at once (first crawl).
    pub(super) connections: super::baselines::Connections,
    pub(super) l: f64,
    pub(super) k: f64,
    pub(super) s: f64,
    pub(super) s_update: f64,
    /// S/U of each (U, S) pair, first crawl.
    pub(super) pair_ratios: Vec<f64>,
    /// Median CPU seconds of `sluice run` per drain: first crawl, second crawl.
    pub(super) cpu: [f64; 2],
    pub(super) with_startup: f64,
    /// Median ms per phase of a full batch (`runlog::PHASES`).
    pub(super) phases: [f64; 5],
    /// The batch-size idea: S medians (insert, update) at 500 and at 1,000 records per
    /// transaction (not measured by a quick bench).
    pub(super) batch_idea: Option<((f64, f64), (f64, f64))>,
    /// S with 1, 2 and 4 writers (own rounds).
    pub(super) writers: super::writers::Writers,
    /// S medians (insert, update) with `synchronous_commit` on (the default) and off
    /// (own pairs).
    pub(super) sync_commit: ((f64, f64), (f64, f64)),
    /// The steady-load phase.
    pub(super) steady: super::steady::Steady,
}

/// What S is held to against U over connections: U over as many connections as the
/// pipeline's writers, at least this share (issue 43's target).
const S_OF_U_WRITERS: f64 = 0.6;
/// The quiet topic's latency samples needed for its p99 target to count (issue 43).
const LATENCY_SAMPLES: usize = 300;
/// `sluice run`'s CPU per drain against an earlier build's (`--baseline-sluice`), at most this
/// share (issue 43: half the CPU per record).
const BASELINE_CPU: f64 = 0.5;

impl Figures {
    /// U over as many connections as S's writers (the default `STORAGE_WRITERS`):
    /// (insert, update).
    fn u_writers(&self) -> (f64, f64) {
        self.connections
            .of(sluice_storage::settings::DEFAULT_WRITERS)
    }
}

/// Every figure of a full run: the report's and the chart's input.
pub(super) struct Results {
    /// The rates and ratios of the U/S comparisons.
    pub(super) figures: Figures,
    /// The network-metrics latency during the reviews drain.
    pub(super) latency: latency::Summary,
    /// The consumer's peak RSS over the S runs and the latency drain, KiB.
    pub(super) rss_kb: u64,
    /// The reviews drain's rows/s while network-metrics flows.
    pub(super) s_with_metrics: f64,
    /// The restart phase.
    pub(super) restart: restart::Restart,
    /// The metrics cost (not measured by a quick bench).
    pub(super) cost: Option<Compared>,
    /// This build against `--baseline-sluice`.
    pub(super) baseline: Option<Baseline>,
    /// The outbox bench's figures (not measured by a quick bench).
    pub(super) outbox: Option<serde_json::Value>,
    /// What the chart draws besides the rates.
    pub(super) timelines: Timelines,
}

/// The chart's series: cumulative (seconds, rows) of the first S and U runs, and L's length.
pub(super) struct Timelines {
    /// The first S run's first crawl.
    pub(super) s: Vec<(f64, u64)>,
    /// The first U run's first crawl.
    pub(super) u: Vec<(f64, u64)>,
    /// Seconds L's `COPY` took.
    pub(super) l_seconds: f64,
}

/// Prints the Markdown table and writes the JSON file (`--out`).
pub(super) fn report(args: &BenchArgs, r: &Results) -> Result<(), Failure> {
    print_header_and_u(args, &r.figures);
    print_s_ideas(args, &r.figures);
    print_drains(&r.figures, r.s_with_metrics);
    print_targets(r);
    let results = results_json(args, r);
    std::fs::write(&args.out, serde_json::to_string_pretty(&results)?)?;
    println!("\nJSON: {}", args.out.display());
    Ok(())
}

/// The title, the table's head, U and the idea of U over two connections.
fn print_header_and_u(args: &BenchArgs, f: &Figures) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "\n## sluice bench — {} reviews, {cores} cores (medians of {} runs per method)\n",
        args.reviews, args.pairs
    );
    println!("| measure | value | ratio / target | met |");
    println!("|---|---|---|---|");
    println!(
        "| U: upsert (UNNEST arrays), no Kafka, first crawl | {:.0} rows/s | | |",
        f.u
    );
    println!(
        "| U_update: the same, second crawl (all updates) | {:.0} rows/s | | |",
        f.u_update
    );
    let c = &f.connections;
    println!(
        "| U₂ / U₄: U over 2 / 4 connections at once, insert (own rounds) | {:.0} / {:.0} rows/s | {:.2} / {:.2} × 1 connection ({:.0}) | |",
        c.two.0,
        c.four.0,
        c.two.0 / c.one.0,
        c.four.0 / c.one.0,
        c.one.0
    );
    println!(
        "| U₂_update / U₄_update: the same, second crawl | {:.0} / {:.0} rows/s | {:.2} / {:.2} × 1 connection ({:.0}) | |",
        c.two.1,
        c.four.1,
        c.two.1 / c.one.1,
        c.four.1 / c.one.1,
        c.one.1
    );
}

/// The rows of S's ideas: batch size, steady load, `synchronous_commit` off, 1, 2 and 4 writers.
fn print_s_ideas(args: &BenchArgs, f: &Figures) {
    let u = f.u;
    if let Some((small, big)) = f.batch_idea {
        println!(
            "| idea: S with 1,000 records per transaction, insert / update (own pairs) | {:.0} / {:.0} rows/s | {:.2} / {:.2} × S at 500 ({:.0} / {:.0}) | |",
            big.0,
            big.1,
            big.0 / small.0,
            big.1 / small.1,
            small.0,
            small.1
        );
    }
    println!(
        "| steady load, {:.0} reviews/s: `sluice run` CPU per record | {:.1} µs | {:.2} × a backlog's ({:.1} µs); {:.1} records per transaction | |",
        f.steady.rate,
        f.steady.cpu_us_per_record(),
        f.steady.cpu_us_per_record() / (f.cpu[0] * 1e6 / args.reviews.max(1) as f64),
        f.cpu[0] * 1e6 / args.reviews.max(1) as f64,
        f.steady.records_per_batch()
    );
    let (on, off) = f.sync_commit;
    println!(
        "| S with `STORAGE_SYNCHRONOUS_COMMIT=off`, insert / update (own pairs) | {:.0} / {:.0} rows/s | {:.2} / {:.2} × on ({:.0} / {:.0}); S/U {:.2}, S_update/U_update {:.2} | |",
        off.0,
        off.1,
        off.0 / on.0,
        off.1 / on.1,
        on.0,
        on.1,
        off.0 / u,
        off.1 / f.u_update
    );
    let w = &f.writers;
    for (i, n) in super::writers::COUNTS.iter().enumerate() {
        let (s, s_update) = w.rates[i];
        let (cu, cu_update) = f.connections.of(*n);
        let (cpu, cpu_update) = w.cpu[i];
        println!(
            "| S with {n} writer(s), insert / update (own rounds) | {s:.0} / {s_update:.0} rows/s | S/U{n} {:.2} / {:.2}; `sluice run` CPU {cpu:.2} / {cpu_update:.2} s; S/U {:.2} | |",
            s / cu,
            s_update / cu_update,
            s / u
        );
    }
}

/// The rows of L, K and S's drains: rates, ratios, CPU, start-up, batch phases.
fn print_drains(f: &Figures, s_with_metrics: f64) {
    let (s, u, l, k) = (f.s, f.u, f.l, f.k);
    println!("| L: binary COPY, unindexed | {l:.0} rows/s | | |");
    println!("| K: count-and-drop consumer | {k:.0} records/s | | |");
    println!(
        "| S: sluice reviews pipeline, first crawl | {s:.0} rows/s | S/U = {:.2}; per pair {} (target ≥ 1.0, stretch 1.5) | {} |",
        s / u,
        f.pair_ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        yes(s >= u)
    );
    println!(
        "| S_update: second crawl | {:.0} rows/s | S_update/U_update = {:.2} (target ≥ 1.0) | {} |",
        f.s_update,
        f.s_update / f.u_update,
        yes(f.s_update >= f.u_update)
    );
    let (uw, uw_update) = f.u_writers();
    let writers = sluice_storage::settings::DEFAULT_WRITERS;
    println!(
        "| S against U over {writers} connections (as many as its writers), insert / update | {:.2} / {:.2} × U{writers} ({uw:.0} / {uw_update:.0} rows/s) | target ≥ {S_OF_U_WRITERS} | {} |",
        s / uw,
        f.s_update / uw_update,
        yes(s >= S_OF_U_WRITERS * uw && f.s_update >= S_OF_U_WRITERS * uw_update)
    );
    println!(
        "| `sluice run` CPU per drain, first crawl / second crawl (medians) | {:.2} / {:.2} s | | |",
        f.cpu[0], f.cpu[1]
    );
    println!("| | | S/L = {:.2}, S/K = {:.2} | |", s / l, s / k);
    println!(
        "| S counting the consumer's start-up (join, first fetch) | {:.0} rows/s | {:.2} × U | |",
        f.with_startup,
        f.with_startup / u
    );
    println!(
        "| per full batch, median ms: {} | {} | | |",
        runlog::PHASES.join(" / "),
        f.phases
            .iter()
            .map(|v| format!("{v:.2}"))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    println!("| reviews while network-metrics flows | {s_with_metrics:.0} rows/s | | |");
}

/// The rows checked against targets: metrics cost, baseline, latency, RSS, restart, outbox.
fn print_targets(r: &Results) {
    if let Some(cost) = &r.cost {
        let cost_ratio = cost.rate_ratio();
        println!(
            "| reviews with /metrics on and scraped every 1 s ({} scrapes; median of {COST_ROUNDS}) | {:.0} rows/s | {cost_ratio:.3} × off ({:.0} rows/s, ABBA order); CPU {:.3} × off; target ≥ 0.97 | {} |",
            cost.scrapes,
            cost.a.rate(),
            cost.b.rate(),
            cost.cpu_ratio(),
            yes(cost_ratio >= 0.97)
        );
    }
    if let Some(baseline) = &r.baseline {
        let c = &baseline.compared;
        println!(
            "| reviews drain, this build vs {} (median of {}) | {:.0} rows/s | {:.3} × baseline ({:.0} rows/s, ABBA order); CPU {:.3} × baseline; target CPU ≤ {BASELINE_CPU} × | {} |",
            baseline.exe,
            c.a.rates.len(),
            c.a.rate(),
            c.rate_ratio(),
            c.b.rate(),
            c.cpu_ratio(),
            yes(c.cpu_ratio() <= BASELINE_CPU),
        );
    }
    let lat = &r.latency;
    println!(
        "| network-metrics p50 / p99 / max during the burst | {:.1} / {:.1} / {:.1} ms ({} msgs) | p99 ≤ 50 ms over ≥ {LATENCY_SAMPLES} | {} |",
        lat.p50,
        lat.p99,
        lat.max,
        lat.count,
        yes(lat.p99 <= 50.0 && lat.count >= LATENCY_SAMPLES)
    );
    let rss_mib = r.rss_kb as f64 / 1024.0;
    println!(
        "| consumer peak RSS | {rss_mib:.1} MiB | ≤ 100 MiB | {} |",
        yes(rss_mib <= 100.0)
    );
    println!(
        "| restart: SIGKILL + restart → first committed batch | {:.2} s | ≤ 5 s (dynamic membership: {}) | {} |",
        r.restart.static_s,
        r.restart
            .dynamic_s
            .map_or("not measured".to_owned(), |d| format!("{d:.2} s")),
        yes(r.restart.static_s <= 5.0)
    );
    if r.outbox.is_some() {
        let (outbox_rate, outbox_p99) = outbox_figures(r.outbox.as_ref());
        println!(
            "| outbox: 3 dispatchers, acks=all | {outbox_rate:.0} events/s | ≥ 25,000 | {} |",
            yes(outbox_rate >= 25_000.0)
        );
        println!(
            "| outbox: commit → ack p99 at 1,000 events/s | {outbox_p99:.1} ms | ≤ 20 ms | {} |",
            yes(outbox_p99 <= 20.0)
        );
    }
}

/// The outbox's events/s (0 when unknown) and commit → ack p99 (NaN when unknown).
fn outbox_figures(outbox: Option<&serde_json::Value>) -> (f64, f64) {
    let outbox_rate = outbox
        .and_then(|o| o["throughput"]["events_per_second"].as_f64())
        .unwrap_or(0.0);
    let outbox_p99 = outbox
        .and_then(|o| o["latency_ms"]["p99"].as_f64())
        .unwrap_or(f64::NAN);
    (outbox_rate, outbox_p99)
}

/// The JSON file's content.
fn results_json(args: &BenchArgs, r: &Results) -> serde_json::Value {
    let mut results = main_json(args, r);
    add_s_ideas_json(args, &r.figures, &mut results);
    add_optional_json(r, &mut results);
    results
}

/// The rates, ratios, CPU, batch phases and targets of every full run.
fn main_json(args: &BenchArgs, r: &Results) -> serde_json::Value {
    let f = &r.figures;
    let (s, u, l, k) = (f.s, f.u, f.l, f.k);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (lat, restart, s_with_metrics) = (&r.latency, &r.restart, r.s_with_metrics);
    let rss_mib = r.rss_kb as f64 / 1024.0;
    json!({
        "reviews": args.reviews,
        "cores": cores,
        "machine": machine(),
        "rows_per_second": {
            "U": u, "U_update": f.u_update, "L": l, "K": k, "S": s, "S_update": f.s_update,
            "U_1_connection": f.connections.one.0, "U_2_connections": f.connections.two.0,
            "U_4_connections": f.connections.four.0,
            "U_update_1_connection": f.connections.one.1,
            "U_update_2_connections": f.connections.two.1,
            "U_update_4_connections": f.connections.four.1,
            "S_including_startup": f.with_startup, "S_with_network_metrics": s_with_metrics,
        },
        "ratios": {
            "S/U": s / u, "S_update/U_update": f.s_update / f.u_update, "S/L": s / l, "S/K": s / k,
            "S/U_per_pair": f.pair_ratios,
            "U_2_connections/U_1_connection": f.connections.two.0 / f.connections.one.0,
            "U_4_connections/U_1_connection": f.connections.four.0 / f.connections.one.0,
            "S/U_writers": s / f.u_writers().0,
            "S_update/U_update_writers": f.s_update / f.u_writers().1,
        },
        "sluice_run_cpu_seconds": {
            "S": f.cpu[0], "S_update": f.cpu[1],
        },
        "batch_phases_ms": runlog::PHASES.iter().copied().zip(f.phases).collect::<BTreeMap<_, _>>(),
        "network_metrics_latency_ms": {"p50": lat.p50, "p99": lat.p99, "max": lat.max, "count": lat.count},
        "peak_rss_mib": rss_mib,
        "restart_to_first_batch_s": restart.static_s,
        "restart_to_first_batch_dynamic_membership_s": restart.dynamic_s,
        "targets": {
            "S>=U": s >= u, "S_update>=U_update": f.s_update >= f.u_update,
            "S>=0.6*U_writers": s >= S_OF_U_WRITERS * f.u_writers().0,
            "S_update>=0.6*U_update_writers": f.s_update >= S_OF_U_WRITERS * f.u_writers().1,
            "p99<=50ms_over_300": lat.p99 <= 50.0 && lat.count >= LATENCY_SAMPLES,
            "rss<=100MiB": rss_mib <= 100.0, "restart<=5s": restart.static_s <= 5.0,
        },
    })
}

/// The writers, steady-load, `synchronous_commit` and batch-size sections.
fn add_s_ideas_json(args: &BenchArgs, f: &Figures, results: &mut serde_json::Value) {
    let (u, w) = (f.u, &f.writers);
    let per_count = |pick: &dyn Fn(usize, usize) -> serde_json::Value| {
        super::writers::COUNTS
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), pick(i, *n)))
            .collect::<serde_json::Map<_, _>>()
    };
    results["writers"] = json!({
        "rows_per_second": per_count(&|i, _| json!({"S": w.rates[i].0, "S_update": w.rates[i].1})),
        "cpu_seconds": per_count(&|i, _| json!({"S": w.cpu[i].0, "S_update": w.cpu[i].1})),
        "ratios": per_count(&|i, n| {
            let (cu, cu_update) = f.connections.of(n);
            json!({"S/U_n": w.rates[i].0 / cu, "S_update/U_update_n": w.rates[i].1 / cu_update, "S/U": w.rates[i].0 / u})
        }),
        "runs": w.runs.iter().map(|(n, i, u)| json!({"writers": n, "S": i, "S_update": u})).collect::<Vec<_>>(),
        "batch_phases_ms": per_count(&|i, _| json!(runlog::PHASES.iter().copied().zip(w.phases[i]).collect::<BTreeMap<_, _>>())),
    });
    let backlog_us = f.cpu[0] * 1e6 / args.reviews.max(1) as f64;
    results["steady"] = json!({
        "rate": f.steady.rate, "records": f.steady.records, "cpu_s": f.steady.cpu_s,
        "cpu_us_per_record": f.steady.cpu_us_per_record(),
        "cpu_us_per_record_backlog": backlog_us,
        "records_per_batch": f.steady.records_per_batch(),
    });
    let (on, off) = f.sync_commit;
    results["synchronous_commit"] = json!({
        "rows_per_second": {"S_on": on.0, "S_update_on": on.1, "S_off": off.0, "S_update_off": off.1},
        "ratios": {"S_off/S_on": off.0 / on.0, "S_update_off/S_update_on": off.1 / on.1,
                   "S_off/U": off.0 / u, "S_update_off/U_update": off.1 / f.u_update},
    });
    if let Some((small, big)) = f.batch_idea {
        results["rows_per_second"]["S_idea_batch_500"] = json!(small.0);
        results["rows_per_second"]["S_idea_batch_500_update"] = json!(small.1);
        results["rows_per_second"]["S_idea_batch_1000"] = json!(big.0);
        results["rows_per_second"]["S_idea_batch_1000_update"] = json!(big.1);
    }
}

/// The metrics cost, baseline and outbox sections, when measured.
fn add_optional_json(r: &Results, results: &mut serde_json::Value) {
    if let Some(cost) = &r.cost {
        results["ratios"]["S_metrics_on/S_metrics_off"] = json!(cost.rate_ratio());
        results["targets"]["metrics_on>=0.97off"] = json!(cost.rate_ratio() >= 0.97);
        results["metrics_cost"] = json!({"off_rows_per_second": cost.b.rate(), "on_scraped_rows_per_second": cost.a.rate(), "off_runs": cost.b.rates, "on_runs": cost.a.rates, "off_cpu_seconds": cost.b.cpu, "on_cpu_seconds": cost.a.cpu, "cpu_on/off": cost.cpu_ratio(), "scrapes": cost.scrapes});
    }
    if let Some(baseline) = &r.baseline {
        let c = &baseline.compared;
        results["baseline"] = json!({"exe": baseline.exe, "this_rows_per_second": c.a.rate(), "baseline_rows_per_second": c.b.rate(), "this_runs": c.a.rates, "baseline_runs": c.b.rates, "this_cpu_seconds": c.a.cpu, "baseline_cpu_seconds": c.b.cpu, "rate_this/baseline": c.rate_ratio(), "cpu_this/baseline": c.cpu_ratio()});
        results["targets"]["cpu<=0.5*baseline"] = json!(c.cpu_ratio() <= BASELINE_CPU);
    }
    if let Some(outbox) = &r.outbox {
        let (outbox_rate, outbox_p99) = outbox_figures(Some(outbox));
        results["outbox"] = outbox.clone();
        results["targets"]["outbox>=25000/s"] = json!(outbox_rate >= 25_000.0);
        results["targets"]["outbox_p99<=20ms"] = json!(outbox_p99 <= 20.0);
    }
}

/// Renders the SVG chart ([`chart::render`]) beside the JSON file (`--out`, `.svg`).
pub(super) fn chart(args: &BenchArgs, r: &Results) -> Result<(), Failure> {
    let (f, t) = (&r.figures, &r.timelines);
    let (s, u, l) = (f.s, f.u, f.l);
    let svg_path = args.out.with_extension("svg");
    let svg = chart::render(
        &format!(
            "sluice bench: {} reviews, S (sluice run) next to U (upsert, no Kafka) and L (COPY)",
            args.reviews
        ),
        &machine(),
        &[
            chart::Series {
                label: format!("S, sluice run ({s:.0} rows/s median)"),
                colour: "#1f77b4",
                points: chart::rate_series(&t.s, 0.25),
            },
            chart::Series {
                label: format!("U, upsert ({u:.0})"),
                colour: "#ff7f0e",
                points: chart::rate_series(&t.u, 0.25),
            },
            chart::Series {
                label: format!("L, COPY ({l:.0})"),
                colour: "#2ca02c",
                points: vec![(0.0, l), (t.l_seconds, l)],
            },
        ],
        &r.latency.samples,
    );
    std::fs::write(&svg_path, svg)?;
    println!("SVG: {}", svg_path.display());
    Ok(())
}

fn yes(ok: bool) -> &'static str {
    if ok { "yes" } else { "NO" }
}
