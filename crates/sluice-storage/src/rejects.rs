//! Log-volume control for rejected records (docs/ARCHITECTURE.md#dead-letters): a batch may reject all 500 of its
//! messages; the first few are logged in detail, the rest as one line grouped by reason.

use sluice_core::DeadLetter;
use std::collections::BTreeMap;

/// Records logged one by one per batch.
pub const DETAILED: usize = 5;

/// The reason without the echoed value: `field `score`: must be …` → `field `score``.
pub fn reason_group(letter: &DeadLetter) -> String {
    let reason = letter.reason.as_str();
    let head = reason.split(": ").next().unwrap_or(reason);
    format!("{} {}", letter.kind, head)
}

/// Groups the letters after the first [`DETAILED`] by kind and field, with counts.
pub fn summarize(letters: &[DeadLetter]) -> BTreeMap<String, usize> {
    let mut groups = BTreeMap::new();
    for letter in letters.iter().skip(DETAILED) {
        *groups.entry(reason_group(letter)).or_insert(0) += 1;
    }
    groups
}

/// Logs the dead letters of one batch.
pub fn log_rejects(pipeline: &str, letters: &[DeadLetter]) {
    for letter in letters.iter().take(DETAILED) {
        tracing::warn!(
            pipeline = %pipeline,
            record = %letter.coords,
            error_kind = %letter.kind,
            reason = %letter.reason,
            "dead-lettered"
        );
    }
    let groups = summarize(letters);
    if !groups.is_empty() {
        let summary: Vec<String> = groups.iter().map(|(g, n)| format!("{g} ×{n}")).collect();
        tracing::warn!(
            pipeline = %pipeline,
            more = letters.len() - DETAILED,
            summary = %summary.join("; "),
            "more records dead-lettered in this batch"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{DeadLetterKind, RecordCoords};

    fn letter(offset: i64, kind: DeadLetterKind, reason: &str) -> DeadLetter {
        let coords = RecordCoords {
            topic: "t".into(),
            partition: 0,
            offset,
        };
        DeadLetter::new(coords, None, Some(b"x"), None, kind, reason)
    }

    #[test]
    fn only_records_past_the_detailed_ones_are_grouped() {
        let mut letters: Vec<DeadLetter> = (0..5)
            .map(|i| letter(i, DeadLetterKind::DecodeError, "field `score`: must be 1-5"))
            .collect();
        assert!(summarize(&letters).is_empty());
        letters.push(letter(
            5,
            DeadLetterKind::DecodeError,
            "field `score`: must be 1-5, got 9",
        ));
        letters.push(letter(
            6,
            DeadLetterKind::DecodeError,
            "field `score`: must be 1-5, got 0",
        ));
        letters.push(letter(
            7,
            DeadLetterKind::UnknownApplication,
            "field `package_name`: x",
        ));
        let groups = summarize(&letters);
        assert_eq!(groups.get("decode_error field `score`"), Some(&2));
        assert_eq!(
            groups.get("unknown_application field `package_name`"),
            Some(&1)
        );
        assert_eq!(groups.len(), 2);
    }
}
