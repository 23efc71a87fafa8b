//! A property of declared sinks, run by the `sluice` binary against the real Kafka and
//! PostgreSQL: for random tables (column types, nullability, keys of one or two columns,
//! conflict policies, `insert_only` columns, nested fields, batch sizes, all drawn from the
//! supported set) and random records (keys from a small space so they repeat within and across
//! batches, values at their types' edges in every JSON form sluice reads, broken values,
//! missing fields, payloads that are not one JSON object), after `sluice run`:
//!
//! - each table holds exactly the rows of the model (`property::model`), every value equal to
//!   what PostgreSQL makes of the record's own value (the expected literal cast to the column's
//!   type; numerics digit for digit, floats exactly, JSON by value);
//! - every record not stored is a `decode_error` dead letter whose reason names the first
//!   broken field in the mapping's column order (or says why the payload is not one object);
//!   no other record is dead-lettered;
//! - no run exits on its own or non-zero, nor logs an ERROR.
//!
//! Records go in two rounds, one `sluice run` each. The seed is printed; set
//! `SLUICE_PROPERTY_SEED` to run one again. On a failure the case (seed, DDL, mapping, every
//! record and its expectation) is written to `case.txt` in the test's directory, kept.
//!
//! The cases this test found sluice getting wrong (`property::types::Known`: `real-range`,
//! `insert-only-batch`, `array-negative-zero`, `whole-tree-numeric`, `long-key`, `json-digits`)
//! are fixed and always drawn. `numeric-scale` (`numeric(p, s)` with `s > p` or `s < 0`) is
//! refused at validation, so it is drawn only when `SLUICE_PROPERTY_KNOWN_FAILING` names it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod property;
mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::PgConnection;

use property::model::{self, Expect, Record};
use property::table::{Table, quote};
use support::{Env, Running};

/// The variable that fixes the seed.
const SEED_VARIABLE: &str = "SLUICE_PROPERTY_SEED";

/// Rounds of records, each consumed by its own `sluice run`.
const ROUNDS: usize = 2;

#[tokio::test]
async fn random_tables_and_records_end_as_the_model_says() {
    let seed = match std::env::var(SEED_VARIABLE) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VARIABLE}={text} is not a u64")),
        Err(_) => uuid::Uuid::new_v4().as_u64_pair().0,
    };
    eprintln!("{SEED_VARIABLE}={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let tables: Vec<Table> = (0..rng.random_range(6..=8))
        .map(|i| Table::generate(i, &mut rng))
        .collect();
    let Some(env) = Env::new().await else {
        return;
    };
    let started = Instant::now();
    let ddl: String = tables.iter().map(Table::ddl).collect();
    let mapping = tables
        .iter()
        .map(Table::mapping)
        .collect::<Vec<_>>()
        .join("\n")
        .replace("{prefix}", &env.prefix);
    let mut case = format!("{SEED_VARIABLE}={seed}\n\n{ddl}\n{mapping}\n");
    let case_file = env.dir.join("case.txt");
    std::fs::write(&case_file, &case).unwrap();
    {
        let mut conn = env.schema.connect().await;
        sqlx::raw_sql(&ddl)
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{ddl}"));
    }
    for table in &tables {
        sluice_testkit::create_topic(&env.stack, &topic(&env, table), 1).await;
    }
    let file = env.dir.join("sinks.toml");
    std::fs::write(&file, &mapping).unwrap();
    let out = env.output(&["sinks", "validate", &file.display().to_string()], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{SEED_VARIABLE}={seed}: the mapping does not validate\n{}{}\n{ddl}\n{mapping}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );

    let mut records: Vec<Vec<Record>> = vec![Vec::new(); tables.len()];
    for round in 0..ROUNDS {
        for (table, records) in tables.iter().zip(&mut records) {
            let first = records.len() as i64;
            let batch: Vec<Record> = (0..rng.random_range(15..=40))
                .map(|i| model::record(table, first + i, &mut rng))
                .collect();
            let raw: Vec<sluice_testkit::RawRecord> = batch
                .iter()
                .map(|r| (Some(table.sink.clone().into_bytes()), r.payload.clone()))
                .collect();
            sluice_testkit::produce(&env.stack, &topic(&env, table), &raw).await;
            records.extend(batch);
        }
        let run = run_to_end(&env, &tables, &file, &format!("round-{round}")).await;
        let errors: Vec<String> = run
            .events()
            .into_iter()
            .filter(|e| e["level"] == "ERROR")
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{SEED_VARIABLE}={seed}: sluice run logged errors:\n{}",
            errors.join("\n")
        );
    }
    eprintln!(
        "{} tables, {} records, {} rounds in {:.1?}",
        tables.len(),
        records.iter().map(Vec::len).sum::<usize>(),
        ROUNDS,
        started.elapsed()
    );

    let mut conn = env.schema.connect().await;
    let mut failures = Vec::new();
    for (table, records) in tables.iter().zip(&records) {
        failures.extend(check_rows(&mut conn, table, records).await);
        failures.extend(check_dead_letters(&mut conn, &topic(&env, table), table, records).await);
        writeln!(case, "--- records of {} ({})", table.sink, table.table).unwrap();
        for (offset, record) in records.iter().enumerate() {
            writeln!(case, "{offset}: {} => {:?}", shown(record), record.expect).unwrap();
        }
    }
    if !failures.is_empty() {
        std::fs::write(&case_file, &case).unwrap();
        panic!(
            "{SEED_VARIABLE}={seed}: {} failures (the case: {})\n\n{}",
            failures.len(),
            case_file.display(),
            failures.join("\n\n")
        );
    }
    let topics: Vec<String> = tables.iter().map(|t| topic(&env, t)).collect();
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(&env.stack, &topics).await;
    env.cleanup().await;
}

