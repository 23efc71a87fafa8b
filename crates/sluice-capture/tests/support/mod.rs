//! The capture tests' source: a database of its own on the stack's PostgreSQL with a
//! table and a publication, and its replication slot, dropped with it (also while a test
//! unwinds).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "test support panics with a clear message; each test binary uses a part"
)]

use sluice_capture::Lsn;
use sqlx::{Connection, Executor, PgConnection};
use std::time::{Duration, Instant};

/// The test database URL, or `None` (skip) outside CI.
pub fn admin_url() -> Option<String> {
    match std::env::var("SLUICE_TEST_DATABASE_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("CI=true but SLUICE_TEST_DATABASE_URL is not set: run `make test`")
        }
        Err(_) => {
            eprintln!("SKIPPED: no stack configured; run `make test` (it starts the stack)");
            None
        }
    }
}

/// `url` with its database replaced by `database` (query kept).
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').expect("a database in the URL");
    match query {
        Some(query) => format!("{server}/{database}?{query}"),
        None => format!("{server}/{database}"),
    }
}

/// The source database and its slot. Dropping it (also while unwinding) drops the slot
/// (a leftover slot pins WAL for the whole cluster) and then the database.
pub struct Source {
    pub admin_url: String,
    pub url: String,
    pub database: String,
    pub slot: String,
    pub publication: String,
}

impl Source {
    pub async fn create(admin_url: &str, table: &str) -> Source {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let database = format!("capture_{:x}{nanos:x}", std::process::id());
        let mut admin = PgConnection::connect(admin_url).await.unwrap();
        admin
            .execute(format!("CREATE DATABASE {database}").as_str())
            .await
            .unwrap();
        // Defaults unlike UTC, ISO, hex and postgres, so the capture's own settings must be
        // what counts.
        sqlx::raw_sql(&format!(
            "ALTER DATABASE {database} SET timezone = 'Asia/Kolkata'; \
             ALTER DATABASE {database} SET datestyle = 'SQL, DMY'; \
             ALTER DATABASE {database} SET bytea_output = 'escape'; \
             ALTER DATABASE {database} SET intervalstyle = 'iso_8601'"
        ))
        .execute(&mut admin)
        .await
        .unwrap();
        let source = Source {
            admin_url: admin_url.to_owned(),
            url: with_database(admin_url, &database),
            slot: format!("{database}_slot"),
            publication: format!("{database}_pub"),
            database,
        };
        let mut conn = source.connect().await;
        sqlx::raw_sql(table).execute(&mut conn).await.unwrap();
        sqlx::raw_sql(&format!(
            "CREATE PUBLICATION {} FOR TABLE public.items",
            source.publication
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        source
    }

    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url))
    }

    /// Each statement in its own transaction, as psql -c would.
    pub async fn run(&self, conn: &mut PgConnection, statements: &[&str]) {
        for statement in statements {
            sqlx::raw_sql(statement)
                .execute(&mut *conn)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
    }

    pub async fn confirmed_flush(&self) -> Lsn {
        let mut conn = self.connect().await;
        let text: String = sqlx::query_scalar(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
        )
        .bind(&self.slot)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        text.parse().unwrap()
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        let (admin_url, slot, database) = (
            self.admin_url.clone(),
            self.slot.clone(),
            self.database.clone(),
        );
        // A runtime of its own: the test's may be the one unwinding.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await.unwrap();
                // The walsender may still hold the slot for a moment after the session ended.
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    let dropped = sqlx::query(
                        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                         WHERE slot_name = $1 AND active",
                    )
                    .bind(&slot)
                    .execute(&mut admin)
                    .await
                    .and(
                        sqlx::query(
                            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                             WHERE slot_name = $1",
                        )
                        .bind(&slot)
                        .execute(&mut admin)
                        .await,
                    );
                    if dropped.is_ok() || Instant::now() > deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let left: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
                )
                .bind(&slot)
                .fetch_one(&mut admin)
                .await
                .unwrap();
                if left != 0 {
                    eprintln!("replication slot {slot} could not be dropped");
                }
                admin
                    .execute(format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)").as_str())
                    .await
                    .unwrap();
            });
        });
        if cleanup.join().is_err() {
            eprintln!("cleanup of {} failed", self.database);
        }
    }
}
