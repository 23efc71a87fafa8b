//! What the bench reads back from the JSON log of a `sluice run` child: the reviews
//! pipeline's `batch committed` lines (time, counters, per-phase timings).

use chrono::{DateTime, Utc};
use std::path::Path;

/// One committed batch of the reviews pipeline.
#[derive(Debug, Clone)]
pub struct Batch {
    /// When it was logged (after its offset commit).
    pub at: DateTime<Utc>,
    /// Records in the batch.
    pub records: u64,
    /// Rows it updated.
    pub updated: u64,
    /// Microseconds per phase: poll, decode, writer wait, store, commit.
    pub phases_us: [u64; 5],
}

/// The names of [`Batch::phases_us`], as logged (without `_us`).
pub const PHASES: [&str; 5] = ["poll", "decode", "writer_wait", "store", "commit"];

/// The reviews pipeline's committed batches in `log`, in order.
pub fn batches(log: &Path) -> Vec<Batch> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["message"] == "batch committed" && e["pipeline"] == "reviews")
        .filter_map(|e| {
            let at = DateTime::parse_from_rfc3339(e["timestamp"].as_str()?).ok()?;
            let phase = |name: &str| e[format!("{name}_us")].as_u64().unwrap_or(0);
            Some(Batch {
                at: at.with_timezone(&Utc),
                records: e["records"].as_u64().unwrap_or(0),
                updated: e["updated"].as_u64().unwrap_or(0),
                phases_us: PHASES.map(phase),
            })
        })
        .filter(|b| b.records > 0)
        .collect()
}

/// When the pipeline first had records in hand: the first batch's log time minus the
/// phases it went through after its poll returned.
pub fn first_data_at(batches: &[Batch]) -> Option<DateTime<Utc>> {
    let first = batches.first()?;
    let [_, decode, _, store, commit] = first.phases_us;
    let spent = i64::try_from(decode + store + commit).unwrap_or(0);
    Some(first.at - chrono::Duration::microseconds(spent))
}

/// Cumulative (seconds since `start`, records done) after each batch.
pub fn timeline(batches: &[Batch], start: DateTime<Utc>) -> Vec<(f64, u64)> {
    let mut done = 0;
    batches
        .iter()
        .map(|b| {
            done += b.records;
            let s = (b.at - start).num_microseconds().unwrap_or(0) as f64 / 1e6;
            (s.max(0.0), done)
        })
        .collect()
}

/// The median of each phase over `batches`, milliseconds (full-size batches only, so the
/// tail of a drain does not skew it).
pub fn phase_medians_ms(batches: &[Batch], full: u64) -> [f64; 5] {
    let full: Vec<&Batch> = batches.iter().filter(|b| b.records >= full).collect();
    std::array::from_fn(|i| {
        let values: Vec<f64> = full
            .iter()
            .map(|b| b.phases_us[i] as f64 / 1000.0)
            .collect();
        super::median(&values)
    })
}
