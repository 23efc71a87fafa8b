//! De-duplication of a batch before its single upsert.
//!
//! PostgreSQL refuses an `INSERT … ON CONFLICT DO UPDATE` that touches the same row twice
//! (SQLSTATE 21000, "cannot affect row a second time"), which would abort the whole batch.
//! So at most one row per natural key reaches the statement. The survivor is chosen by a
//! rule that must agree with what the database does *across* batches, so that the final
//! table does not depend on where batch boundaries fall:
//!
//! - reviews (`DO UPDATE` with a monotonic guard): the newest `last_synced_at` wins, ties go
//!   to the later record — exactly what two separate batches would leave behind;
//! - `app_stats` and `network_metrics` (`DO NOTHING`): the first delivery wins
//!   ([`earlier_wins`]), because across batches the row written first is never replaced.
//!
//! The other rows of a key are kept as runners-up, best first: if the survivor is rejected
//! at write time (a constraint violation), the next one takes its place, as it would have
//! if the survivor had come in a batch of its own.
//!
//! The survivors come out sorted by natural key, so every writer locks the rows of the keys
//! it shares with another writer in the same order: two writers of one pipeline (or two
//! processes) upserting overlapping keys wait for each other instead of deadlocking (40P01).

use std::collections::HashMap;
use std::hash::Hash;

/// The rows that survive de-duplication, in natural-key order, and the rows they
/// superseded.
#[derive(Debug, Clone, PartialEq)]
pub struct Deduped<T> {
    /// One row per key.
    pub rows: Vec<T>,
    /// Parallel to `rows`: the other rows of the same key, best first. If a surviving row
    /// is rejected at write time, the next best takes its place, so the outcome does not
    /// depend on where batch boundaries fall.
    pub superseded: Vec<Vec<T>>,
}

impl<T> Deduped<T> {
    /// Rows dropped because another row of the batch had the same key and won.
    pub fn dropped(&self) -> usize {
        self.superseded.iter().map(Vec::len).sum()
    }
}

/// Keeps one row per key. `replace(current, candidate)` says whether a later `candidate`
/// beats the row kept so far ([`later_wins`], [`earlier_wins`], or a version comparison).
/// The survivors are sorted by key (the lock order of the upsert).
pub fn dedupe_by_key<T, K, FK, FR>(rows: Vec<T>, key: FK, replace: FR) -> Deduped<T>
where
    K: Eq + Hash + Ord,
    FK: Fn(&T) -> K,
    FR: Fn(&T, &T) -> bool,
{
    let total = rows.len();
    // foldhash, seeded per map: a batch's keys are untrusted, but bounded by the batch size.
    let mut slot_of: HashMap<K, usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(total, foldhash::fast::RandomState::default());
    let mut kept: Vec<T> = Vec::with_capacity(total);
    let mut superseded: Vec<Vec<T>> = Vec::with_capacity(total);
    for row in rows {
        // Each row's key is built once (it may copy text).
        let key = key(&row);
        let Some(&slot) = slot_of.get(&key) else {
            slot_of.insert(key, kept.len());
            kept.push(row);
            superseded.push(Vec::new());
            continue;
        };
        // A slot in the map is an index of `kept` (pushed with it).
        let current = &mut kept[slot];
        let loser = if replace(current, &row) {
            std::mem::replace(current, row)
        } else {
            row
        };
        // Keep the losers best first: before the first one it beats.
        let losers = &mut superseded[slot];
        let at = losers
            .iter()
            .position(|l| replace(l, &loser))
            .unwrap_or(losers.len());
        losers.insert(at, loser);
    }
    let mut kept: Vec<Option<T>> = kept.into_iter().map(Some).collect();
    let mut order: Vec<(K, usize)> = slot_of.into_iter().collect();
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let (rows, superseded) = order
        .into_iter()
        .filter_map(|(_, slot)| {
            let row = kept.get_mut(slot)?.take()?;
            Some((row, std::mem::take(&mut superseded[slot])))
        })
        .unzip();
    Deduped { rows, superseded }
}

/// The rule "the later record in the batch wins" (what `DO UPDATE` does across batches).
pub fn later_wins<T>(_current: &T, _candidate: &T) -> bool {
    true
}

