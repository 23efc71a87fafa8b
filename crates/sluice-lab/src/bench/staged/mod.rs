//! An idea measured by the bench and not taken into the pipeline (README, Performance): the
//! staged upsert. The batch goes into a session-local staging table with one binary `COPY`,
//! then the topic's own statement runs with the staging table in place of its `UNNEST(…)`.
//! Same `ON CONFLICT` guard, same `RETURNING`, one write statement per batch.
//!
//! Everything is derived from the topic's upsert statement, so any [`Topic`] whose statement
//! reads `FROM UNNEST($1::type[], …, $n::type[])` gets it for free: the staging table has one
//! column per `$i` of that element type, and the write replaces `UNNEST(…)` by the table.
//!
//! The staging table is `TEMPORARY … ON COMMIT DELETE ROWS`: it belongs to the connection
//! ([`create_staging`] once per connection, before the first batch) and is empty at the start
//! of every transaction; a rolled-back attempt leaves nothing behind either.

mod copy_binary;

use copy_binary::encode_rows;
use sluice_core::{Resolved, Topic, WriteOutcome};
use sqlx::PgConnection;

/// The statements of a topic's staged upsert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedSql {
    /// `CREATE TEMPORARY TABLE … ON COMMIT DELETE ROWS`, once per connection.
    pub create: String,
    /// The binary `COPY` into the staging table.
    pub copy: String,
    /// The topic's upsert reading the staging table instead of `UNNEST(…)`.
    pub write: String,
}

/// Why a statement cannot be staged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagedSqlError {
    /// No `UNNEST(` in the statement.
    NoUnnest,
    /// The parentheses after `UNNEST` do not close.
    Unclosed,
    /// An argument is not `$<n>::<type>[]` with n counting from 1.
    Argument(usize, String),
}

impl std::fmt::Display for StagedSqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoUnnest => write!(f, "the statement has no UNNEST(…)"),
            Self::Unclosed => write!(f, "UNNEST(… is not closed"),
            Self::Argument(n, text) => {
                write!(f, "UNNEST argument {n} is not `${n}::<type>[]`: `{text}`")
            }
        }
    }
}

/// The staging table's name for `table` (temporary tables live in the session's own schema).
pub fn staging_table(table: &str) -> String {
    format!("sluice_stage_{table}")
}

/// Derives the staged statements from a topic's upsert statement (pure).
pub fn staged_sql(upsert_sql: &str, table: &str) -> Result<StagedSql, StagedSqlError> {
    let start = upsert_sql.find("UNNEST(").ok_or(StagedSqlError::NoUnnest)?;
    let open = start + "UNNEST".len();
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in upsert_sql[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or(StagedSqlError::Unclosed)?;
    let mut columns = Vec::new();
    for (i, argument) in upsert_sql[open + 1..close].split(',').enumerate() {
        let argument = argument.trim();
        let bad = || StagedSqlError::Argument(i + 1, argument.to_owned());
        let rest = argument
            .strip_prefix(&format!("${}::", i + 1))
            .ok_or_else(bad)?;
        let element = rest.strip_suffix("[]").ok_or_else(bad)?;
        if element.is_empty() || !element.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(bad());
        }
        columns.push(format!("c{} {element}", i + 1));
    }
    let staging = staging_table(table);
    Ok(StagedSql {
        create: format!(
            "CREATE TEMPORARY TABLE IF NOT EXISTS {staging} ({}) ON COMMIT DELETE ROWS",
            columns.join(", ")
        ),
        copy: format!("COPY {staging} FROM STDIN (FORMAT binary)"),
        write: format!(
            "{}{staging}{}",
            &upsert_sql[..start],
            &upsert_sql[close + 1..]
        ),
    })
}

fn statements<T: Topic>() -> Result<StagedSql, sqlx::Error> {
    staged_sql(T::UPSERT_SQL, T::SPEC.table)
        .map_err(|e| sqlx::Error::Protocol(format!("{}: {e}", T::SPEC.name)))
}

