//! The replication slots page's query: the logical slots of the console's database, as
//! `pg_replication_slots` shows them (readable by any role), with the WAL each keeps.

use serde::Serialize;
use sqlx::PgConnection;

/// One logical replication slot.
#[derive(Debug, Clone, sqlx::FromRow, Serialize)]
pub struct Slot {
    /// `slot_name`.
    pub name: String,
    /// Its output plugin (`pgoutput` for `sluice capture` and Debezium).
    pub plugin: Option<String>,
    /// A session streams from it.
    pub active: bool,
    /// The server process of that session.
    pub active_pid: Option<i32>,
    /// `confirmed_flush_lsn`: what its consumer has confirmed.
    pub confirmed: Option<String>,
    /// The WAL it keeps (from `restart_lsn`), bytes; `None` on a standby or without one.
    pub kept_bytes: Option<i64>,
    /// `wal_status`: `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
}

/// The logical slots of the current database, by name.
pub async fn logical_slots(conn: &mut PgConnection) -> Result<Vec<Slot>, sqlx::Error> {
    sqlx::query_as(
        "SELECT slot_name::text AS name, plugin::text AS plugin, active, active_pid, \
                confirmed_flush_lsn::text AS confirmed, \
                CASE WHEN pg_is_in_recovery() THEN NULL \
                     ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint END AS kept_bytes, \
                wal_status::text AS wal_status \
         FROM pg_replication_slots \
         WHERE slot_type = 'logical' AND database = current_database() \
         ORDER BY slot_name",
    )
    .fetch_all(conn)
    .await
}
