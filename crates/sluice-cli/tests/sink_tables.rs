//! Declared sinks on tables sluice has never seen, run by the `sluice` binary against the real
//! Kafka and PostgreSQL. The rule: a mapping that `sluice sinks validate` accepts never stalls
//! a pipeline and never stores a value other than the one in the record; what the table
//! cannot hold is refused at validation (exit 2, naming the sink and the column) or
//! dead-lettered per record with a reason naming the field.
//!
//! 1. reserved words, capitals and spaces as table and column names land rows;
//! 2. a user's trigger that raises dead-letters its row with the trigger's message;
//! 3. a nullable key column is refused unless NULL can never reach it;
//! 4. a nullable newest-wins column: NULL is the oldest version; ties go to the first stored;
//! 5. keys PostgreSQL sees as equal (`1` and `1.0`, two instants of one second in a
//!    `timestamptz(0)`) are one key in the batch too;
//! 6. a NUMERIC gets the record's digits (not the nearest f64), and one too wide for its
//!    column is dead-lettered naming the field;
//! 7. lookups by integer and uuid keys resolve (never write the raw key as the id); a key
//!    type a lookup cannot compare is refused at validation;
//! 8. a range-partitioned table is written through its parent, and a record whose partition
//!    does not exist is dead-lettered with the server's reason;
//! 9. `columns = "auto"`: every column from the field of its name, the key from the primary
//!    key, the record's other fields ignored — and `sinks validate --sample` shows it on the
//!    topic's records before anything runs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::{Value, json};
use support::case::{Case, text};

const RESERVED_DDL: &str = r#"
CREATE TABLE "User Groups" ("from" TEXT NOT NULL UNIQUE, "where" BIGINT NOT NULL);
INSERT INTO "User Groups" VALUES ('admins', 7), ('guests', 8);
CREATE TABLE "Order Lines" (
    "order" BIGINT PRIMARY KEY,
    "user" TEXT NOT NULL,
    "offset" BIGINT NOT NULL,
    "group" VARCHAR(20),
    "end" TIMESTAMPTZ NOT NULL,
    "CamelCase" INTEGER,
    "unit price" NUMERIC(10,2),
    "select" BIGINT
);
"#;

const RESERVED_MAPPING: &str = r#"
[[sink]]
name = "order-lines"
topic = "{prefix}-order-lines"
table = "Order Lines"
key = ["order"]
conflict = { newest-wins = "end" }

[sink.columns]
order = { field = "order" }
user = { field = "user" }
offset = { kafka = "offset" }
group = { field = "group" }
end = { field = "end" }
"CamelCase" = { field = "camel" }
"unit price" = { field = "price" }
select = { lookup = { field = "grp", table = "User Groups", key = "from", value = "where", unknown = "unknown_group" } }
"#;

#[tokio::test]
async fn reserved_words_capitals_and_spaces_as_names_land_rows() {
    let Some(case) = Case::new(&["order-lines"], RESERVED_DDL, RESERVED_MAPPING).await else {
        return;
    };
    let plan = case.assert_valid();
    assert!(
        plan.contains("ON CONFLICT (\"order\") DO UPDATE SET"),
        "{plan}"
    );
    let line = |order: i64, end: &str, camel: i64| {
        json!({"order": order, "user": format!("u{order}"), "group": "g", "end": end,
            "camel": camel, "price": 1.25, "grp": if order % 2 == 0 { "admins" } else { "guests" }})
    };
    let mut values: Vec<Value> = (1..=10)
        .map(|n| line(n, "2026-11-10T00:00:00Z", n * 10))
        .collect();
    values.push(line(3, "2026-11-11T00:00:00Z", 333));
    values.push(line(4, "2026-11-09T00:00:00Z", 444));
    values.push(json!({"order": 11, "user": "u", "end": "2026-11-10T00:00:00Z", "grp": "nobody"}));
    case.produce("order-lines", &values).await;
    case.run_to_end("reserved").await;
    let rows = case
        .rows(
            r#"SELECT format('%s %s %s %s %s %s %s', "order", "user", "group", "CamelCase",
                   "unit price", "select", "end" > '2026-11-10') FROM "Order Lines" ORDER BY "order""#,
        )
        .await;
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert_eq!(rows[0], "1 u1 g 10 1.25 8 f");
    assert_eq!(rows[2], "3 u3 g 333 1.25 8 t", "the newer version wins");
    assert_eq!(
        rows[3], "4 u4 g 40 1.25 7 f",
        "the older version never overwrites"
    );
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].2, "unknown_group");
    assert!(dead[0].3.contains("field `grp`"), "{dead:?}");
    case.cleanup().await;
}

