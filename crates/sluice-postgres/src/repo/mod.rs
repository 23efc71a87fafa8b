//! Repositories: one batched statement each, on the caller's connection or transaction.

mod dead_letters;

pub use dead_letters::insert_dead_letters;

/// One column of a batch, for an `UNNEST($n::type[])` parameter.
fn column<'a, R, T>(rows: &'a [R], f: impl Fn(&'a R) -> T) -> Vec<T> {
    rows.iter().map(f).collect()
}

use sluice_core::WriteOutcome;

/// Counts the rows of a `RETURNING inserted` statement: returned and `true` = inserted,
/// returned and `false` = updated, not returned = skipped by `ON CONFLICT`.
pub fn outcome(total: usize, returned: &[bool]) -> WriteOutcome {
    let inserted = returned.iter().filter(|i| **i).count() as u64;
    let updated = returned.len() as u64 - inserted;
    WriteOutcome {
        inserted,
        updated,
        skipped: total as u64 - inserted - updated,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_counts_returned_rows() {
        let o = outcome(5, &[true, false, true]);
        assert_eq!(
            o,
            WriteOutcome {
                inserted: 2,
                updated: 1,
                skipped: 2,
                ..Default::default()
            }
        );
        assert_eq!(outcome(0, &[]), WriteOutcome::default());
    }
}
