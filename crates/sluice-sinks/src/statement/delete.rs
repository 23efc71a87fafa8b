//! The deletes of a sink that deletes (tombstones as deletes, or Debezium change events): a
//! batch's keys, a key change's old key that sets its row aside for the new key's create, and
//! the removal of what was set aside once read (docs/ARCHITECTURE.md#sinks).

use super::{MOVED_ROWS, StatementColumn, array_params, array_params_from, aside_match, key_match};
use crate::names::{quote_ident, quote_table};

/// How long what a key change with an LSN set aside is kept after its create last read it:
/// a replay of the change within it (a source's capture re-sending what its slot had not
/// confirmed) finds the old row as the first delete found it. A row no create has read yet is
/// kept [`KEPT_UNREAD`] (a partition days behind, a dead letter replayed later).
pub const KEPT_MOVES: &str = "1 day";

/// How long a row set aside by a key change with an LSN is kept when no create has read it:
/// a create that needed nothing from it (it kept no value, or came first and read the old
/// row itself) never will.
pub const KEPT_UNREAD: &str = "7 days";

/// The removal of what key changes' deletes set aside, once their creates have read it:
/// one array per key column for the old keys, then one per key column for the new keys, then
/// the changes' LSNs.
///
/// A change with an LSN keeps its row aside, marked read (`read_at`), for [`KEPT_MOVES`]: a
/// replay of its create then reads the same old row (whose key the first copy took), rather
/// than finding it gone. What creates of the table read longer ago than that, or what none read
/// in [`KEPT_UNREAD`], is removed here.
pub fn consume_moved_statement(table: &str, key: &[StatementColumn<'_>]) -> String {
    let mut params = array_params(key.iter());
    push_new_keys_and_lsns(&mut params, key);
    let old: Vec<String> = (0..key.len()).map(|i| format!("c.\"old {i}\"")).collect();
    let new: Vec<String> = (0..key.len()).map(|i| format!("c.\"new {i}\"")).collect();
    let aliases: Vec<String> = old
        .iter()
        .chain(&new)
        .map(|a| a.trim_start_matches("c.").to_owned())
        .chain([quote_ident("lsn")])
        .collect();
    // The oldest set aside for the change: one per change with an LSN; without one (-1) the
    // changes between the same keys queue up, their deletes in the old key's partition order
    // and their creates in the new key's, so the oldest is this create's. A create without an
    // LSN that finds none (it did not wait for its delete: its wait ran out, or it never
    // waits) leaves a mark that its row was taken (-2), which its delete, when it comes,
    // removes instead of queueing a row no create would take but the next change's.
    format!(
        "WITH c AS (SELECT * FROM UNNEST({params}) WITH ORDINALITY AS c({aliases}, n)),\n\
         consumed AS (DELETE FROM {MOVED_ROWS} AS m USING c WHERE c.\"lsn\" IS NULL AND {aside}\n\
         AND m.seq = (SELECT min(m.seq) FROM {MOVED_ROWS} AS m WHERE {aside}) RETURNING c.n),\n\
         read AS (UPDATE {MOVED_ROWS} AS m SET read_at = now() FROM c \
         WHERE c.\"lsn\" IS NOT NULL AND {aside}),\n\
         expired AS (DELETE FROM {MOVED_ROWS} AS m WHERE m.target_table = '{literal}' \
         AND m.change_lsn >= 0 AND (m.read_at < now() - interval '{KEPT_MOVES}' \
         OR (m.read_at IS NULL AND m.moved_at < now() - interval '{KEPT_UNREAD}')) \
         AND NOT EXISTS (SELECT 1 FROM c WHERE c.\"lsn\" IS NOT NULL AND {aside}))\n\
         INSERT INTO {MOVED_ROWS} (target_table, old_key, new_key, change_lsn, image)\n\
         SELECT '{literal}', jsonb_build_array({old}), jsonb_build_array({new}), -2, NULL FROM c\n\
         WHERE c.\"lsn\" IS NULL AND c.n NOT IN (SELECT x.n FROM consumed AS x)",
        params = params.join(", "),
        aliases = aliases.join(", "),
        aside = aside_match(table, &old, &new, "c.\"lsn\""),
        literal = table.replace('\'', "''"),
        old = old.join(", "),
        new = new.join(", "),
    )
}

/// The delete of a batch's keys: `key` the key columns, `guard` the newest-wins column. Its
/// parameters: one array per key column, then the deletes' versions (under newest-wins), then
/// each delete's row number, which it returns for each row deleted. Under newest-wins a row
/// goes only when it is not newer than the delete (`target.g <= version`, a NULL version or a
/// stored NULL always).
pub fn delete_statement(
    table: &str,
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
) -> String {
    deletes(table, key, guard, false)
}

/// The delete of key changes' old keys ([`delete_statement`] with, before the row numbers,
/// one array per key column for the new keys and the changes' LSNs): it also sets each deleted row aside, as
/// `to_jsonb`, for the create of its new key to read what it keeps
/// (docs/ARCHITECTURE.md#sinks). One key change per statement.
pub fn moving_delete_statement(
    table: &str,
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
) -> String {
    deletes(table, key, guard, true)
}

/// The delete of a batch's keys ([`delete_statement`]), or of key changes' old keys that
/// sets each deleted row aside (`moving`, [`moving_delete_statement`]).
fn deletes(
    table: &str,
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
    moving: bool,
) -> String {
    let params = delete_params(key, guard, moving).join(", ");
    let aliases = delete_aliases(key, guard, moving).join(", ");
    let mut sql = format!(
        "DELETE FROM {} AS target\nUSING UNNEST({params}) AS d({aliases})\nWHERE {}",
        quote_table(table),
        keys_match(key, "target", "d"),
    );
    if let Some(guard) = guard {
        sql.push_str(&format!("\n  AND {}", not_newer("target", guard)));
    }
    if !moving {
        sql.push_str(&format!("\nRETURNING d.{}", quote_ident("sluice row")));
        return sql;
    }
    setting_aside(table, key, guard, &sql, (&params, &aliases))
}

/// The stored row `alias` is not newer than the delete `d` under newest-wins by `guard`
/// (a NULL version or a stored NULL: never newer).
fn not_newer(alias: &str, guard: &StatementColumn<'_>) -> String {
    format!(
        "(d.{version} IS NULL OR {alias}.{g} IS NULL OR {alias}.{g} <= d.{version})",
        version = quote_ident("sluice version"),
        g = quote_ident(guard.name),
    )
}

/// A delete's parameters: one array per key column, the versions (with a guard), with
/// `moving` one array per key column for the new keys and the LSNs, then the row numbers.
fn delete_params(
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
    moving: bool,
) -> Vec<String> {
    let mut params = array_params(key.iter().chain(guard));
    if moving {
        push_new_keys_and_lsns(&mut params, key);
    }
    params.push(format!("${}::int[]", params.len() + 1));
    params
}

/// The names of a delete's `UNNEST` columns (`d(…)`), in [`delete_params`]' order.
fn delete_aliases(
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
    moving: bool,
) -> Vec<String> {
    let mut aliases: Vec<String> = key.iter().map(|c| quote_ident(c.name)).collect();
    if guard.is_some() {
        aliases.push(quote_ident("sluice version"));
    }
    if moving {
        aliases.extend(new_key_aliases(key.len()).iter().map(|n| quote_ident(n)));
        aliases.push(quote_ident("sluice lsn"));
    }
    aliases.push(quote_ident("sluice row"));
    aliases
}

/// The names of a key change's new key columns in a moving delete (`sluice to <i>`).
fn new_key_aliases(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("sluice to {i}")).collect()
}

