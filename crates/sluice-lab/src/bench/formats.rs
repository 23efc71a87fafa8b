//! Record formats (`--formats-pairs N`): the same review-like records written as JSON and as
//! Avro behind the schema registry's wire header (the schema registered in
//! `SCHEMA_REGISTRY_URL`, the records encoded by the Apache Avro library, not by sluice),
//! each topic drained by `sluice run` through one declared sink that differs only in
//! `format`, in ABBA pairs: rows/s and `sluice run`'s CPU per record of each, and their ratio
//! (docs/registry.md#performance). The CPU counts the process's whole life, start-up included
//! (the same for both).

use super::Env;
use super::sizes::{Drain, Size, drain, letters, produce_values};
use crate::Failure;
use anyhow::anyhow;
use apache_avro::types::Value as Avro;
use sluice_kafka::Admin;
use sqlx::PgConnection;
use std::path::PathBuf;

/// The records' Avro schema.
const SCHEMA: &str = r#"{"type": "record", "name": "Review", "namespace": "bench",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "app", "type": "string"},
    {"name": "rating", "type": "int"},
    {"name": "title", "type": "string"},
    {"name": "body", "type": "string"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "helpful", "type": "long"},
    {"name": "verified", "type": "boolean"}
  ]}"#;

/// One review's values.
struct Review<'b> {
    id: i64,
    app: String,
    rating: i32,
    title: &'b str,
    body: &'b str,
    at_micros: i64,
    helpful: i64,
    verified: bool,
}

impl<'b> Review<'b> {
    fn of(id: usize, block: &'b str) -> Self {
        let start = (id * 7919) % 60_000;
        Review {
            id: i64::try_from(id).unwrap_or(i64::MAX),
            app: format!("com.bench.app{}", id % 1000),
            rating: i32::try_from(id % 5).unwrap_or(0) + 1,
            title: &block[start..start + 40],
            body: &block[start + 40..start + 440],
            at_micros: 1_764_000_000_000_000 + i64::try_from(id).unwrap_or(0) * 1_000_003,
            helpful: i64::try_from(id % 997).unwrap_or(0),
            verified: id.is_multiple_of(3),
        }
    }

    fn json(&self) -> Vec<u8> {
        let at = chrono::DateTime::from_timestamp_micros(self.at_micros)
            .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
            .unwrap_or_default();
        serde_json::json!({
            "id": self.id, "app": self.app, "rating": self.rating, "title": self.title,
            "body": self.body, "at": at, "helpful": self.helpful, "verified": self.verified,
        })
        .to_string()
        .into_bytes()
    }

    fn avro(&self) -> Avro {
        Avro::Record(vec![
            ("id".into(), Avro::Long(self.id)),
            ("app".into(), Avro::String(self.app.clone())),
            ("rating".into(), Avro::Int(self.rating)),
            ("title".into(), Avro::String(self.title.to_owned())),
            ("body".into(), Avro::String(self.body.to_owned())),
            ("at".into(), Avro::TimestampMicros(self.at_micros)),
            ("helpful".into(), Avro::Long(self.helpful)),
            ("verified".into(), Avro::Boolean(self.verified)),
        ])
    }
}

/// Both formats' topics produced with `count` records, `pairs` drains of each; prints a
/// table and returns it as JSON.
pub(super) async fn run(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    count: usize,
    pairs: usize,
) -> Result<serde_json::Value, Failure> {
    let registry = std::env::var("SCHEMA_REGISTRY_URL")
        .map_err(|_| anyhow!("--formats-pairs needs SCHEMA_REGISTRY_URL (scripts/stack env)"))?;
    sqlx::raw_sql(
        "CREATE TABLE reviews_fmt (id BIGINT PRIMARY KEY, app TEXT NOT NULL, rating INT NOT NULL, \
         title TEXT, body TEXT, at TIMESTAMPTZ, helpful BIGINT, verified BOOLEAN)",
    )
    .execute(&mut *conn)
    .await?;
    let block = String::from_utf8(letters(61_000)).map_err(|e| anyhow!("{e}"))?;
    let json = prepare(env, admin, "json", count).await?;
    produce_values(env, &json.topic, count, |id| Review::of(id, &block).json()).await?;
    let avro = prepare(env, admin, "avro", count).await?;
    let id = register(&registry, &format!("{}-value", avro.topic))?;
    let schema = apache_avro::Schema::parse_str(SCHEMA).map_err(|e| anyhow!("{e}"))?;
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
        .build()
        .map_err(|e| anyhow!("{e}"))?;
    let mut failed = None;
    produce_values(env, &avro.topic, count, |n| {
        let mut value = vec![0];
        value.extend(id.to_be_bytes());
        match writer.write_value_to_vec(Review::of(n, &block).avro()) {
            Ok(datum) => value.extend(datum),
            Err(error) => failed = Some(error.to_string()),
        }
        value
    })
    .await?;
    if let Some(error) = failed {
        return Err(anyhow!("Avro encoding: {error}").into());
    }
    let (mut by_json, mut by_avro) = (Vec::new(), Vec::new());
    for pair in 0..pairs {
        let order = if pair.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for is_json in order {
            sqlx::raw_sql("TRUNCATE reviews_fmt; CHECKPOINT")
                .execute(&mut *conn)
                .await?;
            let size = if is_json { &json } else { &avro };
            let tag = format!("{}-{pair}", size.name);
            let drained = drain(env, admin, size, &tag).await?;
            if is_json { &mut by_json } else { &mut by_avro }.push(drained);
        }
    }
    for size in [&json, &avro] {
        admin.delete_topic(&size.topic).await?;
        let _ = std::fs::remove_file(&size.file);
    }
    Ok(report(count, &by_json, &by_avro))
}