fn topic(env: &Env, table: &Table) -> String {
    format!("{}-{}", env.prefix, table.sink)
}

/// A record's payload as text, cut to a readable length.
fn shown(record: &Record) -> String {
    match &record.payload {
        None => "(tombstone)".into(),
        Some(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            match text.char_indices().nth(400) {
                Some((cut, _)) => format!("{:?}…", &text[..cut]),
                None => format!("{text:?}"),
            }
        }
    }
}

/// Runs every sink until each has committed every record of its topic, then stops the
/// process with SIGTERM and asserts a clean exit (it never exits on its own meanwhile).
async fn run_to_end(env: &Env, tables: &[Table], file: &std::path::Path, label: &str) -> Running {
    let file = file.display().to_string();
    let mut run = env.spawn_run(label, &[("SLUICE_SINKS_FILE", file.as_str())]);
    let deadline = Instant::now() + Duration::from_secs(120);
    for table in tables {
        let (group, topic) = (env.group(&table.sink), topic(env, table));
        loop {
            run.assert_alive();
            let offsets = env.admin().group_offsets(&group, &topic).unwrap();
            let end: i64 = offsets.iter().map(|p| p.high).sum();
            let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
            if end > 0 && committed == end {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{group}: committed {committed}/{end}\n{}",
                run.tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(60));
    assert!(status.success(), "{label}: {status}\n{}", run.tail());
    run
}

/// One compared row: (in the model, in the table, stored values, expected values, equal).
type Compared = (
    Option<i64>,
    bool,
    Vec<Option<String>>,
    Vec<Option<String>>,
    Vec<bool>,
);

/// The table's rows against the model's: joined on the key by PostgreSQL's own equality,
/// each value compared in its canonical form.
async fn check_rows(conn: &mut PgConnection, table: &Table, records: &[Record]) -> Vec<String> {
    let expected: Vec<model::Row> = model::expected_rows(table, records).into_values().collect();
    let columns = &table.columns;
    let wanted = |i: usize| format!("(e.e{i})::{}", columns[i].ty.ddl());
    let stored = |i: usize| format!("t.{}", quote(&columns[i].name));
    let list = |f: &dyn Fn(usize) -> String| (0..columns.len()).map(f).collect::<Vec<_>>();
    let sql = format!(
        "SELECT e.n, t.ctid IS NOT NULL, ARRAY[{got}]::text[], ARRAY[{want}]::text[], \
         ARRAY[{same}]::bool[]\n\
         FROM unnest({params}) WITH ORDINALITY AS e({names}, n)\n\
         FULL JOIN {table} AS t ON {join}",
        got = list(&|i| format!("{}::text", columns[i].ty.canon(&stored(i)))).join(", "),
        want = list(&|i| format!("{}::text", columns[i].ty.canon(&wanted(i)))).join(", "),
        same = list(&|i| format!(
            "{} IS NOT DISTINCT FROM {}",
            columns[i].ty.canon(&stored(i)),
            columns[i].ty.canon(&wanted(i))
        ))
        .join(", "),
        params = list(&|i| format!("${}::text[]", i + 1)).join(", "),
        names = list(&|i| format!("e{i}")).join(", "),
        table = quote(&table.table),
        join = table
            .key
            .iter()
            .map(|&k| format!("{} = {}", stored(k), wanted(k)))
            .collect::<Vec<_>>()
            .join(" AND "),
    );
    let mut query = sqlx::query_as::<_, Compared>(&sql);
    for i in 0..columns.len() {
        let cells: Vec<Option<String>> = expected.iter().map(|r| r.cells[i].clone()).collect();
        query = query.bind(cells);
    }
    let compared = match query.fetch_all(&mut *conn).await {
        Ok(rows) => rows,
        Err(error) => {
            let culprits = unreadable_literals(conn, table, &expected).await;
            return vec![format!(
                "{}: comparing failed: {error}\n{sql}\nliterals PostgreSQL refuses: {culprits:?}",
                table.table
            )];
        }
    };
    let mut failures = Vec::new();
    for (n, in_table, got, want, same) in compared {
        if n.is_some() && in_table && same.iter().all(|s| *s) {
            continue;
        }
        let mut text = format!("{}:\n{}", table.table, table.ddl());
        match (n, in_table) {
            (Some(_), false) => text.push_str("a row of the model is missing from the table\n"),
            (None, _) => text.push_str("the table has a row the model does not\n"),
            _ => text.push_str("a row differs from the model\n"),
        }
        for (i, column) in columns.iter().enumerate() {
            let mark = if same[i] { " " } else { "≠" };
            writeln!(
                text,
                " {mark} {}: want {:?} got {:?}",
                column.name, want[i], got[i]
            )
            .unwrap();
        }
        if let Some(n) = n {
            let key = &expected[n as usize - 1].key;
            text.push_str("records of this key (offset: payload):\n");
            for (offset, record) in records.iter().enumerate() {
                if matches!(&record.expect, Expect::Row(r) if r.key == *key) {
                    writeln!(text, "  {offset}: {}", shown(record)).unwrap();
                }
            }
        }
        failures.push(text);
    }
    failures
}

/// The expected literals PostgreSQL does not read as their column's type (a model bug).
async fn unreadable_literals(
    conn: &mut PgConnection,
    table: &Table,
    expected: &[model::Row],
) -> Vec<(String, String, String)> {
    let mut culprits = Vec::new();
    for row in expected {
        for (column, cell) in table.columns.iter().zip(&row.cells) {
            let Some(literal) = cell else { continue };
            let sql = format!("SELECT ($1::text)::{}::text", column.ty.ddl());
            if let Err(error) = sqlx::query_scalar::<_, String>(&sql)
                .bind(literal)
                .fetch_one(&mut *conn)
                .await
            {
                culprits.push((column.name.clone(), literal.clone(), error.to_string()));
            }
        }
    }
    culprits
}

/// The topic's dead letters against the model's: exactly the refused records, each a
/// `decode_error` with the expected reason.
async fn check_dead_letters(
    conn: &mut PgConnection,
    topic: &str,
    table: &Table,
    records: &[Record],
) -> Vec<String> {
    let dead: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT kafka_offset, error_kind, reason FROM dead_letter_events WHERE topic = $1 \
         ORDER BY kafka_offset",
    )
    .bind(topic)
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let mut letters: BTreeMap<i64, Vec<(String, String)>> = BTreeMap::new();
    for (offset, kind, reason) in dead {
        letters.entry(offset).or_default().push((kind, reason));
    }
    let mut failures = Vec::new();
    for (offset, record) in records.iter().enumerate() {
        let offset = offset as i64;
        let found = letters.remove(&offset).unwrap_or_default();
        let problem = match (&record.expect, found.as_slice()) {
            (Expect::Row(_), []) => None,
            (Expect::Row(_), found) => Some(format!("a valid record is dead-lettered: {found:?}")),
            (Expect::Dead { reasons, .. }, []) => Some(format!(
                "no dead letter; expected a reason starting {reasons:?}"
            )),
            (
                Expect::Dead {
                    kind: want,
                    reasons,
                },
                [(kind, reason)],
            ) => {
                let named = reasons.iter().any(|r| reason.starts_with(r.as_str()));
                let kind_ok = want.is_none_or(|w| w == kind);
                (!kind_ok || !named).then(|| {
                    format!("dead letter {kind}: {reason:?}; expected {want:?} {reasons:?}")
                })
            }
            (Expect::Dead { .. }, found) => {
                Some(format!("dead-lettered more than once: {found:?}"))
            }
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "{} offset {offset}: {problem}\n  payload: {}\n{}",
                table.table,
                shown(record),
                table.ddl()
            ));
        }
    }
    for (offset, found) in letters {
        failures.push(format!(
            "{} offset {offset}: a dead letter of no record: {found:?}",
            table.table
        ));
    }
    failures
}
