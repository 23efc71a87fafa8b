//! The upsert of one batch, with the reads of kept values (a Debezium sink's columns an
//! update may leave unsent, docs/ARCHITECTURE.md#sinks).
//!
//! `INSERT … SELECT … FROM UNNEST($1::type[], …) ON CONFLICT (key)` and then `DO NOTHING`
//! (insert-ignore), `DO UPDATE SET` every mapped column that is neither a key nor insert-only
//! (always-update), plus `WHERE EXCLUDED.guard > target.guard` (newest-wins: an older version
//! never overwrites a newer row, and a tie keeps the row stored first). A nullable guard
//! column holds the oldest version when NULL: `OR (target.guard IS NULL AND EXCLUDED.guard IS
//! NOT NULL)` — any value replaces a stored NULL, a NULL never replaces a value. It returns one
//! boolean per row written: true inserted, false updated; a row not returned was skipped.
//!
//! Inserted or updated is `xmax = 0` of the row written — except on a partitioned table, whose
//! parent cannot return a system column: there the batch's rows go through a CTE, and a row is
//! updated when its key was in the table in the statement's snapshot (read through the key's
//! index). A row another transaction inserts meanwhile is counted as inserted; what is stored is
//! the same either way.

use super::{MOVED_ROWS, StatementColumn, array_params, aside_match, key_match};
use crate::model::ConflictPolicy;
use crate::names::{quote_ident, quote_table};
use crate::table::SqlType;

/// The upsert of one batch. Every name is quoted ([`quote_ident`]): a column may be a
/// reserved word (`order`) or hold capitals or spaces; the target is aliased `target`, so the
/// guard never depends on the table's own name.
pub fn upsert_statement(
    table: &str,
    columns: &[StatementColumn<'_>],
    key: &[String],
    conflict: &ConflictPolicy,
    partitioned: bool,
) -> String {
    let upsert = Upsert::new(table, columns, key);
    let updates = !matches!(conflict, ConflictPolicy::InsertIgnore);
    let mut sql = upsert.insert(partitioned && updates);
    sql.push_str(&conflict_action(columns, key, conflict, partitioned));
    sql
}

/// What the parts of an upsert are built from: its table, columns and key, and what reading
/// kept values needs (docs/ARCHITECTURE.md#sinks).
struct Upsert<'a> {
    /// The target table, as the sink names it.
    table: &'a str,
    /// The written columns, in parameter order.
    columns: &'a [StatementColumn<'a>],
    /// The key columns.
    key: &'a [String],
    /// The keepable columns, each with a `bool[]` parameter saying which rows keep it.
    kept: Vec<&'a StatementColumn<'a>>,
    /// Where a kept value is read: the row's own key, or the old key of a row whose key
    /// changed (`"sluice from <i>"`, one per key column; none without a kept column).
    from: Vec<String>,
    /// The stored row (`x`) of a row's old key (`t`): its key columns matched, `AND`ed.
    stored_key: String,
}

