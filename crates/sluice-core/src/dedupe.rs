//! De-duplication of a batch before its single upsert.
//!
//! PostgreSQL refuses an `INSERT … ON CONFLICT DO UPDATE` that touches the same row twice
//! (SQLSTATE 21000, "cannot affect row a second time"), which would abort the whole batch.
//! So at most one row per natural key reaches the statement. The survivor is chosen by a
//! `prefer` rule: for reviews the newest `last_synced_at` (the same rule as the monotonic
//! guard in the database), otherwise the later record in the batch.

use std::collections::HashMap;
use std::hash::Hash;

/// The rows that survive de-duplication, in first-seen key order, and how many were dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct Deduped<T> {
    /// One row per key.
    pub rows: Vec<T>,
    /// Rows dropped because another row of the batch had the same key and won.
    pub dropped: usize,
}

/// Keeps one row per key. `replace(current, candidate)` says whether a later `candidate`
/// beats the row kept so far; ties should return `true` so that the later offset wins.
pub fn dedupe_by_key<T, K, FK, FR>(rows: Vec<T>, key: FK, replace: FR) -> Deduped<T>
where
    K: Eq + Hash,
    FK: Fn(&T) -> K,
    FR: Fn(&T, &T) -> bool,
{
    let total = rows.len();
    let mut slot_of: HashMap<K, usize> = HashMap::with_capacity(total);
    let mut kept: Vec<T> = Vec::with_capacity(total);
    for row in rows {
        match slot_of.get(&key(&row)) {
            Some(&slot) => {
                if replace(&kept[slot], &row) {
                    kept[slot] = row;
                }
            }
            None => {
                slot_of.insert(key(&row), kept.len());
                kept.push(row);
            }
        }
    }
    let dropped = total - kept.len();
    Deduped {
        rows: kept,
        dropped,
    }
}

/// The rule "the later record in the batch wins".
pub fn later_wins<T>(_current: &T, _candidate: &T) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn later_record_wins_by_default() {
        let rows = vec![("a", 1), ("b", 2), ("a", 3)];
        let out = dedupe_by_key(rows, |r| r.0, later_wins);
        assert_eq!(out.rows, vec![("a", 3), ("b", 2)]);
        assert_eq!(out.dropped, 1);
    }

    #[test]
    fn newest_version_wins_even_when_it_came_first() {
        // (key, version, offset): the newer version arrives first, an older one after it.
        let rows = vec![("r1", 20, 0), ("r1", 10, 1), ("r2", 5, 2), ("r1", 20, 3)];
        let out = dedupe_by_key(rows, |r| r.0, |cur, cand| cand.1 >= cur.1);
        assert_eq!(out.rows, vec![("r1", 20, 3), ("r2", 5, 2)]);
        assert_eq!(out.dropped, 2);
    }

    proptest! {
        #[test]
        fn one_row_per_key_and_counts_add_up(keys in proptest::collection::vec(0u8..8, 0..200)) {
            let rows: Vec<(u8, usize)> = keys.iter().copied().zip(0..).collect();
            let out = dedupe_by_key(rows.clone(), |r| r.0, later_wins);
            let mut seen = std::collections::HashSet::new();
            for row in &out.rows {
                prop_assert!(seen.insert(row.0));
                // the survivor is the last occurrence of its key
                let last = rows.iter().rev().find(|r| r.0 == row.0).map(|r| r.1);
                prop_assert_eq!(Some(row.1), last);
            }
            prop_assert_eq!(out.rows.len() + out.dropped, rows.len());
        }
    }
}