#[tokio::test]
async fn a_trigger_that_raises_dead_letters_its_row_with_the_message() {
    const DDL: &str = r"
        CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL);
        CREATE FUNCTION refuse_forbidden() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.body = 'forbidden' THEN
                RAISE EXCEPTION 'body % is not allowed', NEW.body;
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER notes_refuse BEFORE INSERT ON notes
            FOR EACH ROW EXECUTE FUNCTION refuse_forbidden();";
    const MAPPING: &str = r#"
[[sink]]
name = "notes"
topic = "{prefix}-notes"
table = "notes"
key = ["id"]
conflict = "insert-ignore"

[sink.columns]
id = { field = "id" }
body = { field = "body" }
"#;
    let Some(case) = Case::new(&["notes"], DDL, MAPPING).await else {
        return;
    };
    case.assert_valid();
    let values: Vec<Value> = (1..=5)
        .map(|id| json!({"id": id, "body": if id == 3 { "forbidden" } else { "fine" }}))
        .collect();
    case.produce("notes", &values).await;
    case.run_to_end("trigger").await;
    let rows = case.rows("SELECT id::text FROM notes ORDER BY id").await;
    assert_eq!(rows, ["1", "2", "4", "5"]);
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].1, 2, "the third record");
    assert_eq!(dead[0].2, "constraint_violation", "{dead:?}");
    assert!(
        dead[0].3.contains("P0001") && dead[0].3.contains("body forbidden is not allowed"),
        "{dead:?}"
    );
    case.cleanup().await;
}

#[tokio::test]
async fn a_nullable_key_column_is_refused_unless_null_cannot_reach_it() {
    const DDL: &str = r"
        CREATE TABLE devices (serial TEXT UNIQUE, name TEXT);
        CREATE TABLE devices_nnd (serial TEXT, name TEXT, UNIQUE NULLS NOT DISTINCT (serial));";
    let mapping = |table: &str, serial: &str| {
        format!(
            "[[sink]]\nname = \"devices\"\ntopic = \"{{prefix}}-devices\"\ntable = \"{table}\"\n\
             key = [\"serial\"]\nconflict = \"always-update\"\n\n[sink.columns]\n\
             serial = {serial}\nname = {{ field = \"name\" }}\n"
        )
    };
    let Some(case) = Case::new(
        &["devices"],
        DDL,
        &mapping("devices", "{ field = \"serial\" }"),
    )
    .await
    else {
        return;
    };
    let out = case.validate(&case.file);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sink `devices`, column `serial`: key column is nullable"),
        "{stderr}"
    );
    let accepted = [
        (
            "required",
            mapping("devices", "{ field = \"serial\", required = true }"),
        ),
        (
            "nulls-not-distinct",
            mapping("devices_nnd", "{ field = \"serial\" }"),
        ),
    ];
    for (name, text_) in accepted {
        let file = case.env.dir.join(format!("{name}.toml"));
        std::fs::write(&file, text_.replace("{prefix}", &case.env.prefix)).unwrap();
        let out = case.validate(&file);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
    }

    // Required: a record without the key is a dead letter naming the field; a replay
    // of the rest changes nothing.
    std::fs::write(
        &case.file,
        mapping("devices", "{ field = \"serial\", required = true }")
            .replace("{prefix}", &case.env.prefix),
    )
    .unwrap();
    let values = [
        json!({"serial": "a", "name": "one"}),
        json!({"name": "no serial"}),
        json!({"serial": null, "name": "null serial"}),
    ];
    case.produce("devices", &values).await;
    case.run_to_end("nullable-key").await;
    assert_eq!(
        case.rows("SELECT serial || ' ' || name FROM devices ORDER BY 1")
            .await,
        ["a one"]
    );
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(dead.iter().all(|d| d.3.contains("serial")), "{dead:?}");
    case.cleanup().await;
}

const GUARD_MAPPING: &str = r#"
[[sink]]
name = "versions"
topic = "{prefix}-versions"
table = "versions"
key = ["id"]
conflict = { newest-wins = "g" }

[sink.columns]
id = { field = "id" }
v = { field = "v" }
g = { field = "g" }
"#;