/// One format's topic and sink file.
async fn prepare(env: &Env, admin: &Admin, format: &str, count: usize) -> Result<Size, Failure> {
    let name = format!("fmt_{format}");
    let topic = format!("{}-{name}", env.id);
    admin.ensure_topic(&topic, 3).await?;
    let file = PathBuf::from(format!(".stack/bench-{}-{name}.toml", env.id));
    std::fs::write(
        &file,
        format!(
            "[[sink]]\nname = \"{name}\"\ntopic = \"{topic}\"\ntable = \"reviews_fmt\"\n\
             key = [\"id\"]\nconflict = \"always-update\"\nformat = \"{format}\"\n\
             [sink.columns]\nid = {{ field = \"id\" }}\napp = {{ field = \"app\" }}\n\
             rating = {{ field = \"rating\" }}\ntitle = {{ field = \"title\" }}\n\
             body = {{ field = \"body\" }}\nat = {{ field = \"at\" }}\n\
             helpful = {{ field = \"helpful\" }}\nverified = {{ field = \"verified\" }}\n"
        ),
    )?;
    Ok(Size {
        count,
        bytes: 0,
        name,
        topic,
        file,
    })
}

/// Registers the schema under `subject`: its id.
fn register(registry: &str, subject: &str) -> Result<i32, Failure> {
    let body: serde_json::Value = ureq::post(&format!("{registry}/subjects/{subject}/versions"))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .send_json(serde_json::json!({ "schema": SCHEMA }))
        .map_err(|e| anyhow!("registering {subject}: {e}"))?
        .body_mut()
        .read_json()
        .map_err(|e| anyhow!("registering {subject}: {e}"))?;
    body["id"]
        .as_i64()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| anyhow!("registering {subject}: no id in {body}").into())
}

/// The table: each format's median rows/s and CPU µs per record, and Avro against JSON.
fn report(count: usize, json: &[Drain], avro: &[Drain]) -> serde_json::Value {
    let median = |runs: &[Drain], f: &dyn Fn(&Drain) -> f64| {
        super::median(&runs.iter().map(f).collect::<Vec<_>>())
    };
    let per_record = |d: &Drain| d.cpu_s * 1e6 / count as f64;
    let (json_rate, avro_rate) = (median(json, &|d| d.rate), median(avro, &|d| d.rate));
    let (json_cpu, avro_cpu) = (median(json, &per_record), median(avro, &per_record));
    println!("| format | rows/s (median) | CPU µs per record (median) | runs (rows/s, CPU s) |");
    println!("|---|---|---|---|");
    for (name, rate, cpu, runs) in [
        ("json", json_rate, json_cpu, json),
        ("avro", avro_rate, avro_cpu, avro),
    ] {
        let shown: Vec<String> = runs
            .iter()
            .map(|d| format!("{:.0} / {:.2}", d.rate, d.cpu_s))
            .collect();
        println!("| {name} | {rate:.0} | {cpu:.1} | {} |", shown.join(", "));
    }
    println!(
        "S_avro / S_json = {:.3}; CPU per record avro / json = {:.3}",
        avro_rate / json_rate,
        avro_cpu / json_cpu
    );
    let runs = |runs: &[Drain]| runs.iter().map(|d| [d.rate, d.cpu_s]).collect::<Vec<_>>();
    serde_json::json!({
        "records": count,
        "json": {"rows_per_second": json_rate, "cpu_us_per_record": json_cpu, "runs": runs(json)},
        "avro": {"rows_per_second": avro_rate, "cpu_us_per_record": avro_cpu, "runs": runs(avro)},
        "s_avro_over_s_json": avro_rate / json_rate,
        "cpu_avro_over_json": avro_cpu / json_cpu,
    })
}
