//! The example's own tables, created on demand (they are not part of sluice's migrations).

use sqlx::PgConnection;

const SETUP: &str = "
CREATE TABLE IF NOT EXISTS mailbox_users (
    user_id   TEXT PRIMARY KEY,
    partition INT NOT NULL
);
-- The per-user ordered log of applied commands; position is the order they were applied in.
CREATE TABLE IF NOT EXISTS mailbox_projection (
    user_id  TEXT NOT NULL,
    seq      BIGINT NOT NULL,
    command  TEXT NOT NULL,
    position BIGINT NOT NULL,
    PRIMARY KEY (user_id, seq)
);
-- When each command was applied (added after the first release: an older table gains it).
ALTER TABLE mailbox_projection
    ADD COLUMN IF NOT EXISTS applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp();
-- The running state: how many commands were applied and rejected, and the last seq seen.
CREATE TABLE IF NOT EXISTS mailbox_state (
    user_id  TEXT PRIMARY KEY,
    applied  BIGINT NOT NULL DEFAULT 0,
    rejected BIGINT NOT NULL DEFAULT 0,
    last_seq BIGINT
);
";

/// Creates the example's tables (`mailbox_users`, `mailbox_projection`, `mailbox_state`)
/// if they do not exist yet, in the connection's current schema.
pub async fn setup(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(SETUP).execute(conn).await?;
    Ok(())
}
