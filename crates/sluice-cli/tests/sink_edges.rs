//! An edge table of our own, proved through `sluice run` with a SIGKILL in the middle and a
//! replay from earliest that changes nothing. The rule: a mapping that `sluice sinks validate`
//! accepts never stalls a pipeline and never stores a value other than the one in the
//! record; what the table cannot hold is dead-lettered per record with a reason naming the
//! field.
//!
//! The table (`"<schema>_Edge"."edge rows"`, a schema the test creates) has a composite key
//! with a uuid (`tenant uuid, seq bigint`, seqs at the bigint edges, uuids written in four
//! forms), a `varchar(5)` fed multi-byte characters, a `text[]` fed the elements array
//! literals quote (`,` `"` `{}` `\` `NULL`), a `jsonb` fed deep nesting, unicode, duplicate
//! keys and big numbers, integers at the edge of every width and a `numeric(20,4)` fed raw
//! JSON digits; `newest-wins` on `version` (an older version never overwrites a newer row; a
//! tie keeps the row stored first). Thousands of records, keys repeated across batches and
//! within one (in another uuid form), some at every edge just past what the table holds (a
//! number among the `text[]` elements is one: the record is dead-lettered naming the element).
//!
//! 1. `sluice run` is SIGKILLed after some rows landed and before the end, started again
//!    and run to the end (SIGTERM, exit 0): every key's row is its model row, text for text
//!    (`col::text`, NULL apart from `'NULL'`), once; the dead letters are exactly the
//!    invalid records, once each, each reason naming its field;
//! 2. `sluice replay edges --to earliest --execute`, then `sluice run` to the end again: the
//!    table (with every row's `xmin`) and the dead-letter table (every column, `id` and
//!    `recorded_at` too) are unchanged.
//!
//! A second test holds the numbers: a `jsonb`/`json` value and a `numeric[]` element get the
//! record's digits, not the nearest f64's; sluice's own JSON limits (a number beyond
//! ±1.8e308, nesting deeper than 128) make a record not JSON to it, a dead letter that says so.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::{Env, Running};

/// Records produced.
const RECORDS: usize = 4_000;
/// Distinct keys they are spread over (each key is written ~4 times, across batches).
const KEYS: usize = 900;
/// Partitions of the topic (records keyed by the row's key: a key's versions keep order).
const PARTITIONS: i32 = 3;
/// Rows the first run must have stored before it is killed.
const PROGRESS: i64 = 300;
/// Every `INVALID_EVERY`-th record breaks one edge ...
const INVALID_EVERY: usize = 13;
/// ... counting from this one.
const INVALID_AT: usize = 6;

const DDL: &str = r#"
CREATE SCHEMA "{schema}";
CREATE TABLE "{schema}"."edge rows" (
    tenant  UUID NOT NULL,
    seq     BIGINT NOT NULL,
    version BIGINT NOT NULL,
    name    VARCHAR(5),
    tags    TEXT[],
    doc     JSONB,
    small   SMALLINT,
    mid     INTEGER,
    big     BIGINT,
    amount  NUMERIC(20,4),
    PRIMARY KEY (tenant, seq)
);
"#;

const MAPPING: &str = r#"
[[sink]]
name = "edges"
topic = "{topic}"
table = "{schema}.edge rows"
key = ["tenant", "seq"]
conflict = { newest-wins = "version" }
batch_size = 20

[sink.columns]
tenant = { field = "tenant" }
seq = { field = "seq" }
version = { field = "version" }
name = { field = "name" }
tags = { field = "tags" }
doc = { field = "doc" }
small = { field = "small" }
mid = { field = "mid" }
big = { field = "big" }
amount = { field = "amount" }
"#;

/// Tenants: the nil and the max uuid among them.
const TENANTS: [&str; 4] = [
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "67e55044-10b1-426f-9247-bb680e5fe0c8",
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
];

