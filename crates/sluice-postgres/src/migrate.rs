//! The migration runner (docs/ARCHITECTURE.md#migrations).
//!
//! Numbered SQL files, embedded in the binary, applied in order, each in its own transaction
//! together with its row in `storage_consumer_migrations`. Two sets share one numbering:
//! sluice's own tables (`migrations/`: dead letters, offsets, the outbox, …), which every
//! deployment gets, and the seed system's (`deploy/seeds/migrations/`: `app_stats`, `reviews`,
//! `network_metrics`, whose foreign keys need the applications table), applied only for a
//! deployment that runs the seed pipelines ([`Scope`]). Concurrent starters are serialised by
//! a PostgreSQL advisory lock, so two containers starting together apply each file once. An
//! already-applied file whose content changed is an error, and so is a database that has
//! migrations this binary does not know.
//!
//! Why not `sqlx::migrate!`: the seed tables' foreign keys reference the applications table,
//! whose name is a setting (`STORAGE_APPLICATIONS_TABLE`); the files hold a
//! `{{applications_table}}` placeholder that is filled in at apply time, and the checksum is
//! taken over the file as written so a changed setting does not look like a changed
//! migration; and one numbering serves two sets, of which a run may skip one.

use sha2::{Digest, Sha256};
use sqlx::{Connection, PgConnection, Row};
use std::time::Instant;

/// Which tables a migration creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// sluice's own (`migrations/`), in every deployment.
    Own,
    /// The seed system's (`deploy/seeds/migrations/`).
    Seeds,
}

/// What a migration run applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Only sluice's own tables: a deployment of declared sinks and the outbox.
    Own,
    /// sluice's own tables and the seed system's, whose foreign keys reference this
    /// applications table (it must exist).
    WithSeeds {
        /// `STORAGE_APPLICATIONS_TABLE`.
        applications_table: &'a str,
    },
}

impl Scope<'_> {
    fn includes(self, set: Set) -> bool {
        set == Set::Own || matches!(self, Scope::WithSeeds { .. })
    }
}

/// One embedded migration file.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The number in the file name.
    pub version: i64,
    /// The file name.
    pub name: &'static str,
    /// Whose tables it creates.
    pub set: Set,
    /// The SQL, with `{{applications_table}}` placeholders.
    pub sql: &'static str,
}

/// Every migration of this build, in order: discovered from `migrations/` (sluice's own) and
/// `deploy/seeds/migrations/` (the seed system's) by `build.rs` (one numbering, `0001_…` on
/// without gaps), never listed by hand.
pub const MIGRATIONS: &[Migration] = include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The advisory-lock key that serialises migration runs ("sluice-mg" as bytes).
const LOCK_KEY: i64 = 0x736c_7569_6365_6d67;

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigrationReport {
    /// Files applied by this run.
    pub applied: Vec<&'static str>,
    /// The schema version after the run.
    pub version: i64,
}

/// Why migrations could not be applied. Every variant is fatal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The applications table that the foreign keys reference does not exist.
    #[error(
        "the applications table `{table}` does not exist in this database (search_path); \
         run the App API migrations first (or set STORAGE_APPLICATIONS_TABLE)"
    )]
    ApplicationsTableMissing {
        /// The configured table name.
        table: String,
    },
    /// An applied migration's file changed since it was applied.
    #[error("migration {name} was applied with a different content (checksum mismatch)")]
    Changed {
        /// The file name.
        name: String,
    },
    /// The database has a migration this binary does not know: it is newer than the binary.
    #[error("the database has migration version {version} that this build does not know")]
    Unknown {
        /// The unknown version.
        version: i64,
    },
    /// A migration's SQL failed.
    #[error("migration {name} failed: {source}")]
    Apply {
        /// The file name.
        name: &'static str,
        /// The database error.
        #[source]
        source: sqlx::Error,
    },
    /// The database could not be queried.
    #[error("migration bookkeeping failed: {0}")]
    Database(#[from] sqlx::Error),
}

