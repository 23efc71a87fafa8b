//! The TTL cache in front of a resolver's `WHERE key = ANY($1)` query: which keys of a batch
//! it answers and which distinct keys must be asked for. No negative caching: only found
//! keys are inserted, so a key registered a moment ago is found on the next batch. Keys are
//! hashed with foldhash (seeded per process): SipHash was most of a lookup's cost.

use foldhash::fast::RandomState;
use moka::sync::Cache;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What one `resolve` call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResolveStats {
    /// Distinct keys answered by the cache.
    pub cache_hits: usize,
    /// Distinct keys sent to the database (0 means no query ran).
    pub queried: usize,
    /// Keys the database knew.
    pub found: usize,
}

/// Keys found, with their values.
pub type Found<V> = HashMap<String, V, RandomState>;

/// A batch's keys split by the cache.
#[derive(Debug)]
pub(crate) struct Split<V> {
    /// The cached values of the keys it knew.
    pub(crate) found: Found<V>,
    /// The distinct keys it did not know, in first-seen order.
    pub(crate) missing: Vec<String>,
    /// `cache_hits` counted; `queried` = the missing keys.
    pub(crate) stats: ResolveStats,
}

/// A bounded TTL cache of found keys.
#[derive(Debug)]
pub(crate) struct KeyCache<V: Clone + Send + Sync + 'static> {
    cache: Cache<String, V, RandomState>,
}

impl<V: Clone + Send + Sync + 'static> KeyCache<V> {
    /// Entries live `ttl`; at most a million are kept.
    pub(crate) fn new(ttl: Duration) -> Self {
        let cache = Cache::builder()
            .max_capacity(1_000_000)
            .time_to_live(ttl)
            .build_with_hasher(RandomState::default());
        Self { cache }
    }

    /// Splits `keys` (repeats counted once) into cached values and misses.
    pub(crate) fn split<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> Split<V> {
        let keys = keys.into_iter();
        // A filtered batch's lower bound is 0; its upper bound is the batch (capped: an
        // iterator may not know its end).
        let room = keys.size_hint().1.unwrap_or(0).min(1 << 16);
        let mut found = HashMap::with_capacity_and_hasher(room, RandomState::default());
        let mut missing = Vec::new();
        let mut seen: HashSet<&str, RandomState> =
            HashSet::with_capacity_and_hasher(room, RandomState::default());
        let mut stats = ResolveStats::default();
        for key in keys {
            if !seen.insert(key) {
                continue;
            }
            match self.cache.get(key) {
                Some(value) => {
                    stats.cache_hits += 1;
                    found.insert(key.to_owned(), value);
                }
                None => missing.push(key.to_owned()),
            }
        }
        stats.queried = missing.len();
        Split {
            found,
            missing,
            stats,
        }
    }

    /// Adds what the database answered to the cache and to `split`'s result.
    pub(crate) fn found(&self, split: &mut Split<V>, rows: impl IntoIterator<Item = (String, V)>) {
        for (key, value) in rows {
            split.stats.found += 1;
            self.cache.insert(key.clone(), value.clone());
            split.found.insert(key, value);
        }
    }

    /// Forgets one key.
    pub(crate) fn forget(&self, key: &str) {
        self.cache.invalidate(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_count_once_and_only_found_keys_are_cached() {
        let cache = KeyCache::<i64>::new(Duration::from_secs(60));
        let mut split = cache.split(["a", "b", "a"]);
        assert_eq!(split.missing, ["a", "b"]);
        assert_eq!(split.stats.queried, 2);
        cache.found(&mut split, [("a".to_owned(), 1)]);
        assert_eq!(split.stats.found, 1);
        assert_eq!(split.found.get("a"), Some(&1));
        let again = cache.split(["a", "b"]);
        assert_eq!(again.stats.cache_hits, 1);
        assert_eq!(again.missing, ["b"]);
        cache.forget("a");
        assert_eq!(cache.split(["a"]).missing, ["a"]);
    }
}
