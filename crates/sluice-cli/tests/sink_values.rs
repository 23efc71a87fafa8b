//! A schemaless Debezium stream (the JsonConverter with `schemas.enable=false`) whose
//! connector writes decimals as strings (`decimal.handling.mode=string`, the mode a
//! schemaless stream must use), run by the `sluice` binary against the real Kafka and
//! PostgreSQL: every row lands digit for digit — a `numeric(20,4)` past a double's 15–17
//! digits, an unconstrained `numeric` of 40 digits — with the date (days since the epoch),
//! the timestamp (microseconds, `time.precision.mode=adaptive`) and the bytes (base64) its
//! default modes give; a string that is no decimal is a dead letter naming its field.
//!
//! The types PostgreSQL parses from their own text (`timetz`, `macaddr`, `xml`, ranges, …) and
//! `money` land from a plain JSON stream; a value the server refuses is a dead letter. The
//! infinities of timestamps and dates land as PostgreSQL's own.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::json;
use support::case::Case;

const LEDGER_DDL: &str = r"
    CREATE TABLE ledger (
        id BIGINT PRIMARY KEY,
        amount NUMERIC(20,4) NOT NULL,
        rate NUMERIC,
        booked DATE,
        at TIMESTAMP,
        blob BYTEA,
        lsn BIGINT
    );";

const LEDGER_MAPPING: &str = r#"
[[sink]]
name = "ledger"
topic = "{prefix}-ledger"
table = "ledger"
key = ["id"]
format = "debezium"
debezium = { schemas = false, decimal = "string" }
conflict = { newest-wins = "lsn" }
batch_size = 100
[sink.columns]
id = { field = "id" }
amount = { field = "amount" }
rate = { field = "rate" }
booked = { field = "booked" }
at = { field = "at" }
blob = { field = "blob" }
lsn = { cdc = "lsn" }
"#;

/// Records in the stream (the issue saw 3,599 dead letters on such a stream).
const ROWS: u64 = 600;

/// Row `i`'s values as the connector writes them, and as PostgreSQL prints them back.
struct Row {
    event: String,
    stored: String,
}

fn row(i: u64) -> Row {
    // Deterministic digits: 16 before the point (numeric(20,4) holds 16), 2 or 4 after.
    let mix = i
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    let whole = mix % 10_000_000_000_000_000;
    let (amount, amount_stored) = if i.is_multiple_of(2) {
        let cents = mix / 7 % 100;
        (
            format!("{whole}.{cents:02}"),
            format!("{whole}.{cents:02}00"),
        )
    } else {
        let frac = mix / 11 % 10_000;
        (format!("-{whole}.{frac:04}"), format!("-{whole}.{frac:04}"))
    };
    let amount_stored = if amount_stored.starts_with("-0.0000") {
        amount_stored.replacen('-', "", 1)
    } else {
        amount_stored
    };
    // 40 significant digits: no float round trip survives it.
    let rate = format!("{mix}{:020}.{:07}", mix / 3, i);
    let days = 17_424 + i64::try_from(i).unwrap();
    let micros = 1_562_639_337_123_456 + i64::try_from(i).unwrap() * 1_000_001;
    let at = chrono::DateTime::from_timestamp_micros(micros).unwrap();
    let booked = chrono::NaiveDate::from_ymd_opt(2017, 9, 15).unwrap()
        + chrono::TimeDelta::days(i64::try_from(i).unwrap());
    let blob = [0xfb, 0xff, u8::try_from(i % 256).unwrap()];
    let base64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(blob)
    };
    let event = format!(
        r#"{{"before":null,"after":{{"id":{i},"amount":"{amount}","rate":"{rate}","booked":{days},"at":{micros},"blob":"{base64}"}},"source":{{"lsn":{lsn},"txId":7}},"op":"c","ts_ms":1}}"#,
        lsn = 1000 + i
    );
    let stored = format!(
        "{i}|{amount_stored}|{rate}|{booked}|{}|fbff{:02x}|{}",
        at.format("%Y-%m-%d %H:%M:%S%.6f"),
        i % 256,
        1000 + i
    );
    Row { event, stored }
}

