//! `package_name` → application id (docs/ARCHITECTURE.md#resolver).
//!
//! Producers never know database ids. Each pipeline owns one resolver: a TTL cache in front
//! of one `WHERE package_name = ANY($1)` query per batch for the names it misses. There is
//! no negative caching (an app registered a minute ago is seen at once) and no `is_active`
//! filter (data already produced is kept; a soft delete only stops future crawls).

use crate::key_cache::KeyCache;
pub use crate::key_cache::ResolveStats;
use crate::migrate::quote_table;
use sqlx::PgConnection;
use std::collections::HashMap;
use std::time::Duration;

/// A per-pipeline resolver with its own cache.
#[derive(Debug)]
pub struct ApplicationResolver {
    cache: KeyCache<i64>,
    query: String,
}

impl ApplicationResolver {
    /// A resolver over the given (validated) applications table.
    pub fn new(applications_table: &str, ttl: Duration) -> Self {
        let query = format!(
            "SELECT package_name, id FROM {} WHERE package_name = ANY($1)",
            quote_table(applications_table)
        );
        Self {
            cache: KeyCache::new(ttl),
            query,
        }
    }

    /// Resolves the given names; unknown names are absent from the map.
    pub async fn resolve<'n>(
        &self,
        conn: &mut PgConnection,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<(HashMap<String, i64>, ResolveStats), sqlx::Error> {
        let mut split = self.cache.split(names);
        if !split.missing.is_empty() {
            let rows: Vec<(String, i64)> = sqlx::query_as(&self.query)
                .bind(&split.missing)
                .fetch_all(conn)
                .await?;
            self.cache.found(&mut split, rows);
        }
        Ok((split.found, split.stats))
    }

    /// Forgets one cached id.
    pub fn forget(&self, package_name: &str) {
        self.cache.forget(package_name);
    }

    /// Forgets every cached id (after a write-time foreign-key violation, say).
    pub fn invalidate_all(&self) {
        self.cache.clear();
    }
}
