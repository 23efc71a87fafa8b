//! `package_name` → application id (docs/ARCHITECTURE.md#resolver).
//!
//! Producers never know database ids. Each pipeline owns one resolver: a TTL cache in front
//! of one `WHERE package_name = ANY($1)` query per batch for the names it misses. There is
//! no negative caching (an app registered a minute ago is seen at once) and no `is_active`
//! filter (data already produced is kept; a soft delete only stops future crawls).

use crate::migrate::quote_table;
use moka::sync::Cache;
use sqlx::PgConnection;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// A per-pipeline resolver with its own cache.
#[derive(Debug)]
pub struct ApplicationResolver {
    cache: Cache<String, i64>,
    query: String,
}

/// What one `resolve` call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResolveStats {
    /// Distinct names answered by the cache.
    pub cache_hits: usize,
    /// Distinct names sent to the database (0 means no query ran).
    pub queried: usize,
    /// Names the database knew.
    pub found: usize,
}

impl ApplicationResolver {
    /// A resolver over the given (validated) applications table.
    pub fn new(applications_table: &str, ttl: Duration) -> Self {
        let query = format!(
            "SELECT package_name, id FROM {} WHERE package_name = ANY($1)",
            quote_table(applications_table)
        );
        let cache = Cache::builder()
            .max_capacity(1_000_000)
            .time_to_live(ttl)
            .build();
        Self { cache, query }
    }

    /// Resolves the given names; unknown names are absent from the map.
    pub async fn resolve<'n>(
        &self,
        conn: &mut PgConnection,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<(HashMap<String, i64>, ResolveStats), sqlx::Error> {
        let mut ids = HashMap::new();
        let mut missing: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut stats = ResolveStats::default();
        for name in names {
            if !seen.insert(name) {
                continue;
            }
            match self.cache.get(name) {
                Some(id) => {
                    stats.cache_hits += 1;
                    ids.insert(name.to_owned(), id);
                }
                None => missing.push(name.to_owned()),
            }
        }
        if missing.is_empty() {
            return Ok((ids, stats));
        }
        stats.queried = missing.len();
        let rows: Vec<(String, i64)> = sqlx::query_as(&self.query)
            .bind(&missing)
            .fetch_all(conn)
            .await?;
        stats.found = rows.len();
        for (name, id) in rows {
            self.cache.insert(name.clone(), id);
            ids.insert(name, id);
        }
        Ok((ids, stats))
    }

    /// Forgets one cached id.
    pub fn forget(&self, package_name: &str) {
        self.cache.invalidate(package_name);
    }

    /// Forgets every cached id (after a write-time foreign-key violation, say).
    pub fn invalidate_all(&self) {
        self.cache.invalidate_all();
    }
}