#[tokio::test]
async fn a_schemaless_debezium_stream_with_decimal_strings_lands_digit_for_digit() {
    let Some(case) = Case::new(&["ledger"], LEDGER_DDL, LEDGER_MAPPING).await else {
        return;
    };
    let plan = case.assert_valid();
    assert!(
        plan.contains(
            "values without a schema: schemas off, decimal string, time adaptive, binary bytes"
        ),
        "{plan}"
    );
    let rows: Vec<Row> = (0..ROWS).map(row).collect();
    let mut records: Vec<sluice_testkit::FullRecord> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            (
                Some(format!(r#"{{"id":{i}}}"#).into_bytes()),
                Some(row.event.clone().into_bytes()),
                Vec::new(),
            )
        })
        .collect();
    // A string that is no decimal: a dead letter naming the field, the rest unharmed.
    records.push((
        Some(br#"{"id":100000}"#.to_vec()),
        Some(
            br#"{"before":null,"after":{"id":100000,"amount":"9975623,66"},"source":{"lsn":5},"op":"c"}"#
                .to_vec(),
        ),
        Vec::new(),
    ));
    case.produce_full("ledger", &records).await;
    case.run_to_end("values").await;

    let stored = case
        .rows(
            "SELECT concat_ws('|', id, amount, rate, booked, to_char(at, 'YYYY-MM-DD HH24:MI:SS.US'), \
             encode(blob, 'hex'), lsn) \
             FROM ledger ORDER BY id",
        )
        .await;
    let expected: Vec<String> = rows.iter().map(|r| r.stored.clone()).collect();
    assert_eq!(stored.len(), expected.len(), "rows landed");
    for (got, want) in stored.iter().zip(&expected) {
        assert_eq!(got, want, "digit for digit");
    }
    let dead = case.dead_letters().await;
    let reasons: Vec<(i64, &str, &str)> = dead
        .iter()
        .map(|d| (d.1, d.2.as_str(), d.3.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [(
            i64::try_from(ROWS).unwrap(),
            "decode_error",
            "field `amount`: must be a decimal number (decimal.handling.mode=string), got \
             \"9975623,66\""
        )]
    );
    case.cleanup().await;
}

const PARSED_DDL: &str = r"
    CREATE TABLE gear (
        id INT PRIMARY KEY,
        at TIMETZ,
        mac MACADDR,
        mac8 MACADDR8,
        price MONEY,
        doc XML,
        words TSVECTOR,
        span INT4RANGE,
        macs MACADDR[],
        prices MONEY[]
    );";

const PARSED_MAPPING: &str = r#"
[[sink]]
name = "gear"
topic = "{prefix}-gear"
table = "gear"
key = ["id"]
batch_size = 50
[sink.columns]
id = { field = "id" }
at = { field = "at" }
mac = { field = "mac" }
mac8 = { field = "mac8" }
price = { field = "price" }
doc = { field = "doc" }
words = { field = "words" }
span = { field = "span" }
macs = { field = "macs" }
prices = { field = "prices" }
"#;

/// The types PostgreSQL reads from their own text form (`timetz`, `macaddr`, `xml`, a range,
/// …) take a string the server parses, and `money` a number (an exponent and more than two
/// places too, as Debezium's double mode writes `1.0E7`): every good row lands as written,
/// and a value the server refuses is a dead letter with its reason while the rest of its
/// batch lands.
#[tokio::test]
async fn types_the_server_parses_land_from_their_text_and_a_refused_value_is_a_dead_letter() {
    let Some(case) = Case::new(&["gear"], PARSED_DDL, PARSED_MAPPING).await else {
        return;
    };
    let plan = case.assert_valid();
    for column in [
        "timetz",
        "macaddr8",
        "money",
        "xml",
        "tsvector",
        "int4range",
        "money[]",
    ] {
        assert!(plan.contains(column), "{column} in the plan:\n{plan}");
    }
    let mut records: Vec<String> = (0..120)
        .map(|i| {
            format!(
                r#"{{"id":{i},"at":"10:15:{s:02}.123456Z","mac":"08:00:2b:01:02:{i:02x}",
                "mac8":"08:00:2b:01:02:03:04:{i:02x}","price":{price},"doc":"<a n=\"{i}\"/>",
                "words":"sluice moves {i}","span":"[{i},{end})","macs":["0800.2b01.02{i:02x}"],
                "prices":[1.0E7,{i}.125]}}"#,
                s = i % 60,
                price = if i % 2 == 0 {
                    "1.0E7".to_owned()
                } else {
                    format!("-{i}.345")
                },
                end = i + 10,
            )
            .replace('\n', "")
        })
        .collect();
    // A MAC address the server refuses, amid the batch.
    records[61] = r#"{"id":61,"mac":"08:00:2b:01:02:zz"}"#.to_owned();
    case.produce_text("gear", &records).await;
    case.run_to_end("parsed").await;

    let stored = case
        .rows(
            "SELECT concat_ws('|', id, at, mac, mac8, price::numeric, doc, words, span, macs, \
             prices::numeric[]) FROM gear ORDER BY id",
        )
        .await;
    assert_eq!(
        stored.len(),
        119,
        "every row but the refused one: {stored:?}"
    );
    assert_eq!(
        stored[0],
        "0|10:15:00.123456+00|08:00:2b:01:02:00|08:00:2b:01:02:03:04:00|10000000.00|<a n=\"0\"/>|\
         '0' 'moves' 'sluice'|[0,10)|{08:00:2b:01:02:00}|{10000000.00,0.13}"
    );
    assert_eq!(
        stored[1],
        "1|10:15:01.123456+00|08:00:2b:01:02:01|08:00:2b:01:02:03:04:01|-1.35|<a n=\"1\"/>|\
         '1' 'moves' 'sluice'|[1,11)|{08:00:2b:01:02:01}|{10000000.00,1.13}"
    );
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].1, 61, "{dead:?}");
    assert!(
        dead[0].3.contains("macaddr") && dead[0].3.contains("08:00:2b:01:02:zz"),
        "the server's reason names the type and the value: {dead:?}"
    );
    case.cleanup().await;
}