impl<'a> Upsert<'a> {
    /// The parts of the upsert of `columns` into `table` by `key`.
    fn new(table: &'a str, columns: &'a [StatementColumn<'a>], key: &'a [String]) -> Self {
        let kept: Vec<&StatementColumn<'_>> = columns.iter().filter(|c| c.keepable).collect();
        let from: Vec<String> = if kept.is_empty() {
            Vec::new()
        } else {
            (0..key.len()).map(|i| format!("sluice from {i}")).collect()
        };
        let stored_key = key
            .iter()
            .zip(&from)
            .map(|(k, from)| {
                let column = columns.iter().find(|c| c.name == k);
                key_match(
                    &format!("x.{}", quote_ident(k)),
                    &format!("t.{}", quote_ident(from)),
                    column.map_or(&SqlType::Text, |c| c.sql_type),
                    column.is_some_and(|c| c.nullable),
                )
            })
            .collect::<Vec<_>>()
            .join(" AND ");
        Self {
            table,
            columns,
            key,
            kept,
            from,
            stored_key,
        }
    }

    /// The `INSERT … SELECT … FROM UNNEST(…) … ON CONFLICT (key)` up to its action: through a
    /// CTE that reads which keys exist (`with_existing`: an updating upsert of a partitioned
    /// table), else straight from the parameters.
    fn insert(&self, with_existing: bool) -> String {
        let list = self
            .columns
            .iter()
            .map(|c| quote_ident(c.name))
            .collect::<Vec<_>>()
            .join(", ");
        let params = self.params();
        let selected = self.selected();
        let filter = self.filter();
        let aliases = self.aliases();
        let key = self
            .key
            .iter()
            .map(|k| quote_ident(k))
            .collect::<Vec<_>>()
            .join(", ");
        if with_existing {
            format!(
                "WITH t AS (SELECT * FROM UNNEST({params}) AS t({aliases})),\n\
                 existing AS (SELECT {key} FROM {table} WHERE ({key}) IN (SELECT {key} FROM t))\n\
                 INSERT INTO {table} AS target ({list})\nSELECT {selected}\nFROM t{filter}\n\
                 ON CONFLICT ({key})",
                table = quote_table(self.table),
                selected = selected.join(", "),
                params = params.join(", "),
            )
        } else {
            format!(
                "INSERT INTO {} AS target ({list})\nSELECT {}\nFROM UNNEST({}) AS t({aliases}){filter}\n\
                 ON CONFLICT ({key})",
                quote_table(self.table),
                selected.join(", "),
                params.join(", "),
            )
        }
    }

    /// The parameters, in order: one array per column, a `bool[]` per kept column, and with
    /// kept columns one array per key column (the old keys), the moved flags and the LSNs.
    fn params(&self) -> Vec<String> {
        let mut params = array_params(self.columns.iter());
        let first_flag = self.columns.len() + 1;
        params.extend((0..self.kept.len()).map(|i| format!("${}::bool[]", first_flag + i)));
        if self.kept.is_empty() {
            return params;
        }
        for k in self.key {
            let param = self
                .columns
                .iter()
                .find(|c| c.name == k)
                .map_or_else(|| "text[]".to_owned(), |c| c.sql_type.param_array());
            params.push(format!("${}::{param}", params.len() + 1));
        }
        params.push(format!("${}::bool[]", params.len() + 1));
        params.push(format!("${}::bigint[]", params.len() + 1));
        params
    }

    /// The `SELECT` expression of each column: a kept column's reads its stored value.
    fn selected(&self) -> Vec<String> {
        self.columns
            .iter()
            .map(|c| match self.kept.iter().position(|k| k.name == c.name) {
                Some(i) => self.kept_expression(c, i),
                None => select_expression(c),
            })
            .collect()
    }

    /// The `SELECT` expression of the `index`-th kept column `c`.
    ///
    /// Whether the row exists decides, not its value: a stored NULL is kept as NULL.
    /// A key change reads the old row its delete set aside first: the old key may
    /// hold a newer row by now (a re-insert applied before the change's create). A
    /// delete that found no row left NULL there: the value is nowhere (a re-insert of
    /// the old key is not the old row). Without the delete's mark (a create that did not
    /// wait for it), the old key's row as it is.
    fn kept_expression(&self, c: &StatementColumn<'_>, index: usize) -> String {
        // A key change's old row as its delete set it aside (under the old and the new key).
        let aside = aside_match(
            self.table,
            &self
                .from
                .iter()
                .map(|f| format!("t.{}", quote_ident(f)))
                .collect::<Vec<_>>(),
            &self
                .key
                .iter()
                .map(|k| format!("t.{}", quote_ident(k)))
                .collect::<Vec<_>>(),
            &format!("t.{}", quote_ident(CHANGE)),
        );
        format!(
            "CASE WHEN NOT t.{flag} THEN {expression} \
             WHEN t.{moved} AND (SELECT m.image IS NOT NULL FROM {MOVED_ROWS} AS m \
             WHERE {aside} ORDER BY m.seq LIMIT 1) \
             THEN (SELECT (jsonb_populate_record(NULL::{table}, m.image)).{name} \
             FROM {MOVED_ROWS} AS m WHERE {aside} ORDER BY m.seq LIMIT 1) \
             WHEN t.{moved} AND EXISTS (SELECT 1 FROM {MOVED_ROWS} AS m WHERE {aside}) \
             THEN {gone} \
             WHEN EXISTS (SELECT 1 FROM {table} AS x WHERE {stored_key}) \
             THEN (SELECT x.{name} FROM {table} AS x WHERE {stored_key}) \
             ELSE {gone} END",
            gone = format!(
                "(SELECT x.{name} FROM (SELECT 1) AS one LEFT JOIN {table} AS x ON false \
                 WHERE CAST({missing} AS int) IS NULL)",
                name = quote_ident(c.name),
                table = quote_table(self.table),
                missing = missing_kept_value(c.name, &self.from),
            ),
            flag = quote_ident(&keep_flag(index)),
            moved = quote_ident(MOVED),
            name = quote_ident(c.name),
            table = quote_table(self.table),
            expression = select_expression(c),
            stored_key = self.stored_key,
        )
    }

    /// The `WHERE` that drops a row keeping a value no stored row holds (none without kept
    /// columns).
    ///
    /// Such a row changes nothing: the row was deleted by a newer change already applied
    /// (from another partition, or before a replay), so the older change has nothing left to
    /// update. A row whose key changed is never dropped so: when its old row is gone, what it
    /// keeps cannot be had, and the row fails (a dead letter saying so) rather than vanish.
    fn filter(&self) -> String {
        if self.kept.is_empty() {
            return String::new();
        }
        format!(
            "\nWHERE NOT ({}) OR t.{moved} OR EXISTS (SELECT 1 FROM {} AS x WHERE {stored_key})",
            (0..self.kept.len())
                .map(|i| format!("t.{}", quote_ident(&keep_flag(i))))
                .collect::<Vec<_>>()
                .join(" OR "),
            quote_table(self.table),
            moved = quote_ident(MOVED),
            stored_key = self.stored_key,
        )
    }

    /// The names of the `UNNEST`'s columns (`t(…)`), in parameter order.
    fn aliases(&self) -> String {
        let moves = !self.kept.is_empty();
        self.columns
            .iter()
            .map(|c| quote_ident(c.name))
            .chain((0..self.kept.len()).map(|i| quote_ident(&keep_flag(i))))
            .chain(self.from.iter().map(|f| quote_ident(f)))
            .chain(moves.then(|| quote_ident(MOVED)))
            .chain(moves.then(|| quote_ident(CHANGE)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What follows `ON CONFLICT (key)`: `DO NOTHING` (insert-ignore), or `DO UPDATE SET` the
/// updated columns (behind the guard under newest-wins), then what tells inserted from updated.
fn conflict_action(
    columns: &[StatementColumn<'_>],
    key: &[String],
    conflict: &ConflictPolicy,
    partitioned: bool,
) -> String {
    let mut sql = String::new();
    let set: Vec<String> = columns
        .iter()
        .filter(|c| c.updated)
        .map(|c| format!("{0} = EXCLUDED.{0}", quote_ident(c.name)))
        .collect();
    match conflict {
        ConflictPolicy::InsertIgnore => {
            sql.push_str(" DO NOTHING\nRETURNING TRUE AS inserted");
        }
        ConflictPolicy::AlwaysUpdate | ConflictPolicy::NewestWins { .. } => {
            sql.push_str(" DO UPDATE SET\n    ");
            sql.push_str(&set.join(",\n    "));
            if let ConflictPolicy::NewestWins { column } = conflict {
                sql.push_str(&newest_wins_guard(columns, column));
            }
            sql.push_str(&returning_inserted(key, partitioned));
        }
    }
    sql
}

/// The newest-wins `WHERE` of the update: a newer `column` replaces an older one.
fn newest_wins_guard(columns: &[StatementColumn<'_>], column: &str) -> String {
    let guard = quote_ident(column);
    let mut sql = format!("\nWHERE EXCLUDED.{guard} > target.{guard}");
    // NULL is the oldest version: any value replaces it, it replaces none.
    if columns.iter().any(|c| c.name == column && c.nullable) {
        sql.push_str(&format!(
            "\n   OR (target.{guard} IS NULL AND EXCLUDED.{guard} IS NOT NULL)"
        ));
    }
    sql
}

/// The `RETURNING` of an updating upsert: whether each row was inserted, by `xmax`, or on a
/// partitioned table by whether its key existed in the statement's snapshot.
fn returning_inserted(key: &[String], partitioned: bool) -> String {
    if !partitioned {
        return "\nRETURNING (xmax = 0) AS inserted".to_owned();
    }
    let qualified = |alias: &str| {
        key.iter()
            .map(|k| format!("{alias}.{}", quote_ident(k)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "\nRETURNING NOT EXISTS (SELECT 1 FROM existing AS e WHERE ({}) = ({})) AS inserted",
        qualified("e"),
        qualified("target"),
    )
}

/// The `bool[]` parameter saying which rows changed their key (a `moved_from`).
const MOVED: &str = "sluice moved";

/// The `bigint[]` parameter of each row's key change LSN (a `moved_from`'s).
const CHANGE: &str = "sluice change";

/// A text naming a kept column whose old row is gone (a key change whose old key's delete
/// was applied first): cast to `int`, it fails the row's statement with it, so the row is
/// dead-lettered with this reason instead of storing NULL for a value Debezium did not send.
/// (It reads the row's key, so PostgreSQL cannot evaluate it before it is needed.)
fn missing_kept_value(column: &str, from: &[String]) -> String {
    let key = from
        .iter()
        .map(|f| format!("t.{}::text", quote_ident(f)))
        .collect::<Vec<_>>()
        .join(" || ', ' || ");
    let column = column.replace('\'', "''");
    format!(
        "'sluice: the value of column {column} Debezium did not send (an unchanged TOASTed \
         value) is in no stored row: the old row of this key change, key ' || {key} || ', is gone'"
    )
}

/// The reason a row's statement failed with when the statement itself raised it: the text
/// `missing_kept_value` makes, which PostgreSQL reports inside the integer syntax error its
/// cast raises (`invalid input syntax for type integer: "sluice: …"`).
pub fn raised_reason(message: &str) -> Option<&str> {
    let raised = message.strip_prefix("invalid input syntax for type integer: \"sluice: ")?;
    raised
        .starts_with("the value of column ")
        .then(|| raised.strip_suffix('"'))
        .flatten()
}

/// The name of the `bool[]` parameter of the `index`-th keepable column (not a column name:
/// it has a space and sluice's name).
fn keep_flag(index: usize) -> String {
    format!("sluice keep {index}")
}

/// The `SELECT` expression of a column: itself, or an array rebuilt in order from its JSON.
fn select_expression(column: &StatementColumn<'_>) -> String {
    let name = quote_ident(column.name);
    match column.sql_type {
        SqlType::Array(element) => {
            let element = element.item_cast();
            format!(
                "CASE WHEN {name} IS NULL THEN NULL ELSE ARRAY(SELECT e.value::{element} \
                 FROM jsonb_array_elements_text({name}) WITH ORDINALITY AS e(value, n) \
                 ORDER BY e.n) END"
            )
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::{missing_kept_value, raised_reason};

    #[test]
    fn a_reason_the_statement_raised_is_read_back_from_postgresqls_message() {
        // What PostgreSQL says when the text the statement makes is cast to int (key 7).
        let text = missing_kept_value("big", &["old id".into()]);
        assert!(
            text.starts_with("'sluice: the value of column big "),
            "{text}"
        );
        let message = "invalid input syntax for type integer: \"sluice: the value of column big \
             Debezium did not send (an unchanged TOASTed value) is in no stored row: the old \
             row of this key change, key 7, is gone\"";
        assert_eq!(
            raised_reason(message),
            Some(
                "the value of column big Debezium did not send (an unchanged TOASTed value) is \
                 in no stored row: the old row of this key change, key 7, is gone"
            )
        );
        for other in [
            "invalid input syntax for type integer: \"12x\"",
            "invalid input syntax for type macaddr: \"sluice: the value of column x\"",
            "invalid input syntax for type integer: \"sluice: x\"",
            "duplicate key value violates unique constraint \"items_pkey\"",
        ] {
            assert_eq!(raised_reason(other), None, "{other}");
        }
    }
}