fn checksum(sql: &str) -> Vec<u8> {
    Sha256::digest(sql.as_bytes()).to_vec()
}

/// Quotes a validated `[schema.]table` name for SQL.
pub fn quote_table(table: &str) -> String {
    table
        .split('.')
        .map(|part| format!("\"{}\"", part.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(".")
}

/// Whether the applications table is visible on this connection.
pub async fn applications_table_exists(
    conn: &mut PgConnection,
    table: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar::<_, bool>("SELECT to_regclass($1) IS NOT NULL")
        .bind(quote_table(table))
        .fetch_one(conn)
        .await
}

/// The highest applied migration version, or `None` before the first run.
pub async fn schema_version(conn: &mut PgConnection) -> Result<Option<i64>, sqlx::Error> {
    let exists: bool =
        sqlx::query_scalar("SELECT to_regclass('storage_consumer_migrations') IS NOT NULL")
            .fetch_one(&mut *conn)
            .await?;
    if !exists {
        return Ok(None);
    }
    sqlx::query_scalar("SELECT max(version) FROM storage_consumer_migrations")
        .fetch_one(conn)
        .await
}

/// The highest version of sluice's own migrations: what a database at [`Scope::Own`] is at.
pub fn own_version() -> i64 {
    MIGRATIONS
        .iter()
        .filter(|m| m.set == Set::Own)
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}

/// The migrations of sluice's own set, and of the seed set when `seeds`, that this database
/// has not applied, in order (none before the first run: every one is missing).
pub async fn missing_migrations(
    conn: &mut PgConnection,
    seeds: bool,
) -> Result<Vec<&'static Migration>, sqlx::Error> {
    let applied: Vec<i64> = if schema_version(conn).await?.is_some() {
        sqlx::query_scalar("SELECT version FROM storage_consumer_migrations")
            .fetch_all(conn)
            .await?
    } else {
        Vec::new()
    };
    Ok(MIGRATIONS
        .iter()
        .filter(|m| (m.set == Set::Own || seeds) && !applied.contains(&m.version))
        .collect())
}

/// Applies every pending migration of sluice's own tables and the seed system's, whose
/// foreign keys reference `applications_table`: the seed deployment (the demo, the bench and
/// the tests of the seed pipelines). See the module docs.
pub async fn migrate(
    conn: &mut PgConnection,
    applications_table: &str,
) -> Result<MigrationReport, MigrateError> {
    migrate_scope(conn, Scope::WithSeeds { applications_table }, i64::MAX).await
}

/// Applies every pending migration of sluice's own tables: nothing else is created.
pub async fn migrate_own(conn: &mut PgConnection) -> Result<MigrationReport, MigrateError> {
    migrate_scope(conn, Scope::Own, i64::MAX).await
}

/// Applies the pending migrations numbered up to `last`, as [`migrate`] does: a database
/// left at an older version, for the tests of a later migration on existing data.
pub async fn migrate_up_to(
    conn: &mut PgConnection,
    applications_table: &str,
    last: i64,
) -> Result<MigrationReport, MigrateError> {
    migrate_scope(conn, Scope::WithSeeds { applications_table }, last).await
}

/// Applies the pending migrations of `scope` numbered up to `last`.
pub async fn migrate_scope(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    last: i64,
) -> Result<MigrationReport, MigrateError> {
    if let Scope::WithSeeds { applications_table } = scope
        && !applications_table_exists(conn, applications_table).await?
    {
        return Err(MigrateError::ApplicationsTableMissing {
            table: applications_table.into(),
        });
    }
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(LOCK_KEY)
        .execute(&mut *conn)
        .await?;
    let result = migrate_locked(conn, scope, last).await;
    // A dropped connection releases the lock too; an unlock failure must not hide the result.
    if let Err(error) = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(LOCK_KEY)
        .execute(&mut *conn)
        .await
    {
        tracing::warn!(%error, "could not release the migration lock");
    }
    result
}

async fn migrate_locked(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    last: i64,
) -> Result<MigrationReport, MigrateError> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS storage_consumer_migrations (
            version      BIGINT PRIMARY KEY,
            name         TEXT NOT NULL,
            checksum     BYTEA NOT NULL,
            applied_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
            execution_ms BIGINT NOT NULL
        )",
    )
    .execute(&mut *conn)
    .await?;
    let applied = sqlx::query("SELECT version, name, checksum FROM storage_consumer_migrations")
        .fetch_all(&mut *conn)
        .await?;
    let mut report = MigrationReport::default();
    for row in &applied {
        let version: i64 = row.try_get("version")?;
        let Some(known) = MIGRATIONS.iter().find(|m| m.version == version) else {
            return Err(MigrateError::Unknown { version });
        };
        let stored: Vec<u8> = row.try_get("checksum")?;
        if stored != checksum(known.sql) {
            return Err(MigrateError::Changed {
                name: row.try_get("name")?,
            });
        }
        report.version = report.version.max(version);
    }
    let table = match scope {
        Scope::WithSeeds { applications_table } => quote_table(applications_table),
        Scope::Own => String::new(),
    };
    let pending = MIGRATIONS
        .iter()
        .filter(|m| m.version <= last && scope.includes(m.set));
    for migration in pending {
        let done = applied.iter().any(|row| {
            row.try_get::<i64, _>("version")
                .is_ok_and(|v| v == migration.version)
        });
        if done {
            continue;
        }
        let started = Instant::now();
        let sql = migration.sql.replace("{{applications_table}}", &table);
        let apply = |source| MigrateError::Apply {
            name: migration.name,
            source,
        };
        let mut tx = conn.begin().await?;
        sqlx::raw_sql(&sql).execute(&mut *tx).await.map_err(apply)?;
        sqlx::query(
            "INSERT INTO storage_consumer_migrations (version, name, checksum, execution_ms)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(migration.version)
        .bind(migration.name)
        .bind(checksum(migration.sql))
        .bind(i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tracing::info!(migration = migration.name, "applied migration");
        report.applied.push(migration.name);
        report.version = report.version.max(migration.version);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_and_name_their_version() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1);
            assert!(
                m.name.starts_with(&format!("{:04}_", m.version)),
                "{}",
                m.name
            );
            assert!(!m.sql.trim().is_empty());
        }
    }

    #[test]
    fn every_file_of_the_migrations_folders_is_embedded_with_its_set() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        for (folder, set) in [
            ("migrations", Set::Own),
            ("deploy/seeds/migrations", Set::Seeds),
        ] {
            let mut files: Vec<String> = std::fs::read_dir(format!("{root}/{folder}"))
                .expect("the migrations folder")
                .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .filter(|name| name.ends_with(".sql"))
                .collect();
            files.sort();
            let embedded: Vec<&str> = MIGRATIONS
                .iter()
                .filter(|m| m.set == set)
                .map(|m| m.name)
                .collect();
            assert_eq!(files, embedded, "{folder}");
        }
        assert!(MIGRATIONS.len() >= 10);
    }

    #[test]
    fn only_the_seed_migrations_reference_the_applications_table() {
        for m in MIGRATIONS {
            assert_eq!(
                m.sql.contains("{{applications_table}}"),
                m.set == Set::Seeds,
                "{}",
                m.name
            );
        }
    }

    #[test]
    fn every_seed_pipeline_table_is_created_by_a_seed_migration() {
        for kind in sluice_core::PipelineKind::ALL {
            let table = kind.table();
            let creates = [
                format!("CREATE TABLE {table} ("),
                format!("CREATE TABLE IF NOT EXISTS {table} ("),
            ];
            assert!(
                MIGRATIONS.iter().any(|m| m.set == Set::Seeds
                    && creates.iter().any(|create| m.sql.contains(create.as_str()))),
                "no migration creates the {kind} pipeline's table `{}`",
                kind.table()
            );
        }
    }

    #[test]
    fn table_names_are_quoted_per_part() {
        assert_eq!(quote_table("apps"), "\"apps\"");
        assert_eq!(quote_table("registry.apps"), "\"registry\".\"apps\"");
    }
}