const PERIODS_DDL: &str = r"
    CREATE TABLE periods (
        id INT PRIMARY KEY,
        valid_from TIMESTAMPTZ NOT NULL,
        valid_to TIMESTAMPTZ,
        wall TIMESTAMP(3),
        day DATE,
        days DATE[],
        stamps TIMESTAMPTZ[]
    );";

const PERIODS_MAPPING: &str = r#"
[[sink]]
name = "periods"
topic = "{prefix}-periods"
table = "periods"
key = ["id"]
[sink.columns]
id = { field = "id" }
valid_from = { field = "valid_from" }
valid_to = { field = "valid_to" }
wall = { field = "wall" }
day = { field = "day" }
days = { field = "days" }
stamps = { field = "stamps" }
"#;

/// `infinity` and `-infinity` of `timestamptz`, `timestamp(p)` and `date` columns, and in
/// their arrays, land as PostgreSQL's own infinities (a validity period open at its end is
/// `valid_to = 'infinity'`), beside finite values in the same columns and batch.
#[tokio::test]
async fn infinite_timestamps_and_dates_land_as_infinities() {
    let Some(case) = Case::new(&["periods"], PERIODS_DDL, PERIODS_MAPPING).await else {
        return;
    };
    case.assert_valid();
    case.produce_text(
        "periods",
        &[
            r#"{"id":1,"valid_from":"2026-01-01T00:00:00Z","valid_to":"infinity","wall":"-infinity","day":"infinity","days":["-infinity","2026-01-02"],"stamps":["infinity"]}"#.to_owned(),
            r#"{"id":2,"valid_from":"-infinity","valid_to":"2026-02-01T10:00:00.5Z","wall":"2026-02-01T10:00:00.1234Z","day":"-Infinity"}"#.to_owned(),
            // Finite values far from today through the binary encoder (the scalar columns;
            // `days` goes as JSON): before 1970, before 2000, the first day of the era.
            r#"{"id":3,"valid_from":"1969-12-31T23:59:59.999999Z","valid_to":"1999-12-31T23:59:59.5Z","wall":"0001-01-01T00:00:00Z","day":"0001-01-01","days":["1969-12-31","1999-12-31","2000-01-01"]}"#.to_owned(),
        ],
    )
    .await;
    case.run_to_end("infinities").await;
    let stored = case
        .rows(
            "SELECT concat_ws('|', id, valid_from AT TIME ZONE 'UTC', valid_to AT TIME ZONE 'UTC', \
             wall, day, days, stamps) FROM periods ORDER BY id",
        )
        .await;
    assert_eq!(
        stored,
        [
            "1|2026-01-01 00:00:00|infinity|-infinity|infinity|{-infinity,2026-01-02}|{infinity}",
            "2|-infinity|2026-02-01 10:00:00.5|2026-02-01 10:00:00.123|-infinity",
            "3|1969-12-31 23:59:59.999999|1999-12-31 23:59:59.5|0001-01-01 00:00:00|0001-01-01|\
             {1969-12-31,1999-12-31,2000-01-01}",
        ]
    );
    assert!(case.dead_letters().await.is_empty());
    case.cleanup().await;
}

const FRACTIONS_DDL: &str = r"
    CREATE TABLE instants (id INT PRIMARY KEY, at TIMESTAMPTZ NOT NULL, wall TIMESTAMP NOT NULL);
    CREATE TABLE moments (at TIMESTAMPTZ PRIMARY KEY, v TEXT NOT NULL);";

const FRACTIONS_MAPPING: &str = r#"
[[sink]]
name = "instants"
topic = "{prefix}-instants"
table = "instants"
key = ["id"]
[sink.columns]
id = { field = "id" }
at = { field = "at" }
wall = { field = "wall" }

[[sink]]
name = "moments"
topic = "{prefix}-moments"
table = "moments"
key = ["at"]
conflict = "always-update"
[sink.columns]
at = { field = "at" }
v = { field = "v" }
"#;

