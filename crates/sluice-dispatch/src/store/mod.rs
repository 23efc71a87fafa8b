//! The dispatcher's store: every statement the dispatcher runs against the outbox tables,
//! each `.sql` file in `sql/` beside it. Nothing here holds a connection; every function
//! takes the caller's.
//!
//! - [`claim`]: PENDING → DISPATCHING under a fresh claim token.
//! - [`settle`]: DISPATCHING → PUBLISHED, and recovery's requeue, comparing the token.
//! - [`failure`]: a failed or unsent publish back to PENDING (or FAILURE), comparing the token.
//! - [`stale`]: the claims held past the stale timeout.
//! - [`retention`]: the purge of finished rows.

pub mod claim;
pub mod failure;
pub mod retention;
pub mod settle;
pub mod stale;

use sqlx::PgConnection;

/// Prepares a new dispatcher connection. The claim's correlated probes give it a large
/// estimated cost, which would make PostgreSQL JIT-compile it on every call (about 250 ms
/// for a batch of 1,000, ten times the query itself), so JIT is turned off.
pub async fn prepare_connection(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("SET jit = off").execute(conn).await?;
    Ok(())
}
