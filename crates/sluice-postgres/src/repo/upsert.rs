//! The upsert of every storage topic: the topic's own statement (`sluice_core::topics`),
//! its columns bound as `UNNEST` arrays, one statement for the whole slice.

use super::outcome;
use sluice_core::{Column, Resolved, Topic, WriteOutcome};
use sqlx::PgConnection;
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::QueryScalar;

/// Upserts the rows of topic `T` with its statement (docs/ARCHITECTURE.md#tables). The slice
/// must hold at most one row per natural key (see `Topic::dedupe`).
pub async fn upsert<T: Topic>(
    conn: &mut PgConnection,
    rows: &[Resolved<T::Message>],
) -> Result<WriteOutcome, sqlx::Error> {
    if rows.is_empty() {
        return Ok(WriteOutcome::default());
    }
    let returned = returned_by::<T>(conn, T::UPSERT_SQL, rows).await?;
    Ok(outcome(rows.len(), &returned))
}

/// Runs `sql` with topic `T`'s columns of `rows` bound as its `UNNEST` arrays; the booleans
/// it returns (a declared sink's statement for the same table is checked against the
/// topic's own this way).
pub async fn returned_by<T: Topic>(
    conn: &mut PgConnection,
    sql: &str,
    rows: &[Resolved<T::Message>],
) -> Result<Vec<bool>, sqlx::Error> {
    let mut query = sqlx::query_scalar::<_, bool>(sql);
    for column in T::columns(rows) {
        query = bind(query, column);
    }
    query.fetch_all(conn).await
}

type Scalar<'q> = QueryScalar<'q, Postgres, bool, PgArguments>;

/// Binds one column as the array type its variant names.
fn bind<'q>(query: Scalar<'q>, column: Column<'q>) -> Scalar<'q> {
    match column {
        Column::Text(v) => query.bind(v),
        Column::OptText(v) => query.bind(v),
        Column::SmallInt(v) => query.bind(v),
        Column::Int(v) => query.bind(v),
        Column::OptInt(v) => query.bind(v),
        Column::BigInt(v) => query.bind(v),
        Column::OptBigInt(v) => query.bind(v),
        Column::Double(v) => query.bind(v),
        Column::OptDouble(v) => query.bind(v),
        Column::OptBool(v) => query.bind(v),
        Column::Timestamp(v) => query.bind(v),
        Column::OptTimestamp(v) => query.bind(v),
        Column::Uuid(v) => query.bind(v),
        Column::OptJson(v) => query.bind(v),
    }
}