/// Creates topic `T`'s staging table on this connection (outside any transaction: it must
/// outlive the first one). Idempotent.
pub async fn create_staging<T: Topic>(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(&statements::<T>()?.create)
        .execute(conn)
        .await?;
    Ok(())
}

/// Upserts the rows of topic `T` through its staging table (created by [`create_staging`] on
/// this connection): one `COPY`, then one `INSERT … SELECT … ON CONFLICT` statement. Must
/// run inside a transaction (the staging table empties at its commit). The slice must hold
/// at most one row per natural key (see `Topic::dedupe`).
pub async fn upsert_staged<T: Topic>(
    conn: &mut PgConnection,
    rows: &[Resolved<T::Message>],
) -> Result<WriteOutcome, sqlx::Error> {
    if rows.is_empty() {
        return Ok(WriteOutcome::default());
    }
    let sql = statements::<T>()?;
    let data = encode_rows(rows.len(), &T::columns(rows));
    let mut copy = conn.copy_in_raw(&sql.copy).await?;
    copy.send(data).await?;
    copy.finish().await?;
    let returned: Vec<bool> = sqlx::query_scalar(&sql.write).fetch_all(conn).await?;
    // Returned and true: inserted; returned and false: updated; not returned: skipped.
    let inserted = returned.iter().filter(|i| **i).count() as u64;
    let updated = returned.len() as u64 - inserted;
    Ok(WriteOutcome {
        inserted,
        updated,
        skipped: rows.len() as u64 - inserted - updated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::topics::{PipelineKind, TopicVisitor};

    #[test]
    fn the_reviews_statement_reads_the_staging_table() {
        let sql = "INSERT INTO t (a, b)\nSELECT * FROM UNNEST(\n    $1::varchar[], $2::bigint[]\n)\nON CONFLICT (a) DO NOTHING\nRETURNING TRUE";
        let staged = staged_sql(sql, "t").expect("stageable");
        assert_eq!(
            staged.create,
            "CREATE TEMPORARY TABLE IF NOT EXISTS sluice_stage_t (c1 varchar, c2 bigint) ON COMMIT DELETE ROWS"
        );
        assert_eq!(
            staged.write,
            "INSERT INTO t (a, b)\nSELECT * FROM sluice_stage_t\nON CONFLICT (a) DO NOTHING\nRETURNING TRUE"
        );
        assert_eq!(
            staged.copy,
            "COPY sluice_stage_t FROM STDIN (FORMAT binary)"
        );
    }

    #[test]
    fn malformed_statements_are_refused() {
        assert_eq!(staged_sql("SELECT 1", "t"), Err(StagedSqlError::NoUnnest));
        assert_eq!(
            staged_sql("SELECT * FROM UNNEST($1::int[]", "t"),
            Err(StagedSqlError::Unclosed)
        );
        assert!(matches!(
            staged_sql("SELECT * FROM UNNEST($2::int[])", "t"),
            Err(StagedSqlError::Argument(1, _))
        ));
        assert!(matches!(
            staged_sql("SELECT * FROM UNNEST($1::int[]; DROP TABLE x)", "t"),
            Err(StagedSqlError::Argument(1, _))
        ));
    }

    #[test]
    fn every_topic_statement_can_be_staged_with_one_column_per_parameter() {
        struct Check;
        impl TopicVisitor for Check {
            type Output = ();
            fn visit<T: Topic>(self) {
                let staged = staged_sql(T::UPSERT_SQL, T::SPEC.table)
                    .unwrap_or_else(|e| panic!("{}: {e}", T::SPEC.name));
                assert!(!staged.write.contains("UNNEST("), "{}", staged.write);
                assert!(!staged.write.contains('$'), "{}", staged.write);
                assert!(staged.write.contains("ON CONFLICT"), "{}", staged.write);
                let params = (1..100)
                    .take_while(|n| T::UPSERT_SQL.contains(&format!("${n}::")))
                    .count();
                assert_eq!(staged.create.matches(", c").count() + 1, params);
            }
        }
        for kind in PipelineKind::ALL {
            kind.visit(Check);
        }
    }
}