#[tokio::test]
async fn a_null_version_is_the_oldest_and_the_first_stored_wins_a_tie() {
    let Some(case) = Case::new(
        &["versions"],
        "CREATE TABLE versions (id BIGINT PRIMARY KEY, v TEXT, g BIGINT)",
        GUARD_MAPPING,
    )
    .await
    else {
        return;
    };
    case.assert_valid();
    let version = |id: i64, v: &str, g: Option<i64>| json!({"id": id, "v": v, "g": g});
    // One batch.
    case.produce(
        "versions",
        &[
            version(1, "a", None),
            version(2, "a", Some(5)),
            version(3, "a", Some(5)),
            // A tie in the batch: the earlier record wins, as the first stored does.
            version(4, "first", Some(7)),
            version(4, "second", Some(7)),
            // A NULL version never replaces a non-NULL one ...
            version(5, "old", Some(3)),
            version(5, "null", None),
            // ... and any non-NULL version replaces a NULL one.
            version(6, "null", None),
            version(6, "new", Some(2)),
        ],
    )
    .await;
    case.run_to_end("versions-1").await;
    // Another batch against the stored rows.
    case.produce(
        "versions",
        &[
            version(1, "b", Some(1)),
            version(2, "b", None),
            version(3, "tie", Some(5)),
        ],
    )
    .await;
    case.run_to_end("versions-2").await;
    let rows = case
        .rows("SELECT format('%s %s %s', id, v, g) FROM versions ORDER BY id")
        .await;
    assert_eq!(
        rows,
        ["1 b 1", "2 a 5", "3 a 5", "4 first 7", "5 old 3", "6 new 2"]
    );
    case.cleanup().await;
}

const EQUAL_KEYS_DDL: &str = r"
    CREATE TABLE amounts (amount NUMERIC PRIMARY KEY, note TEXT NOT NULL);
    CREATE TABLE prices (price NUMERIC(10,2) PRIMARY KEY, note TEXT NOT NULL);
    CREATE TABLE floats (x DOUBLE PRECISION PRIMARY KEY, note TEXT NOT NULL);
    CREATE TABLE seconds (at TIMESTAMPTZ(0) PRIMARY KEY, note TEXT NOT NULL);";

const EQUAL_KEYS_MAPPING: &str = r#"
[[sink]]
name = "amounts"
topic = "{prefix}-amounts"
table = "amounts"
key = ["amount"]
conflict = "always-update"
[sink.columns]
amount = { field = "k" }
note = { field = "note" }

[[sink]]
name = "prices"
topic = "{prefix}-prices"
table = "prices"
key = ["price"]
conflict = "always-update"
[sink.columns]
price = { field = "k" }
note = { field = "note" }

[[sink]]
name = "floats"
topic = "{prefix}-floats"
table = "floats"
key = ["x"]
conflict = "always-update"
[sink.columns]
x = { field = "k" }
note = { field = "note" }

[[sink]]
name = "seconds"
topic = "{prefix}-seconds"
table = "seconds"
key = ["at"]
conflict = "always-update"
[sink.columns]
at = { field = "k" }
note = { field = "note" }
"#;