/// The rule "the first delivery wins" (what `DO NOTHING` does across batches).
pub fn earlier_wins<T>(_current: &T, _candidate: &T) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn survivors_come_out_in_key_order_whatever_the_arrival_order() {
        let a = dedupe_by_key(vec![("k2", 1), ("k1", 2), ("k3", 3)], |r| r.0, later_wins);
        let b = dedupe_by_key(vec![("k3", 3), ("k2", 1), ("k1", 2)], |r| r.0, later_wins);
        fn keys(d: &Deduped<(&'static str, i32)>) -> Vec<&'static str> {
            d.rows.iter().map(|r| r.0).collect()
        }
        assert_eq!(keys(&a), ["k1", "k2", "k3"]);
        assert_eq!(keys(&a), keys(&b), "the same lock order in every writer");
    }

    #[test]
    fn later_record_wins_by_default() {
        let rows = vec![("a", 1), ("b", 2), ("a", 3)];
        let out = dedupe_by_key(rows, |r| r.0, later_wins);
        assert_eq!(out.rows, vec![("a", 3), ("b", 2)]);
        assert_eq!(out.superseded, vec![vec![("a", 1)], vec![]]);
        assert_eq!(out.dropped(), 1);
    }

    #[test]
    fn newest_version_wins_even_when_it_came_first() {
        // (key, version, offset): the newer version arrives first, an older one after it.
        let rows = vec![("r1", 20, 0), ("r1", 10, 1), ("r2", 5, 2), ("r1", 20, 3)];
        let out = dedupe_by_key(rows, |r| r.0, |cur, cand| cand.1 >= cur.1);
        assert_eq!(out.rows, vec![("r1", 20, 3), ("r2", 5, 2)]);
        // The runners-up, best first: the other version 20, then the older version 10.
        assert_eq!(out.superseded[0], vec![("r1", 20, 0), ("r1", 10, 1)]);
        assert_eq!(out.dropped(), 2);
    }

    #[test]
    fn earlier_record_wins_for_insert_if_absent_and_the_rest_wait_in_order() {
        let rows = vec![("a", 1), ("b", 2), ("a", 3), ("a", 4)];
        let out = dedupe_by_key(rows, |r| r.0, earlier_wins);
        assert_eq!(out.rows, vec![("a", 1), ("b", 2)]);
        assert_eq!(out.superseded, vec![vec![("a", 3), ("a", 4)], vec![]]);
        assert_eq!(out.dropped(), 2);
    }

    /// A model of a `DO NOTHING` table: each batch is de-duplicated with `rule`, then each
    /// survivor is inserted if its key is absent; a survivor marked `rejected` (it breaks a
    /// constraint at write time) is skipped and its best runner-up tried in its place.
    /// (key, value, rejected at write time)
    type Row = (u8, u32, bool);

    fn insert_if_absent_in_batches(
        rows: &[Row],
        batch_size: usize,
        rule: fn(&Row, &Row) -> bool,
    ) -> std::collections::BTreeMap<u8, u32> {
        let mut table = std::collections::BTreeMap::new();
        for batch in rows.chunks(batch_size) {
            let out = dedupe_by_key(batch.to_vec(), |r| r.0, rule);
            for (survivor, runners_up) in out.rows.into_iter().zip(out.superseded) {
                let written = std::iter::once(survivor)
                    .chain(runners_up)
                    .find(|&(_, _, rejected)| !rejected);
                if let Some((key, value, _)) = written {
                    table.entry(key).or_insert(value);
                }
            }
        }
        table
    }

    #[test]
    fn later_wins_would_make_a_do_nothing_table_depend_on_the_batch_size() {
        let rows = [(1, 10, false), (1, 20, false)];
        let one_by_one = insert_if_absent_in_batches(&rows, 1, later_wins);
        let together = insert_if_absent_in_batches(&rows, 2, later_wins);
        assert_ne!(
            one_by_one, together,
            "the reason DO NOTHING tables use earlier_wins"
        );
        assert_eq!(
            insert_if_absent_in_batches(&rows, 2, earlier_wins),
            one_by_one
        );
    }

    proptest! {
        #[test]
        fn first_delivery_wins_whatever_the_batch_size(
            rows in proptest::collection::vec((0u8..6, 0u32..1000, proptest::bool::weighted(0.2)), 0..60),
            batch_size in 1usize..70,
        ) {
            let one_by_one = insert_if_absent_in_batches(&rows, 1, earlier_wins);
            let batched = insert_if_absent_in_batches(&rows, batch_size, earlier_wins);
            prop_assert_eq!(&batched, &one_by_one);
            // And that table is: per key, the first row that was not rejected.
            let mut first = std::collections::BTreeMap::new();
            for &(key, value, rejected) in &rows {
                if !rejected {
                    first.entry(key).or_insert(value);
                }
            }
            prop_assert_eq!(batched, first);
        }

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
            prop_assert_eq!(out.rows.len() + out.dropped(), rows.len());
            // Runners-up are ordered best (latest) first.
            for losers in &out.superseded {
                prop_assert!(losers.windows(2).all(|w| w[0].1 > w[1].1));
            }
        }
    }
}
