//! A database of its own for a test (not a schema of the shared test database: nothing of it
//! is visible, as on a newcomer's machine).

use sqlx::{Connection, Executor, PgConnection};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// A database of its own (not a schema: nothing of the shared test database is visible),
/// dropped at the end.
pub struct Database {
    admin_url: String,
    name: String,
    pub url: String,
}

impl Database {
    /// Creates it on the stack's server.
    pub async fn create(stack: &sluice_testkit::Stack) -> Database {
        let name = sluice_testkit::unique("testdb").replace('-', "_");
        let mut conn = PgConnection::connect(&stack.database_url).await.unwrap();
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create database");
        let (base, query) = stack
            .database_url
            .split_once('?')
            .map_or((stack.database_url.as_str(), None), |(b, q)| (b, Some(q)));
        let (server, _) = base.rsplit_once('/').expect("a database URL with a path");
        let url = match query {
            Some(query) => format!("{server}/{name}?{query}"),
            None => format!("{server}/{name}"),
        };
        Database {
            admin_url: stack.database_url.clone(),
            name,
            url,
        }
    }

    /// `sluice args` in a clean environment, on this database and the stack's Kafka, with one
    /// test's group prefix and heartbeat folder (under `dir`).
    pub fn sluice(
        &self,
        stack: &sluice_testkit::Stack,
        prefix: &str,
        dir: &Path,
        args: &[&str],
    ) -> Command {
        let mut cmd = Command::new(super::sluice_binary());
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("KAFKA_BOOTSTRAP_SERVERS", &stack.bootstrap)
            .env("DATABASE_URL", &self.url)
            .env("STORAGE_GROUP_PREFIX", prefix)
            .env("STORAGE_HEARTBEAT_DIR", dir.join("heartbeat"))
            .env("STORAGE_POLL_TIMEOUT_MS", "200")
            .env("STORAGE_SESSION_TIMEOUT_MS", "10000");
        cmd
    }

    /// Its tables, every schema but the catalog's.
    pub async fn tables(&self) -> BTreeSet<String> {
        let mut conn = PgConnection::connect(&self.url).await.unwrap();
        sqlx::query_scalar(
            "SELECT tablename::text FROM pg_tables
             WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .collect()
    }

    /// Drops it, whoever is still connected.
    pub async fn drop(self) {
        let mut conn = PgConnection::connect(&self.admin_url).await.unwrap();
        conn.execute(format!("DROP DATABASE {} WITH (FORCE)", self.name).as_str())
            .await
            .expect("drop database");
    }
}

/// (rows, md5 of the rows' texts in byte order) of a table; the connection's time zone UTC.
pub async fn table_digest(conn: &mut PgConnection, table: &str) -> (i64, String) {
    sqlx::query_as(&format!(
        "SELECT count(*), coalesce(md5(string_agg(t::text, E'\\n' ORDER BY t::text COLLATE \"C\")), '') \
         FROM {table} t"
    ))
    .fetch_one(conn)
    .await
    .unwrap_or_else(|e| panic!("digest of {table}: {e}"))
}

/// `scripts/stack pg-restart immediate` on the stack's server: PostgreSQL crashes (no
/// checkpoint, no flush of asynchronous commits) and comes back. Only a test binary of its
/// own may do this: every connection to the shared server breaks.
pub fn crash_postgres(stack: &sluice_testkit::Stack) {
    let script = std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)");
    let mut command = Command::new(&script);
    command.args(["pg-restart", "immediate"]);
    if let Some(port) = stack
        .database_url
        .rsplit(':')
        .next()
        .and_then(|rest| rest.split('/').next())
    {
        command.env("SLUICE_PG_PORT", port);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "pg-restart immediate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