/// Each key column of `stored` (an alias) matched to the same of `wanted`, `AND`ed.
fn keys_match(key: &[StatementColumn<'_>], stored: &str, wanted: &str) -> String {
    key.iter()
        .map(|c| {
            let name = quote_ident(c.name);
            key_match(
                &format!("{stored}.{name}"),
                &format!("{wanted}.{name}"),
                c.sql_type,
                c.nullable,
            )
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The moving delete around `delete` (its guarded `DELETE … WHERE`), whose `params` and
/// `aliases` it reads again to set the old rows aside.
///
/// Every key change's delete leaves its mark: the old key's row as the statement found it,
/// NULL when there was none, so that its create never waits for a delete that came already
/// (held rows, migrations/0017_debezium_held_rows.sql). Under newest-wins a row newer than
/// the change is not its old row (the old key re-inserted since, found by a replayed
/// change; the delete keeps it) and is never set aside. A delete applied again (a replay)
/// sets aside the row it finds, as the first did; one that finds none (the first moved the
/// row already, or the old key holds a newer row) keeps the first's image, which the
/// replayed create then reads, and marks it unread.
/// Without an LSN, a mark that its create took its row already (-2) is removed instead.
fn setting_aside(
    table: &str,
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
    delete: &str,
    (params, aliases): (&str, &str),
) -> String {
    let qualified = |alias: &str, names: &mut dyn Iterator<Item = &str>| -> Vec<String> {
        names
            .map(|n| format!("{alias}.{}", quote_ident(n)))
            .collect()
    };
    let new = new_key_aliases(key.len());
    // Under newest-wins only a row not newer than the change is its old row: a replayed
    // change finds the old key re-inserted since, which it keeps and must not set aside (it
    // then keeps the image its first copy set aside). A row not newer that a replay finds is
    // the old row rebuilt by the replayed records before the change, and replaces the image
    // (an update of it that was a dead letter the first time is in it now). Without the guard
    // a replay is not safe where the old key was re-inserted since (docs/replication.md).
    let found = match guard {
        Some(guard) => format!(
            "{} AND {}",
            keys_match(key, "x", "d"),
            not_newer("x", guard)
        ),
        None => keys_match(key, "x", "d"),
    };
    format!(
        "WITH gone AS ({delete}\nRETURNING d.{row} AS {gone}),\n\
         taken AS (DELETE FROM {MOVED_ROWS} AS m WHERE m.seq = (SELECT min(t.seq) \
         FROM {MOVED_ROWS} AS t, UNNEST({params}) AS d({aliases}) \
         WHERE d.{lsn} IS NULL AND t.target_table = '{literal}' \
         AND t.old_key = jsonb_build_array({old}) AND t.new_key = jsonb_build_array({new}) \
         AND t.change_lsn = -2) RETURNING 1),\n\
         aside AS (INSERT INTO {MOVED_ROWS} AS m \
         (target_table, old_key, new_key, change_lsn, image)\n\
         SELECT '{literal}', jsonb_build_array({old}), jsonb_build_array({new}), \
         coalesce(d.{lsn}, -1), (SELECT to_jsonb(x) FROM {table} AS x WHERE {found})\n\
         FROM UNNEST({params}) AS d({aliases}) WHERE NOT EXISTS (SELECT 1 FROM taken)\n\
         ON CONFLICT (target_table, old_key, new_key, change_lsn) WHERE change_lsn >= 0 \
         DO UPDATE SET image = coalesce(EXCLUDED.image, m.image), moved_at = now(), \
         read_at = NULL)\n\
         SELECT g.{gone} FROM gone AS g",
        gone = quote_ident("sluice gone"),
        table = quote_table(table),
        literal = table.replace('\'', "''"),
        old = qualified("d", &mut key.iter().map(|c| c.name)).join(", "),
        new = qualified("d", &mut new.iter().map(String::as_str)).join(", "),
        row = quote_ident("sluice row"),
        lsn = quote_ident("sluice lsn"),
    )
}

/// Appends to `params` one array per key column (the new keys of key changes, typed as the
/// key) and then the changes' LSNs (`bigint[]`).
fn push_new_keys_and_lsns(params: &mut Vec<String>, key: &[StatementColumn<'_>]) {
    params.extend(array_params_from(params.len() + 1, key.iter()));
    params.push(format!("${}::bigint[]", params.len() + 1));
}