#[tokio::test]
async fn keys_postgres_sees_as_equal_are_one_key_in_the_batch() {
    let sinks = ["amounts", "prices", "floats", "seconds"];
    let Some(case) = Case::new(&sinks, EQUAL_KEYS_DDL, EQUAL_KEYS_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let pair = |a: Value, b: Value| {
        [
            json!({"k": a, "note": "earlier"}),
            json!({"k": b, "note": "later"}),
        ]
    };
    // Raw JSON text: serde_json would write 1.0 as 1.0 and -0.0 as -0.0.
    case.produce("amounts", &pair(json!(1), json!(1.0))).await;
    case.produce("prices", &pair(json!(1.001), json!(1.004)))
        .await;
    case.produce("floats", &pair(json!(-0.0), json!(0.0))).await;
    case.produce(
        "seconds",
        &pair(
            json!("2026-11-10T00:00:00.2Z"),
            json!("2026-11-10T00:00:00.4Z"),
        ),
    )
    .await;
    case.run_to_end("equal-keys").await;
    let one = |sql: &'static str| case.rows(sql);
    assert_eq!(
        one("SELECT (amount = 1) || ' ' || note FROM amounts").await,
        ["true later"]
    );
    assert_eq!(
        one("SELECT price || ' ' || note FROM prices").await,
        ["1.00 later"]
    );
    assert_eq!(
        one("SELECT x || ' ' || note FROM floats").await,
        ["0 later"]
    );
    assert_eq!(
        one("SELECT to_char(at AT TIME ZONE 'UTC', 'HH24:MI:SS.US') || ' ' || note FROM seconds")
            .await,
        ["00:00:00.000000 later"]
    );
    assert!(case.dead_letters().await.is_empty());
    case.cleanup().await;
}

const DIGITS_DDL: &str = r"
    CREATE TABLE ledger (id BIGINT PRIMARY KEY, amount NUMERIC(20,4) NOT NULL, raw NUMERIC);";

const DIGITS_MAPPING: &str = r#"
[[sink]]
name = "ledger"
topic = "{prefix}-ledger"
table = "ledger"
key = ["id"]
conflict = "always-update"
[sink.columns]
id = { field = "id" }
amount = { field = "amount" }
raw = { field = "raw" }
"#;

#[tokio::test]
async fn a_numeric_lands_digit_for_digit() {
    let Some(case) = Case::new(&["ledger"], DIGITS_DDL, DIGITS_MAPPING).await else {
        return;
    };
    case.assert_valid();
    // (id, amount, raw) as the record writes them; 2^53 + 1 as the id.
    let records = [
        (
            "9007199254740993",
            "12345678901234.5678",
            "0.1000000000000000055511151231257827",
        ),
        (
            "2",
            "4503599627370497.0001",
            "123456789012345678901234567890.5",
        ),
        ("3", "9999999999999999.9999", "-1e-20"),
        ("4", "99999999999999999.0", "1"),
        ("5", "9999999999999999.99995", "1"),
    ];
    let texts: Vec<String> = records
        .iter()
        .map(|(id, amount, raw)| format!(r#"{{"id": {id}, "amount": {amount}, "raw": {raw}}}"#))
        .collect();
    case.produce_text("ledger", &texts).await;
    case.run_to_end("digits").await;
    assert_eq!(
        case.rows("SELECT id || ' ' || amount || ' ' || raw FROM ledger ORDER BY id")
            .await,
        [
            "2 4503599627370497.0001 123456789012345678901234567890.5",
            "3 9999999999999999.9999 -0.00000000000000000001",
            "9007199254740993 12345678901234.5678 0.1000000000000000055511151231257827",
        ]
    );
    let dead = case.dead_letters().await;
    let reasons: Vec<(i64, &str)> = dead.iter().map(|d| (d.1, d.3.as_str())).collect();
    assert_eq!(
        reasons,
        [
            (
                3,
                "field `amount`: must have at most 16 digits before the point, got 99999999999999999.0"
            ),
            (
                4,
                "field `amount`: must have at most 16 digits before the point, got 9999999999999999.99995"
            ),
        ],
        "too wide for numeric(20,4), after rounding to 4 places as PostgreSQL rounds"
    );
    case.cleanup().await;
}

const KEYED_LOOKUPS_DDL: &str = r"
    CREATE TABLE devices (serial BIGINT UNIQUE NOT NULL, id BIGINT NOT NULL);
    INSERT INTO devices VALUES (5000, 1), (5001, 2);
    CREATE TABLE sites (code UUID UNIQUE NOT NULL, name TEXT NOT NULL);
    INSERT INTO sites VALUES ('67e55044-10b1-426f-9247-bb680e5fe0c8', 'north');
    CREATE TABLE stamps (at TIMESTAMPTZ UNIQUE NOT NULL, id BIGINT NOT NULL);
    CREATE TABLE readings (
        reading BIGINT PRIMARY KEY,
        device_id BIGINT NOT NULL,
        site TEXT
    );";

const KEYED_LOOKUPS_MAPPING: &str = r#"
[[sink]]
name = "readings"
topic = "{prefix}-readings"
table = "readings"
key = ["reading"]
conflict = "always-update"
[sink.columns]
reading = { field = "reading" }
device_id = { lookup = { field = "serial", table = "devices", key = "serial", value = "id", unknown = "unknown_device" } }
site = { lookup = { field = "site", table = "sites", key = "code", value = "name", unknown = "unknown_site" } }
"#;

#[tokio::test]
async fn lookups_by_integer_and_uuid_keys_resolve() {
    let Some(case) = Case::new(&["readings"], KEYED_LOOKUPS_DDL, KEYED_LOOKUPS_MAPPING).await
    else {
        return;
    };
    case.assert_valid();
    let site = "67E55044-10B1-426F-9247-BB680E5FE0C8"; // upper case: the same UUID
    case.produce(
        "readings",
        &[
            json!({"reading": 1, "serial": 5000, "site": site}),
            json!({"reading": 2, "serial": 5001}),
            json!({"reading": 3, "serial": 7777}),
            json!({"reading": 4, "serial": 5000, "site": "00000000-0000-0000-0000-000000000000"}),
            json!({"reading": 5, "serial": "5000"}),
        ],
    )
    .await;
    case.run_to_end("keyed-lookups").await;
    assert_eq!(
        case.rows("SELECT reading || ' ' || device_id || ' ' || coalesce(site, '-') FROM readings ORDER BY reading")
            .await,
        ["1 1 north", "2 2 -"]
    );
    let dead = case.dead_letters().await;
    let kinds: Vec<(i64, &str)> = dead.iter().map(|d| (d.1, d.2.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (2, "unknown_device"),
            (3, "unknown_site"),
            (4, "decode_error")
        ]
    );
    assert!(dead[0].3.contains("7777"), "{}", dead[0].3);
    assert!(dead[2].3.contains("field `serial`"), "{}", dead[2].3);

    // A key column a lookup cannot compare a record's key with is refused at validation.
    let file = case.env.dir.join("stamps.toml");
    std::fs::write(
        &file,
        KEYED_LOOKUPS_MAPPING
            .replace("{prefix}", &case.env.prefix)
            .replace(
                r#"table = "devices", key = "serial""#,
                r#"table = "stamps", key = "at""#,
            ),
    )
    .unwrap();
    let out = case.validate(&file);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("device_id")
            && said.contains("a lookup key must be text, an integer or a uuid"),
        "{said}"
    );
    case.cleanup().await;
}

const PARTITIONED_DDL: &str = r"
    CREATE TABLE visits (
        visit_id BIGINT NOT NULL,
        at TIMESTAMPTZ NOT NULL,
        page TEXT NOT NULL,
        views INTEGER NOT NULL,
        PRIMARY KEY (visit_id, at)
    ) PARTITION BY RANGE (at);
    CREATE TABLE visits_2026_h1 PARTITION OF visits
        FOR VALUES FROM ('2026-01-01') TO ('2026-07-01');
    CREATE TABLE visits_2026_h2 PARTITION OF visits
        FOR VALUES FROM ('2026-07-01') TO ('2027-01-01');";

const PARTITIONED_MAPPING: &str = r#"
[[sink]]
name = "visits"
topic = "{prefix}-visits"
table = "visits"
key = ["visit_id", "at"]
conflict = "always-update"
[sink.columns]
visit_id = { field = "id" }
at = { field = "at" }
page = { field = "page" }
views = { field = "views" }
"#;

#[tokio::test]
async fn a_partitioned_table_is_written_through_its_parent_and_a_missing_partition_dead_letters() {
    let Some(case) = Case::new(&["visits"], PARTITIONED_DDL, PARTITIONED_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let visit = |id: i64, at: &str, views: i64| json!({"id": id, "at": at, "page": format!("/p/{id}"), "views": views});
    case.produce(
        "visits",
        &[
            visit(1, "2026-03-01T10:00:00Z", 1),
            visit(2, "2026-09-01T10:00:00Z", 1),
            visit(3, "2027-02-01T10:00:00Z", 1),
            visit(1, "2026-03-01T10:00:00Z", 5),
            visit(4, "2025-12-31T23:59:59Z", 1),
            visit(2, "2026-09-01T10:00:00Z", 7),
        ],
    )
    .await;
    case.run_to_end("partitioned").await;
    assert_eq!(
        case.rows(
            "SELECT tableoid::regclass::text || ' ' || visit_id || ' ' || views FROM visits ORDER BY visit_id"
        )
        .await,
        ["visits_2026_h1 1 5", "visits_2026_h2 2 7"],
        "rows land in their partitions through the parent; updates find them"
    );
    let dead = case.dead_letters().await;
    let kinds: Vec<(i64, &str)> = dead.iter().map(|d| (d.1, d.2.as_str())).collect();
    assert_eq!(
        kinds,
        [(2, "constraint_violation"), (4, "constraint_violation")]
    );
    for letter in &dead {
        assert!(
            letter.3.contains("no partition of relation"),
            "the server's reason: {}",
            letter.3
        );
    }
    case.cleanup().await;
}

const TYPES_DDL: &str = r"
    CREATE EXTENSION IF NOT EXISTS citext SCHEMA public;
    CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
    CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
    CREATE DOMAIN small_positive AS positive CHECK (VALUE < 100);
    CREATE TABLE kinds (
        id BIGINT PRIMARY KEY,
        day DATE,
        at TIME(0),
        span INTERVAL,
        blob BYTEA,
        code CHAR(4),
        host INET,
        net CIDR,
        name public.citext,
        feeling mood,
        feelings mood[],
        count small_positive,
        amounts NUMERIC(20,4)[],
        days DATE[]
    );
    CREATE TABLE spans (span INTERVAL, code CHAR(4), n INT NOT NULL, m mood NOT NULL,
                        PRIMARY KEY (span, code));
    CREATE TABLE names (name public.citext PRIMARY KEY, n INT NOT NULL);
    CREATE TABLE refused (
        id BIGINT PRIMARY KEY,
        name TEXT,
        part INTERVAL DAY TO SECOND,
        counts positive[]
    );";

const TYPES_MAPPING: &str = r#"
[[sink]]
name = "kinds"
topic = "{prefix}-kinds"
table = "kinds"
key = ["id"]
conflict = "always-update"
[sink.columns]
id = { field = "id" }
day = { field = "day" }
at = { field = "at" }
span = { field = "span" }
blob = { field = "blob" }
code = { field = "code" }
host = { field = "host" }
net = { field = "net" }
name = { field = "name" }
feeling = { field = "feeling" }
feelings = { field = "feelings" }
count = { field = "count" }
amounts = { field = "amounts" }
days = { field = "days" }

[[sink]]
name = "spans"
topic = "{prefix}-spans"
table = "spans"
key = ["span", "code"]
conflict = "always-update"
[sink.columns]
span = { field = "span" }
code = { field = "code" }
n = { field = "n" }
m = { const = "ok" }

[[sink]]
name = "names"
topic = "{prefix}-names"
table = "names"
key = ["name"]
conflict = "always-update"
on_tombstone = "delete"
[sink.columns]
name = { key = "name" }
n = { field = "n" }
"#;

#[tokio::test]
async fn the_types_a_users_table_has_land_as_the_record_wrote_them() {
    let Some(case) = Case::new(&["kinds", "spans", "names"], TYPES_DDL, TYPES_MAPPING).await else {
        return;
    };
    case.assert_valid();
    // `char(4)` keeps `ab` padded to 4 (octet_length counts the padding; `||` drops it).
    // What the catalog cannot hold exactly is refused at validation, naming the column.
    let refused = case.env.dir.join("refused.toml");
    for (column, source, conflict, expected) in [
        (
            "part",
            "{ field = \"part\" }",
            "\"always-update\"",
            "interval with a fields or precision restriction",
        ),
        (
            "counts",
            "{ field = \"counts\" }",
            "\"always-update\"",
            "positive[]",
        ),
        (
            "name",
            "{ field = \"name\" }",
            "{ newest-wins = \"name\" }",
            "a newest-wins column of type text",
        ),
    ] {
        std::fs::write(
            &refused,
            format!(
                "[[sink]]\nname = \"refused\"\ntopic = \"t\"\ntable = \"refused\"\nkey = [\"id\"]\n\
                 conflict = {conflict}\n[sink.columns]\nid = {{ field = \"id\" }}\n{column} = {source}\n"
            ),
        )
        .unwrap();
        let out = case.validate(&refused);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{column}: {stderr}");
        assert!(
            stderr.contains(&format!("column `{column}`")) && stderr.contains(expected),
            "{column}: {stderr}"
        );
    }

    let kinds = [
        r#"{"id": 1, "day": "2024-02-29", "at": "23:59:59.7", "span": "P1Y2M3DT4H5M6.5S",
            "blob": "AAEC/w==", "code": "ab", "host": "10.0.0.1", "net": "10.1.0.0/16",
            "name": "Ärger", "feeling": "happy", "feelings": ["sad", null, "ok"], "count": 5,
            "amounts": [12345678901234.5678, null, 9999999999999999.9999],
            "days": ["2024-01-01", null]}"#,
        r#"{"id": 2, "host": "2001:DB8::1/64", "code": "abcd      ", "span": "PT-1.5S",
            "at": "00:00:00.4"}"#,
        r#"{"id": 3, "day": "2023-02-29"}"#,
        r#"{"id": 4, "at": "24:00:00"}"#,
        r#"{"id": 5, "span": "1 day"}"#,
        r#"{"id": 6, "blob": "not base64!"}"#,
        r#"{"id": 7, "code": "abcde"}"#,
        r#"{"id": 8, "host": "10.0.0.256"}"#,
        r#"{"id": 9, "net": "10.0.0.1/24"}"#,
        r#"{"id": 10, "feeling": "angry"}"#,
        r#"{"id": 11, "feelings": ["sad", "bad"]}"#,
        r#"{"id": 12, "count": 100}"#,
        r#"{"id": 13, "amounts": [1, 99999999999999999]}"#,
        r#"{"id": 14, "days": [20240101]}"#,
    ];
    case.produce_text("kinds", &kinds.map(str::to_owned)).await;
    // One key as PostgreSQL compares them: `P1D` = `PT24H`, `ab` = `ab  ` in a char(4).
    case.produce(
        "spans",
        &[
            json!({"span": "P1D", "code": "ab", "n": 1}),
            json!({"span": "PT24H", "code": "ab  ", "n": 2}),
            json!({"span": "P1M", "code": "ab", "n": 3}),
        ],
    )
    .await;
    // Case variants of one citext key in one batch: the server finds them equal, sluice does
    // not guess the database's lower-casing — the batch meets 21000 and is written row by row.
    let named = |name: &str, n: i64| {
        (
            Some(json!({ "name": name }).to_string().into_bytes()),
            Some(json!({ "n": n }).to_string().into_bytes()),
            Vec::new(),
        )
    };
    case.produce_full(
        "names",
        &[named("Straße", 1), named("STRASSE", 2), named("straße", 3)],
    )
    .await;
    case.run_to_end("types").await;

    let rows = case
        .rows(
            "SELECT concat_ws(' | ', id, day, at, span, blob, code || ':' || octet_length(code), host, net, name,
                    feeling, feelings, count, amounts, days) FROM kinds ORDER BY id",
        )
        .await;
    assert_eq!(
        rows,
        [
            "1 | 2024-02-29 | 24:00:00 | 1 year 2 mons 3 days 04:05:06.5 | \\x000102ff | ab:4 | \
             10.0.0.1 | 10.1.0.0/16 | Ärger | happy | {sad,NULL,ok} | 5 | \
             {12345678901234.5678,NULL,9999999999999999.9999} | {2024-01-01,NULL}",
            "2 | 00:00:00 | -00:00:01.5 | abcd:4 | 2001:db8::1/64",
        ]
    );
    let dead = case.dead_letters().await;
    let reasons: Vec<(i64, &str, &str)> = dead
        .iter()
        .filter(|d| d.0 == case.topic("kinds"))
        .map(|d| (d.1, d.2.as_str(), d.3.as_str()))
        .collect();
    let expected = [
        (
            2,
            "field `day`",
            "must be a date, got \"2023-02-29\" (no such day)",
        ),
        (3, "field `at`", "hours run to 23"),
        (4, "field `span`", "must be an interval, got \"1 day\""),
        (5, "field `blob`", "must be bytes, got \"not base64!\""),
        (
            6,
            "field `code`",
            "5 characters besides trailing spaces, the column holds 4",
        ),
        (7, "field `host`", "must be an IP address"),
        (8, "field `net`", "no bits set right of its prefix"),
        (9, "field `feeling`", "labels: sad, ok, happy"),
        (
            10,
            "field `feelings[1]`",
            "must be a label of enum mood, got \"bad\"",
        ),
        (11, "small_positive_check", "SQLSTATE 23514"),
        (
            12,
            "field `amounts[1]`",
            "at most 16 digits before the point, got 99999999999999999",
        ),
        (13, "field `days[0]`", "must be a date as a string"),
    ];
    assert_eq!(reasons.len(), expected.len(), "{reasons:#?}");
    for ((offset, _, reason), (want_offset, names, says)) in reasons.iter().zip(expected) {
        assert_eq!(*offset, want_offset, "{reasons:#?}");
        assert!(
            reason.contains(names) && reason.contains(says),
            "offset {offset}: {reason}"
        );
    }
    assert_eq!(
        case.rows("SELECT concat_ws(' ', span, code, n, m) FROM spans ORDER BY n")
            .await,
        ["1 day ab   2 ok", "1 mon ab   3 ok"],
        "P1D and PT24H, `ab` and `ab  `: one key, the later record wins"
    );
    assert_eq!(
        case.rows("SELECT concat_ws(' ', name, n) FROM names ORDER BY n")
            .await,
        ["STRASSE 2", "Straße 3"],
        "`straße` is `Straße` to citext (the first stored name, the last record's value); \
         `STRASSE` is not (lower-casing does not fold ß)"
    );
    assert!(dead.iter().all(|d| d.0 == case.topic("kinds")), "{dead:?}");
    // A delete's key compares as the column does: `strasse` is the stored `STRASSE`, and
    // `STRAßE` is `Straße`. In one batch, as one by one: the delete of `strasse`, then
    // `STRASSE` again, then the delete of `STRAßE`.
    let tombstone = |name: &str| {
        (
            Some(json!({ "name": name }).to_string().into_bytes()),
            None,
            Vec::new(),
        )
    };
    case.produce_full(
        "names",
        &[
            tombstone("strasse"),
            named("STRASSE", 4),
            tombstone("STRAßE"),
        ],
    )
    .await;
    case.run_to_end("types-delete").await;
    assert_eq!(
        case.rows("SELECT concat_ws(' ', name, n) FROM names ORDER BY n")
            .await,
        ["STRASSE 4"],
        "the tombstones deleted `STRASSE` and `Straße`, the upsert between them stays"
    );
    case.cleanup().await;
}