/// Digits past the microsecond (Go's `RFC3339Nano`, Java's `Instant.toString()` write up to
/// nine) round as PostgreSQL rounds the same text, ties to even and into the next second:
/// each stored value is the server's own cast of its text, and keys that round to one instant
/// are one key, as they would be in the table.
#[tokio::test]
async fn fractions_past_the_microsecond_round_as_postgresql_rounds() {
    let Some(case) = Case::new(&["instants", "moments"], FRACTIONS_DDL, FRACTIONS_MAPPING).await
    else {
        return;
    };
    case.assert_valid();
    let fractions = [
        "2026-01-01T10:00:00.123456789",
        "2026-01-01T10:00:00.9999995",
        "2026-01-01T10:00:00.0000015",
        "2026-01-01T10:00:00.0000025",
        "2026-01-01T10:00:00.00000050001",
        "2026-01-01T10:00:00.0000004999",
        "1969-12-31T23:59:59.9999995",
        "1999-12-31T23:59:59.9999999",
    ];
    let records: Vec<String> = fractions
        .iter()
        .enumerate()
        .map(|(id, text)| json!({"id": id, "at": format!("{text}Z"), "wall": text}).to_string())
        .collect();
    case.produce_text("instants", &records).await;
    case.produce(
        "moments",
        &[
            json!({"at": "2026-01-01T00:00:00Z", "v": "a"}),
            json!({"at": "2026-01-01T00:00:00+00:00", "v": "b"}),
            json!({"at": "2026-01-01T01:00:00+01:00", "v": "c"}),
            json!({"at": "2026-01-01T00:00:00.0000004Z", "v": "d"}),
            json!({"at": "2026-01-01T00:00:00.0000006Z", "v": "e"}),
        ],
    )
    .await;
    case.run_to_end("fractions").await;
    let texts: Vec<String> = fractions.iter().map(|t| format!("'{t}'")).collect();
    let differing = case
        .rows(&format!(
            "SELECT concat_ws('|', i.id, i.at AT TIME ZONE 'UTC', i.wall, w.text) \
             FROM instants i JOIN unnest(ARRAY[{}]) WITH ORDINALITY AS w(text, n) ON i.id = w.n - 1 \
             WHERE i.at <> (w.text || 'Z')::timestamptz OR i.wall <> w.text::timestamp",
            texts.join(", ")
        ))
        .await;
    assert_eq!(
        differing,
        Vec::<String>::new(),
        "stored unlike the server's own cast"
    );
    assert_eq!(
        case.rows("SELECT count(*)::text FROM instants").await,
        [fractions.len().to_string()]
    );
    assert_eq!(
        case.rows("SELECT concat_ws('|', at AT TIME ZONE 'UTC', v) FROM moments ORDER BY at")
            .await,
        ["2026-01-01 00:00:00|d", "2026-01-01 00:00:00.000001|e"]
    );
    assert!(case.dead_letters().await.is_empty());
    case.cleanup().await;
}

const TILL_DDL: &str = r"
    CREATE TABLE till (
        id MONEY PRIMARY KEY,
        price MONEY,
        note TEXT
    );";

const TILL_MAPPING: &str = r#"
[[sink]]
name = "till"
topic = "{prefix}-till"
table = "till"
key = ["id"]
format = "debezium"
debezium = { schemas = false, decimal = "string" }
batch_size = 10
[sink.columns]
id = { field = "id" }
price = { field = "price" }
note = { field = "note" }
"#;

/// A Debezium sink on a table with `money` columns — a money key, and an update that keeps
/// an unchanged TOASTed text beside a money (the statement that reads stored values) —
/// writes its values through numeric (cast to money by the statement: money's own input
/// would read the decimal point from `lc_monetary`).
#[tokio::test]
async fn a_debezium_sink_writes_money_keys_and_kept_values() {
    let Some(case) = Case::new(&["till"], TILL_DDL, TILL_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let event = |op: &str, id: &str, price: &str, note: &str| {
        format!(
            r#"{{"before":null,"after":{{"id":"{id}","price":"{price}","note":"{note}"}},"source":{{"lsn":1}},"op":"{op}"}}"#
        )
    };
    case.produce_text(
        "till",
        &[
            event("c", "1.50", "12.35", "first"),
            event("c", "2", "-0.01", "second"),
            event("u", "1.50", "99.99", "__debezium_unavailable_value"),
        ],
    )
    .await;
    case.run_to_end("money").await;
    let stored = case
        .rows("SELECT concat_ws('|', id::numeric, price::numeric, note) FROM till ORDER BY id")
        .await;
    assert_eq!(stored, ["1.50|99.99|first", "2.00|-0.01|second"]);
    assert!(case.dead_letters().await.is_empty());
    case.cleanup().await;
}
