//! `sluice sinks validate` run as a binary against a test schema: the seed mappings are
//! valid (exit 0) and their plan names the expected statement; every validation error exits 2
//! naming the sink and the column. The command gets no Kafka settings at all: it reads the
//! catalog and never creates a consumer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use sluice_testkit::TestSchema;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn seed(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../deploy/sinks/{name}.toml"))
}

/// `sluice sinks validate <args>` with only `DATABASE_URL` (and `extra`) set.
fn validate(url: &str, args: &[&str], extra: &[(&str, &str)]) -> Output {
    Command::new(support::sluice_binary())
        .args(["sinks", "validate"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", url)
        .envs(extra.iter().copied())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn the_seed_mappings_are_valid_and_plan_their_statements() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, "apps_registry_application")
        .await
        .unwrap();
    let expected = [
        (
            "reviews",
            "ON CONFLICT (\"review_id\") DO UPDATE SET",
            "WHERE EXCLUDED.\"last_synced_at\" > target.\"last_synced_at\"",
        ),
        (
            "app-stats",
            "ON CONFLICT (\"application_id\", \"crawled_at\") DO NOTHING",
            "ARRAY(SELECT e.value::bigint FROM jsonb_array_elements_text(\"histogram\")",
        ),
        (
            "network-metrics",
            "ON CONFLICT (\"analysis_id\") DO NOTHING",
            "ARRAY(SELECT e.value::text FROM jsonb_array_elements_text(\"domains\")",
        ),
    ];
    for (name, conflict, detail) in expected {
        let file = seed(name);
        let out = validate(&schema.url, &[file.to_str().unwrap()], &[]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        assert!(
            stdout.contains(&format!(
                "sink {name}: topic {name}, group storage-consumer.{name}, table {}",
                name.replace('-', "_")
            )),
            "{stdout}"
        );
        assert!(stdout.contains(conflict), "{name}: {stdout}");
        assert!(stdout.contains(detail), "{name}: {stdout}");

        // The same file through SLUICE_SINKS_FILE and --sinks, as JSON; the group prefix
        // of the built-ins applies.
        let by_var = validate(
            &schema.url,
            &["--json"],
            &[
                ("SLUICE_SINKS_FILE", file.to_str().unwrap()),
                ("STORAGE_GROUP_PREFIX", "blue"),
            ],
        );
        assert_eq!(by_var.status.code(), Some(0), "{}", text(&by_var.stderr));
        let json: serde_json::Value = serde_json::from_slice(&by_var.stdout).unwrap();
        assert_eq!(json["valid"], true);
        assert_eq!(json["sinks"][0]["group"], format!("blue.{name}"));
        let statement = json["sinks"][0]["statement"].as_str().unwrap();
        assert!(statement.contains(conflict), "{statement}");
        let by_flag = validate(
            &schema.url,
            &["--sinks", file.to_str().unwrap(), "--json"],
            &[],
        );
        assert_eq!(by_flag.status.code(), Some(0));
        let flagged: serde_json::Value = serde_json::from_slice(&by_flag.stdout).unwrap();
        assert_eq!(flagged["sinks"][0]["statement"], statement);
    }
    let none = validate(&schema.url, &[], &[]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("no mapping file"),
        "{}",
        text(&none.stderr)
    );
    drop(conn);
    schema.drop_schema().await;
}

/// A mapping of table `items` with `from` replaced by `to`, written to `dir`.
fn variant(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    const BASE: &str = r#"
[[sink]]
name = "items"
topic = "items"
table = "items"
key = ["item_id"]
conflict = { newest-wins = "synced_at" }

[sink.columns]
item_id = { field = "id" }
qty = { field = "qty", min = 0 }
small = { field = "small" }
synced_at = { field = "synced_at" }
"#;
    assert!(BASE.contains(from), "{from}");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, BASE.replacen(from, to, 1)).unwrap();
    path
}

#[tokio::test]
async fn every_validation_error_exits_2_naming_the_sink_and_the_column() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sqlx::raw_sql(
        "CREATE TABLE items (
             item_id VARCHAR(32) NOT NULL UNIQUE, qty INTEGER NOT NULL, small SMALLINT,
             synced_at TIMESTAMPTZ NOT NULL, note TEXT, plain BIGINT NOT NULL DEFAULT 0,
             total BIGINT GENERATED ALWAYS AS (qty * 2) STORED)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(sluice_testkit::unique("sinks"));
    std::fs::create_dir_all(&dir).unwrap();

    let valid = variant(&dir, "valid", "", "");
    let out = validate(&schema.url, &[valid.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let cases = [
        (
            "unknown-table",
            "table = \"items\"",
            "table = \"itemz\"",
            None,
            "sink `items`: table `itemz` does not exist",
        ),
        (
            "unknown-column",
            "small = {",
            "smal = {",
            Some("smal"),
            "sink `items`, column `smal`: table `items` has no column `smal`",
        ),
        (
            "key-not-unique",
            "key = [\"item_id\"]",
            "key = [\"item_id\", \"qty\"]",
            Some("item_id, qty"),
            "sink `items`, column `item_id, qty`: no unique constraint or index of `items` is \
             exactly (item_id, qty), which ON CONFLICT needs",
        ),
        (
            "string-into-integer",
            "small = { field = \"small\" }",
            "small = { const = \"seven\" }",
            Some("small"),
            "sink `items`, column `small`: const \"seven\" cannot fit smallint: a string",
        ),
        (
            "offset-into-smallint",
            "small = { field = \"small\" }",
            "small = { kafka = \"offset\" }",
            Some("small"),
            "sink `items`, column `small`: kafka offset cannot fit smallint: an offset is a \
             64-bit integer",
        ),
        (
            "not-null-without-source",
            "qty = { field = \"qty\", min = 0 }\n",
            "",
            Some("qty"),
            "sink `items`, column `qty`: NOT NULL without a default, and no source",
        ),
        (
            "generated-column",
            "small = { field = \"small\" }",
            "total = { field = \"total\" }",
            Some("total"),
            "sink `items`, column `total`: a generated or GENERATED ALWAYS column cannot be \
             written",
        ),
        (
            "rule-on-the-wrong-type",
            "small = { field = \"small\" }",
            "small = { field = \"small\", max_length = 3 }",
            Some("small"),
            "sink `items`, column `small`: rule `max_length` does not apply to smallint",
        ),
    ];
    for (name, from, to, column, reason) in cases {
        let file = variant(&dir, name, from, to);
        let out = validate(&schema.url, &[file.to_str().unwrap()], &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(reason), "{name}: {stderr}");
        assert!(stderr.contains("nothing was consumed"), "{name}: {stderr}");
        let json = validate(&schema.url, &[file.to_str().unwrap(), "--json"], &[]);
        assert_eq!(json.status.code(), Some(2), "{name}");
        let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(json["valid"], false);
        assert_eq!(json["errors"][0]["sink"], "items", "{name}");
        assert_eq!(json["errors"][0]["column"].as_str(), column, "{name}");
        assert_eq!(json["errors"][0]["reason"], reason, "{name}");
    }

    // Mistakes found without the database name the file, the sink and the key.
    let typo = variant(
        &dir,
        "typo",
        "qty = { field = \"qty\", min = 0 }",
        "qty = { feild = \"qty\" }",
    );
    let out = validate(&schema.url, &[typo.to_str().unwrap()], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: sink `items`, key `columns.qty`: unknown field `feild`",
            typo.display()
        )),
        "{stderr}"
    );
    let guard = variant(
        &dir,
        "guard",
        "newest-wins = \"synced_at\"",
        "newest-wins = \"note\"",
    );
    let out = validate(&schema.url, &[guard.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "sink `items`: column `note`: the newest-wins column must have a source in `columns`"
        ),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
    drop(conn);
    schema.drop_schema().await;
}