const AUTO_DDL: &str = r#"
CREATE TABLE "Line Items" (
    "order" BIGINT NOT NULL,
    line INT NOT NULL,
    "select" TEXT,
    qty INT NOT NULL,
    price NUMERIC(10, 2),
    total NUMERIC(12, 2) GENERATED ALWAYS AS (qty * price) STORED,
    synced_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("order", line)
);
"#;

const AUTO_MAPPING: &str = r#"
[[sink]]
name = "line-items"
topic = "{prefix}-line-items"
table = "Line Items"
never_written = ["synced_at"]

[sink.columns]
"*" = "auto"
price = { field = "unit_price" }
"#;

#[tokio::test]
async fn auto_columns_come_from_the_table_and_the_key_from_its_primary_key() {
    let Some(case) = Case::new(&["line-items"], AUTO_DDL, AUTO_MAPPING).await else {
        return;
    };
    let plan = case.assert_valid();
    assert!(
        plan.contains(r#"ON CONFLICT ("order", "line") DO UPDATE SET"#),
        "{plan}"
    );
    for column in [r#""select""#, "qty", "price"] {
        assert!(plan.contains(column), "{column} in {plan}");
    }
    assert!(plan.contains("never written: synced_at"), "{plan}");
    assert!(
        !plan.contains("total"),
        "a generated column is not written: {plan}"
    );
    let item = |order: i64, line: i64, qty: i64| {
        json!({"order": order, "line": line, "select": format!("s{order}"), "qty": qty,
            "unit_price": 2.5, "price": 999, "comment": "not a column", "nested": {"a": 1}})
    };
    let mut values: Vec<Value> = (1..=5)
        .flat_map(|o| [item(o, 1, 1), item(o, 2, 2)])
        .collect();
    // The same key again: the upsert's update; a record without a NOT NULL field: a dead
    // letter naming it.
    values.push(item(3, 2, 7));
    values.push(json!({"order": 9, "line": 1}));
    case.produce("line-items", &values).await;
    // The sample of what is in the topic, before anything runs.
    let file = case.file.display().to_string();
    let out = case
        .env
        .output(&["sinks", "validate", &file, "--sample", "50"], &[]);
    let sampled = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{sampled}{}", text(&out.stderr));
    assert!(
        sampled.contains("sample of sink line-items: 12 record(s)"),
        "{sampled}"
    );
    assert!(
        sampled.contains("11 would be rows, 1 dead letters"),
        "{sampled}"
    );
    assert!(sampled.contains("1 × field `qty`"), "{sampled}");
    assert!(
        sampled.contains("record fields no column reads: comment (11), nested (11), price (11)"),
        "{sampled}"
    );
    case.run_to_end("auto").await;
    let rows = case
        .rows(
            r#"SELECT format('%s %s %s %s %s %s', "order", line, "select", qty, price, total)
               FROM "Line Items" ORDER BY "order", line"#,
        )
        .await;
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert_eq!(rows[0], "1 1 s1 1 2.50 2.50");
    assert_eq!(
        rows[5], "3 2 s3 7 2.50 17.50",
        "the second delivery updated the row"
    );
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(dead[0].3.contains("qty"), "{dead:?}");
    case.cleanup().await;
}