/// `varchar(5)`: five characters, however many bytes (`None`: the field is absent).
const NAMES: [Option<&str>; 7] = [
    Some("ñßé漢😀"),
    Some("😀😀😀😀😀"),
    Some("e\u{301}e\u{301}e"),
    Some("\"',\\{"),
    Some(""),
    Some("NULL"),
    None,
];

/// `text[]`: elements an array literal must quote, the string `NULL` apart from NULL.
const TAGS: [Option<&[&str]>; 6] = [
    Some(&[",", "\"", "{}", "\\", "NULL"]),
    Some(&["null", "Null", " ", "", "{a,b}", "a\"b\\c"]),
    Some(&[]),
    Some(&["ñ", "漢😀", "\t\n", "}{"]),
    None,
    Some(&["\\\\", "\"\"", ",,", "NULL "]),
];

const DOC_VARIANTS: usize = 9;

/// `jsonb` documents as the record writes them (`None`: JSON `null`, stored as SQL NULL).
fn docs() -> Vec<Option<String>> {
    [
        Some(nested(100)),
        Some(
            r#"{"ñ": "漢字😀", "esc": "\u00e9\ud83d\ude00", "rtl": "مرحبا", "zwj": "👩‍👩‍👧", "bom": "\ufeff", "ctl": "\u0001\t"}"#
                .to_owned(),
        ),
        Some(
            r#"{"i64max": 9223372036854775807, "i64min": -9223372036854775808, "u64max": 18446744073709551615, "max": 1.7976931348623157e308, "tiny": 5e-324, "half": -0.5}"#
                .to_owned(),
        ),
        Some(r#""a lone string""#.to_owned()),
        Some(r#"{"": 1, "a\"b": [null, {"\\": "}"}], "k": 1, "k": 2}"#.to_owned()),
        None,
        Some("[]".to_owned()),
        Some("true".to_owned()),
        Some("0".to_owned()),
    ]
    .into()
}

/// `depth` levels of objects and arrays, alternating, around a string.
fn nested(depth: usize) -> String {
    let mut text = String::new();
    for level in 0..depth {
        text.push_str(if level % 2 == 0 { r#"{"d": "# } else { "[" });
    }
    text.push_str(r#""bottom""#);
    for level in (0..depth).rev() {
        text.push(if level % 2 == 0 { '}' } else { ']' });
    }
    text
}

const SMALLS: [&str; 4] = ["-32768", "32767", "0", "-1"];
const MIDS: [&str; 4] = ["-2147483648", "2147483647", "0", "-1"];
const BIGS: [&str; 4] = ["-9223372036854775808", "9223372036854775807", "0", "1"];
/// `numeric(20,4)`: raw JSON digits, each with four places (so the text comes back as is).
const AMOUNTS: [Option<&str>; 5] = [
    Some("9999999999999999.9999"),
    Some("12345678901234.5678"),
    Some("-9999999999999999.9999"),
    Some("0.0001"),
    None,
];

/// One edge just past what the table holds: the field the reason must name, the record's
/// field it replaces (`None`: removes it) and its raw JSON.
struct Invalid {
    named: &'static str,
    field: &'static str,
    json: Option<String>,
}

fn invalids() -> Vec<Invalid> {
    let bad = |named: &'static str, field: &'static str, json: &str| Invalid {
        named,
        field,
        json: Some(json.to_owned()),
    };
    vec![
        bad("name", "name", r#""ñßé漢😀x""#),
        bad("name", "name", r#""a\u0000b""#),
        bad("tags[2]", "tags", r#"["a", "b", 5, "NULL"]"#),
        bad("tags[1]", "tags", r#"["a", "x\u0000y"]"#),
        bad("doc", "doc", r#"{"a": ["x\u0000y"]}"#),
        bad("doc", "doc", r#"{"k\u0000": 1}"#),
        bad("small", "small", "-32769"),
        bad("small", "small", "32768"),
        bad("small", "small", "1.5"),
        bad("mid", "mid", "-2147483649"),
        bad("mid", "mid", "2147483648"),
        bad("big", "big", "-9223372036854775809"),
        bad("big", "big", "9223372036854775808"),
        bad("amount", "amount", "99999999999999999.0000"),
        bad("amount", "amount", "9999999999999999.99995"),
        bad("tenant", "tenant", r#""not-a-uuid""#),
        Invalid {
            named: "version",
            field: "version",
            json: None,
        },
    ]
}

/// The seq of key `k`: the bigint edges first.
fn seq(k: usize) -> i64 {
    match k {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => -1,
        3 => 0,
        k => k as i64 * 1_000_000_007,
    }
}

/// A uuid as record `i` writes it: hyphenated, upper case, braced or simple.
fn uuid_form(canonical: &str, i: usize) -> String {
    match i % 4 {
        0 => canonical.to_owned(),
        1 => canonical.to_uppercase(),
        2 => format!("{{{canonical}}}"),
        _ => canonical.replace('-', ""),
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// One produced record: its key, version, the variants it carries and, when it breaks an
/// edge, which one.
struct Record {
    rid: usize,
    key: usize,
    version: i64,
    name: usize,
    tags: usize,
    doc: usize,
    small: usize,
    mid: usize,
    big: usize,
    amount: usize,
    invalid: Option<usize>,
}

impl Record {
    fn new(rid: usize) -> Record {
        // A key recurs every KEYS records (in later batches); now and then the record right
        // after one has its key too (in the same batch, in another uuid form).
        let base = if rid % 10 == 9 && rid / KEYS % 2 == 1 {
            rid - 1
        } else {
            rid
        };
        Record {
            rid,
            key: base * 7919 % KEYS,
            // Out of order, with ties: the model keeps the first of equal versions.
            version: (rid * 37 % 11) as i64,
            name: rid % NAMES.len(),
            tags: rid / 2 % TAGS.len(),
            doc: rid / 3 % DOC_VARIANTS,
            small: rid % SMALLS.len(),
            mid: rid / 4 % MIDS.len(),
            big: rid / 5 % BIGS.len(),
            amount: rid / 6 % AMOUNTS.len(),
            invalid: None,
        }
    }

    fn tenant(&self) -> &'static str {
        TENANTS[self.key % TENANTS.len()]
    }

    /// The Kafka key: the row's key, so all versions of a row share a partition.
    fn kafka_key(&self) -> String {
        format!("{}/{}", self.tenant(), seq(self.key))
    }

    /// The record's value as raw JSON text (`rid` first: dead letters are matched by it).
    fn text(&self, docs: &[Option<String>], invalids: &[Invalid]) -> String {
        let mut fields: Vec<(&str, Option<String>)> = vec![
            (
                "tenant",
                Some(json_string(&uuid_form(
                    self.tenant(),
                    self.rid / KEYS + self.rid,
                ))),
            ),
            ("seq", Some(seq(self.key).to_string())),
            ("version", Some(self.version.to_string())),
            ("name", NAMES[self.name].map(json_string)),
            (
                "tags",
                TAGS[self.tags].map(|t| serde_json::to_string(t).unwrap()),
            ),
            (
                "doc",
                Some(docs[self.doc].clone().unwrap_or_else(|| "null".into())),
            ),
            ("small", Some(SMALLS[self.small].to_owned())),
            ("mid", Some(MIDS[self.mid].to_owned())),
            ("big", Some(BIGS[self.big].to_owned())),
            ("amount", AMOUNTS[self.amount].map(str::to_owned)),
        ];
        if let Some(invalid) = self.invalid.map(|n| &invalids[n]) {
            let field = fields
                .iter_mut()
                .find(|(f, _)| *f == invalid.field)
                .unwrap();
            field.1.clone_from(&invalid.json);
        }
        let mut text = format!(r#"{{"rid": {}"#, self.rid);
        for (field, json) in fields {
            if let Some(json) = json {
                text.push_str(&format!(r#", "{field}": {json}"#));
            }
        }
        text.push_str(r#", "ignored": {"by": "the mapping"}}"#);
        text
    }
}

/// A row as text: tenant, seq, version, name, tags, doc, small, mid, big, amount.
type Row = Vec<Option<String>>;

const ROW_SQL: &str = "SELECT tenant::text, seq::text, version::text, name, tags::text, \
     doc::text, small::text, mid::text, big::text, amount::text FROM {table}";

type RowTuple = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn row(t: RowTuple) -> Row {
    vec![t.0, t.1, t.2, t.3, t.4, t.5, t.6, t.7, t.8, t.9]
}

/// The test's schema, table, topic and mapping file, on top of the support environment.
struct Edge {
    env: Env,
    schema: String,
    table: String,
    topic: String,
    file: String,
}

impl Edge {
    /// `ddl` and `mapping` with `{schema}` (and `{topic}`) replaced; `table` in that schema.
    async fn new(ddl: &str, mapping: &str, table: &str) -> Option<Edge> {
        let env = Env::new().await?;
        let schema = format!("{}_Edge", env.schema.name);
        {
            let mut conn = env.schema.connect().await;
            sqlx::raw_sql(&ddl.replace("{schema}", &schema))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        let topic = format!("{}-edges", env.prefix);
        sluice_testkit::create_topic(&env.stack, &topic, PARTITIONS).await;
        let file: PathBuf = env.dir.join("edges.toml");
        std::fs::write(
            &file,
            mapping
                .replace("{topic}", &topic)
                .replace("{schema}", &schema),
        )
        .unwrap();
        Some(Edge {
            table: format!(r#""{schema}"."{table}""#),
            schema,
            topic,
            file: file.display().to_string(),
            env,
        })
    }

    fn group(&self) -> String {
        self.env.group("edges")
    }

    /// (end, committed) offsets summed over the topic's partitions.
    fn offsets(&self) -> (i64, i64) {
        let offsets = self
            .env
            .admin()
            .group_offsets(&self.group(), &self.topic)
            .unwrap();
        (
            offsets.iter().map(|p| p.high).sum(),
            offsets.iter().map(|p| p.committed.unwrap_or(0)).sum(),
        )
    }

    fn spawn(&self, label: &str) -> Running {
        self.env.spawn_run(
            label,
            &[
                ("SLUICE_SINKS_FILE", self.file.as_str()),
                // Static membership: the run after the SIGKILL takes the partitions back at
                // once instead of waiting out the dead member's session.
                ("STORAGE_INSTANCE_ID", "edge-test"),
            ],
        )
    }

    /// Runs until every record is committed, then SIGTERM and a clean exit.
    async fn run_to_end(&self, label: &str) -> Running {
        let mut run = self.spawn(label);
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            run.assert_alive();
            let (end, committed) = self.offsets();
            if end > 0 && committed == end {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{label}: committed {committed}/{end}\n{}",
                run.tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        run.signal("TERM");
        let status = run.wait(Duration::from_secs(60));
        assert_eq!(status.code(), Some(0), "{label}: {status}\n{}", run.tail());
        run
    }

    async fn rows(&self) -> Vec<Row> {
        let mut conn = self.env.schema.connect().await;
        let rows: Vec<RowTuple> = sqlx::query_as(&ROW_SQL.replace("{table}", &self.table))
            .fetch_all(&mut conn)
            .await
            .unwrap();
        rows.into_iter().map(row).collect()
    }

    /// The table (each row with its `xmin`: a rewrite shows) and every column of every
    /// dead letter.
    async fn snapshot(&self) -> (Vec<String>, Vec<String>) {
        let mut conn = self.env.schema.connect().await;
        let table = sqlx::query_scalar(&format!(
            "SELECT xmin::text || ' ' || to_jsonb(t)::text FROM {} t ORDER BY tenant, seq",
            self.table
        ))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let dead =
            sqlx::query_scalar("SELECT to_jsonb(d)::text FROM dead_letter_events d ORDER BY id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        (table, dead)
    }

    /// The dead letters as (partition, offset, kind, reason, payload).
    async fn dead_letters(&self) -> Vec<(i32, i64, String, String, Vec<u8>)> {
        let mut conn = self.env.schema.connect().await;
        sqlx::query_as(
            "SELECT partition, kafka_offset, error_kind, reason, payload FROM dead_letter_events \
             WHERE topic = $1 ORDER BY partition, kafka_offset",
        )
        .bind(&self.topic)
        .fetch_all(&mut conn)
        .await
        .unwrap()
    }

    async fn cleanup(self) {
        sluice_testkit::delete_topics(&self.env.stack, &[self.topic.as_str()]).await;
        {
            let mut conn = self.env.schema.connect().await;
            sqlx::raw_sql(&format!(r#"DROP SCHEMA "{}" CASCADE"#, self.schema))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        self.env.cleanup().await;
    }
}

/// PostgreSQL's own text of a `text[]` holding exactly `elements` (bound as an array, not
/// through sluice's path) and of the record's JSON read as `jsonb`: what the table must hold.
async fn oracle(env: &Env, docs: &[Option<String>]) -> (Vec<Option<String>>, Vec<Option<String>>) {
    let mut conn = env.schema.connect().await;
    let mut tags = Vec::new();
    for elements in TAGS {
        let text: Option<String> = match elements {
            None => None,
            Some(elements) => Some(
                sqlx::query_scalar("SELECT $1::text[]::text")
                    .bind(elements.to_vec())
                    .fetch_one(&mut conn)
                    .await
                    .unwrap(),
            ),
        };
        tags.push(text);
    }
    let mut jsonb = Vec::new();
    for doc in docs {
        let text: Option<String> = match doc {
            None => None,
            Some(doc) => Some(
                sqlx::query_scalar("SELECT ($1::text)::jsonb::text")
                    .bind(doc)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap(),
            ),
        };
        jsonb.push(text);
    }
    (tags, jsonb)
}

/// The `rid` a record's payload starts with.
fn rid_of(payload: &[u8]) -> usize {
    let text = String::from_utf8_lossy(payload);
    let rest = text
        .strip_prefix(r#"{"rid": "#)
        .unwrap_or_else(|| panic!("a payload of this test: {text}"));
    rest[..rest.find(',').unwrap()].parse().unwrap()
}

fn totals(run: &Running) -> Value {
    let totals = run.events_named("pipeline totals");
    assert_eq!(totals.len(), 1, "one totals line: {totals:?}");
    totals[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_table_survives_a_sigkill_and_a_replay_from_earliest_changes_nothing() {
    let Some(edge) = Edge::new(DDL, MAPPING, "edge rows").await else {
        return;
    };
    let started = Instant::now();
    let validated = edge.env.output(&["sinks", "validate", &edge.file], &[]);
    assert_eq!(
        validated.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&validated.stdout),
        String::from_utf8_lossy(&validated.stderr)
    );

    // The records; the model: per key, in produce order (a key's versions share a
    // partition), the first valid record of the highest version.
    let docs = docs();
    assert_eq!(docs.len(), DOC_VARIANTS);
    let invalids = invalids();
    let mut records: Vec<Record> = (0..RECORDS).map(Record::new).collect();
    for (n, record) in records
        .iter_mut()
        .filter(|r| r.rid % INVALID_EVERY == INVALID_AT)
        .enumerate()
    {
        record.invalid = Some(n % invalids.len());
    }
    let mut model: BTreeMap<(&str, i64), (i64, usize)> = BTreeMap::new();
    for record in records.iter().filter(|r| r.invalid.is_none()) {
        let key = (record.tenant(), seq(record.key));
        match model.get(&key) {
            Some((version, _)) if *version >= record.version => {}
            _ => {
                model.insert(key, (record.version, record.rid));
            }
        }
    }
    let invalid_rids: BTreeMap<usize, &Invalid> = records
        .iter()
        .filter_map(|r| r.invalid.map(|n| (r.rid, &invalids[n])))
        .collect();
    assert!(
        model.len() > KEYS * 9 / 10,
        "most keys have a valid version"
    );
    assert!(
        invalid_rids.len() >= 3 * invalids.len(),
        "every edge is broken several times"
    );
    let produced: Vec<sluice_testkit::RawRecord> = records
        .iter()
        .map(|r| {
            (
                Some(r.kafka_key().into_bytes()),
                Some(r.text(&docs, &invalids).into_bytes()),
            )
        })
        .collect();
    sluice_testkit::produce(&edge.env.stack, &edge.topic, &produced).await;

    // 1. SIGKILL after some rows landed, before the end.
    let count = format!("SELECT count(*) FROM {}", edge.table);
    let mut first = edge.spawn("first");
    let seen = edge
        .env
        .wait_rows(&count, PROGRESS, &mut first, Duration::from_secs(120))
        .await;
    first.child.kill().unwrap(); // SIGKILL
    let status = first.wait(Duration::from_secs(10));
    assert_eq!(status.signal(), Some(9), "SIGKILLed: {status}");
    let rows_at_kill = edge.env.count(&count).await;
    let (end, committed) = edge.offsets();
    println!(
        "SIGKILL after {:.2} s with {seen}+ rows: {rows_at_kill} rows of {}, committed \
         {committed} of {end} offsets",
        started.elapsed().as_secs_f64(),
        model.len()
    );
    assert_eq!(end, RECORDS as i64);
    assert!(
        rows_at_kill < model.len() as i64 && committed < end,
        "killed mid-ingest: {rows_at_kill} rows, {committed} of {end} committed"
    );

    // ... started again, to the end.
    let second = edge.run_to_end("second").await;
    let second_totals = totals(&second);
    println!("after the restart: {second_totals}");
    assert_eq!(
        second_totals["inserted"],
        serde_json::json!(model.len() as i64 - rows_at_kill),
        "the restart inserted exactly the missing rows: {second_totals}"
    );

    // Every key's row is its model row, text for text, once.
    let (tags_text, docs_text) = oracle(&edge.env, &docs).await;
    assert_eq!(
        tags_text[0].as_deref(),
        Some(r#"{",","\"","{}","\\","NULL"}"#),
        "the oracle quotes as PostgreSQL does"
    );
    let want: Vec<Row> = model
        .iter()
        .map(|(&(tenant, seq), &(version, rid))| {
            let r = &records[rid];
            vec![
                Some(tenant.to_owned()),
                Some(seq.to_string()),
                Some(version.to_string()),
                NAMES[r.name].map(str::to_owned),
                tags_text[r.tags].clone(),
                docs_text[r.doc].clone(),
                Some(SMALLS[r.small].to_owned()),
                Some(MIDS[r.mid].to_owned()),
                Some(BIGS[r.big].to_owned()),
                AMOUNTS[r.amount].map(str::to_owned),
            ]
        })
        .collect();
    let got: BTreeMap<(String, String), Row> = edge
        .rows()
        .await
        .into_iter()
        .map(|r| ((r[0].clone().unwrap(), r[1].clone().unwrap()), r))
        .collect();
    let want: BTreeMap<(String, String), Row> = want
        .into_iter()
        .map(|r| ((r[0].clone().unwrap(), r[1].clone().unwrap()), r))
        .collect();
    let wrong: Vec<String> = want
        .iter()
        .filter(|(key, w)| got.get(*key) != Some(*w))
        .take(5)
        .map(|(key, w)| format!("{key:?}:\nwant {w:?}\n got {:?}", got.get(key)))
        .collect();
    let extra: Vec<&(String, String)> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        wrong.is_empty() && extra.is_empty(),
        "rows differ from the model:\n{}\nrows of no key: {extra:?}",
        wrong.join("\n")
    );
    assert_eq!(
        edge.env.count(&count).await,
        want.len() as i64,
        "one row per key"
    );

    // The dead letters: exactly the invalid records, once each, naming the field.
    let dead = edge.dead_letters().await;
    let mut seen_rids = BTreeSet::new();
    for (partition, offset, kind, reason, payload) in &dead {
        let rid = rid_of(payload);
        assert!(
            seen_rids.insert(rid),
            "record {rid} dead-lettered twice ({partition}/{offset})"
        );
        let invalid = invalid_rids
            .get(&rid)
            .unwrap_or_else(|| panic!("valid record {rid} dead-lettered: {kind} {reason}"));
        assert_eq!(kind, "decode_error", "record {rid}: {reason}");
        assert!(
            reason.contains(&format!("`{}`", invalid.named)),
            "record {rid}'s reason names `{}`: {reason}",
            invalid.named
        );
    }
    assert_eq!(
        seen_rids.len(),
        invalid_rids.len(),
        "every invalid record is dead-lettered"
    );
    let mut reasons: BTreeMap<&str, &str> = BTreeMap::new();
    for (_, _, _, reason, payload) in &dead {
        let invalid = invalid_rids[&rid_of(payload)];
        reasons
            .entry(invalid.json.as_deref().unwrap_or("(absent)"))
            .or_insert(reason);
    }
    for (json, reason) in &reasons {
        println!("{json} -> {reason}");
    }

    // 2. Replay from earliest: nothing changes.
    let before = edge.snapshot().await;
    let replay = edge.env.output(
        &[
            "replay",
            "edges",
            "--to",
            "earliest",
            "--execute",
            "--sinks",
            &edge.file,
        ],
        &[],
    );
    assert!(
        replay.status.success(),
        "{}{}",
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(
        edge.offsets(),
        (RECORDS as i64, 0),
        "the group is at earliest"
    );
    let third = edge.run_to_end("replayed").await;
    let third_totals = totals(&third);
    println!("after the replay: {third_totals}");
    assert_eq!(third_totals["records"], serde_json::json!(RECORDS));
    assert_eq!(
        third_totals["inserted"],
        serde_json::json!(0),
        "{third_totals}"
    );
    assert_eq!(
        third_totals["updated"],
        serde_json::json!(0),
        "{third_totals}"
    );
    let new_dead_letters: u64 = third
        .events_named("batch committed")
        .iter()
        .map(|e| e["dead_letters_new"].as_u64().unwrap())
        .sum();
    assert_eq!(new_dead_letters, 0, "the replay inserted no dead letter");
    let after = edge.snapshot().await;
    assert_eq!(
        after.0, before.0,
        "the table is unchanged, row versions too"
    );
    // A replayed poison record is the same record (coordinates, timestamp, key and payload):
    // its dead letter's identity (migration 0009) is already there, and the insert is
    // `ON CONFLICT DO NOTHING` — the row keeps its id and recorded_at, no second copy.
    assert_eq!(after.1, before.1, "the dead letters are unchanged");
    assert_eq!(after.1.len(), invalid_rids.len());
    println!(
        "{} records, {} rows, {} dead letters; {:.2} s",
        RECORDS,
        model.len(),
        invalid_rids.len(),
        started.elapsed().as_secs_f64()
    );
    edge.cleanup().await;
}

const DIGITS_DDL: &str = r#"
CREATE SCHEMA "{schema}";
CREATE TABLE "{schema}".digits (
    id      BIGINT PRIMARY KEY,
    doc     JSONB,
    plain   JSON,
    amounts NUMERIC(20,4)[]
);
"#;

const DIGITS_MAPPING: &str = r#"
[[sink]]
name = "edges"
topic = "{topic}"
table = "{schema}.digits"
key = ["id"]
conflict = "always-update"

[sink.columns]
id = { field = "id" }
doc = { field = "doc" }
plain = { field = "plain" }
amounts = { field = "amounts" }
"#;

/// A `jsonb` or `json` column and the elements of a `numeric[]` get the record's numbers as
/// PostgreSQL reads them — digit for digit (both keep numbers as `numeric`), not the nearest
/// f64 — or, for what the column cannot hold, a dead letter naming the field.
#[tokio::test]
async fn json_and_numeric_array_values_keep_the_records_digits() {
    let Some(edge) = Edge::new(DIGITS_DDL, DIGITS_MAPPING, "digits").await else {
        return;
    };
    // (column, the record's value, the column's type)
    let deep = nested(200);
    let cases: Vec<(&str, &str, &str)> = vec![
        ("doc", r#"{"n": 123456789012345678901234567890}"#, "jsonb"),
        (
            "doc",
            r#"{"d": 0.1000000000000000055511151231257827}"#,
            "jsonb",
        ),
        ("doc", r#"{"u": 18446744073709551616}"#, "jsonb"),
        ("doc", "123456789012345678901234567890", "jsonb"),
        ("doc", r#"{"s": 1.50}"#, "jsonb"),
        ("doc", r#"{"e": 1E2}"#, "jsonb"),
        // Beyond sluice's JSON limits (the column could hold them): not JSON to sluice.
        ("doc", r#"{"big": 1e400}"#, "beyond"),
        ("doc", &deep, "beyond"),
        ("plain", r#"{"n": 123456789012345678901234567890}"#, "json"),
        ("amounts", "[12345678901234.5678]", "numeric(20,4)[]"),
        ("amounts", "[9999999999999999.9999]", "numeric(20,4)[]"),
        // Too wide for the column: a dead letter naming the element is right.
        ("amounts", "[0, 99999999999999999.5]", "numeric(20,4)[]"),
    ];
    let records: Vec<sluice_testkit::RawRecord> = cases
        .iter()
        .enumerate()
        .map(|(id, (column, value, _))| {
            let text = format!(r#"{{"rid": {id}, "id": {id}, "{column}": {value}}}"#);
            (Some(b"digits".to_vec()), Some(text.into_bytes()))
        })
        .collect();
    sluice_testkit::produce(&edge.env.stack, &edge.topic, &records).await;
    edge.run_to_end("digits").await;

    let mut conn = edge.env.schema.connect().await;
    let mut wrong = Vec::new();
    for (id, (column, value, sql_type)) in cases.iter().enumerate() {
        // PostgreSQL reading the record's JSON: jsonb keeps numbers as numeric (json's value
        // compared as jsonb, whatever the spacing); an array's elements as the column's type.
        let read = match *sql_type {
            "jsonb" | "json" => "($1::text)::jsonb::text".to_owned(),
            "beyond" => "NULL::text WHERE false".to_owned(),
            array => format!(
                "ARRAY(SELECT e::{} FROM jsonb_array_elements_text(($1::text)::jsonb) AS e)::text",
                array.trim_end_matches("[]")
            ),
        };
        // `None`: PostgreSQL refuses it, the column cannot hold it.
        let want: Option<String> = match sqlx::query_scalar::<_, String>(&format!("SELECT {read}"))
            .bind(value)
            .fetch_optional(&mut conn)
            .await
        {
            Ok(text) => text,
            Err(sqlx::Error::Database(_)) => None,
            Err(other) => panic!("{read}: {other}"),
        };
        let stored = if *sql_type == "json" {
            format!("{column}::jsonb::text")
        } else {
            format!("{column}::text")
        };
        let got: Option<String> = sqlx::query_scalar(&format!(
            "SELECT {stored} FROM {} WHERE id = $1",
            edge.table
        ))
        .bind(id as i64)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
        let dead: Option<String> =
            sqlx::query_scalar("SELECT reason FROM dead_letter_events WHERE kafka_offset = $1")
                .bind(id as i64)
                .fetch_optional(&mut conn)
                .await
                .unwrap();
        let short = |t: &str| t.chars().take(60).collect::<String>();
        match (&want, got, dead) {
            (Some(want), Some(got), None) if got == *want => {}
            (None, None, Some(reason)) if reason.contains(&format!("field `{column}")) => {}
            (None, None, Some(reason))
                if *sql_type == "beyond" && reason.starts_with("payload is not valid JSON") => {}
            (want, got, dead) => wrong.push(format!(
                "{column} ({sql_type}) {}: stored {:?}, dead letter {dead:?}; PostgreSQL: {}",
                short(value),
                got.as_deref().map(short),
                want.as_deref().map_or("cannot hold it".into(), short),
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "a value other than the record's, or a dead letter for what the column holds:\n{}",
        wrong.join("\n")
    );
    edge.cleanup().await;
}
