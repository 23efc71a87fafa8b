//! `sluice verify`: check a deployment step by step and name the first failing step.
//!
//! Steps, in order: schema version, applications table, topics (exist, ≥ 3 partitions),
//! topic durability, messages produced, rows written, dead letters by kind, lag per group.
//! A step that cannot be determined or does not hold fails, and the later steps are not run
//! (they depend on the earlier ones). Topic durability (replication factor ≥ 3,
//! `min.insync.replicas` ≥ 2, unclean leader election off) is a warning that lets the later
//! steps run, unless `--strict` makes it a failure.

use anyhow::anyhow;
use clap::Args;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_core::Settings;
use sluice_kafka::Admin;
use sluice_kafka::admin::PartitionOffsets;
use sluice_postgres::migrate::{applications_table_exists, own_version, schema_version};
use sluice_postgres::ops::{dead_letters_by_kind, table_counts};
use sluice_process::Failure;
use sqlx::PgConnection;
use std::time::Duration;

/// Options of `sluice verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Fail the lag step when any group has more records than this not yet stored in
    /// PostgreSQL (its stored lag: the end less PostgreSQL's offset, summed over partitions).
    #[arg(long)]
    max_lag: Option<i64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Fail (instead of warn) when a topic has a replication factor below 3,
    /// min.insync.replicas below 2 or unclean leader election enabled.
    #[arg(long)]
    strict: bool,
}

#[derive(Debug, Serialize)]
struct Step {
    step: &'static str,
    ok: bool,
    warning: bool,
    detail: String,
    data: Value,
}

type StepResult = Result<(String, Value), String>;

/// Entry point.
pub fn run(args: &VerifyArgs) -> Result<(), Failure> {
    let settings = super::settings()?;
    let steps = sluice_process::runtime()?.block_on(verify(&settings, args.max_lag, args.strict));
    let failed = steps.iter().find(|s| !s.ok);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "ok": failed.is_none(), "steps": steps }))?
        );
    } else {
        for (i, s) in steps.iter().enumerate() {
            println!(
                "{} {}. {:<18} {}",
                match (s.ok, s.warning) {
                    (true, false) => "ok  ",
                    (true, true) => "WARN",
                    _ => "FAIL",
                },
                i + 1,
                s.step,
                s.detail
            );
        }
    }
    match failed {
        None => Ok(()),
        Some(s) => Err(anyhow!("verify failed at step `{}`: {}", s.step, s.detail).into()),
    }
}

async fn verify(settings: &Settings, max_lag: Option<i64>, strict: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut conn = match sluice_postgres::connect(&settings.database_url, "verify").await {
        Ok(conn) => conn,
        Err(e) => {
            push(
                &mut steps,
                "schema version",
                Err(format!("cannot connect to DATABASE_URL: {e}")),
            );
            return steps;
        }
    };
    let admin = match Admin::new(&settings.kafka, Duration::from_secs(10)) {
        Ok(admin) => admin,
        Err(e) => {
            push(
                &mut steps,
                "schema version",
                Err(format!("cannot create a Kafka client: {e}")),
            );
            return steps;
        }
    };
    if !push(&mut steps, "schema version", schema(&mut conn).await)
        || !push(
            &mut steps,
            "applications table",
            applications(&mut conn, settings).await,
        )
        || !push(&mut steps, "topics", topics(&admin, settings))
        || !push_durability(&mut steps, durability(&admin, settings).await, strict)
        || !push(&mut steps, "messages produced", produced(&admin, settings))
        || !push(&mut steps, "rows written", rows(&mut conn).await)
        || !push(&mut steps, "dead letters", dead_letters(&mut conn).await)
    {
        return steps;
    }
    push(&mut steps, "lag", lag(&admin, settings, max_lag).await);
    steps
}

fn push(steps: &mut Vec<Step>, step: &'static str, result: StepResult) -> bool {
    let ok = result.is_ok();
    let (detail, data) = result.unwrap_or_else(|e| (e, Value::Null));
    steps.push(Step {
        step,
        ok,
        warning: false,
        detail,
        data,
    });
    ok
}

/// The durability step: findings are a warning, or a failure with `--strict`.
fn push_durability(
    steps: &mut Vec<Step>,
    result: Result<Vec<String>, String>,
    strict: bool,
) -> bool {
    const STEP: &str = "topic durability";
    let findings = match result {
        Ok(findings) => findings,
        Err(e) => return push(steps, STEP, Err(e)),
    };
    let data = json!(findings);
    let (ok, warning, detail) = if findings.is_empty() {
        (
            true,
            false,
            "replication factor ≥ 3, min.insync.replicas ≥ 2, no unclean leader election".into(),
        )
    } else {
        (!strict, !strict, findings.join("; "))
    };
    steps.push(Step {
        step: STEP,
        ok,
        warning,
        detail,
        data,
    });
    ok
}

/// Per topic, what falls short of a durable topic.
async fn durability(admin: &Admin, settings: &Settings) -> Result<Vec<String>, String> {
    use sluice_core::settings::topics::{DURABLE_MIN_INSYNC_REPLICAS, DURABLE_REPLICATION_FACTOR};
    let mut findings = Vec::new();
    for p in &settings.pipelines {
        let Some(state) = admin
            .describe_topic(&p.topic)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Err(format!("topic {} does not exist", p.topic));
        };
        if state.replication_factor < DURABLE_REPLICATION_FACTOR {
            findings.push(format!(
                "topic {}: replication factor {} < {DURABLE_REPLICATION_FACTOR}",
                p.topic, state.replication_factor
            ));
        }
        match state.min_insync_replicas {
            Some(n) if n >= DURABLE_MIN_INSYNC_REPLICAS => {}
            n => findings.push(format!(
                "topic {}: min.insync.replicas {} < {DURABLE_MIN_INSYNC_REPLICAS}",
                p.topic,
                n.map_or_else(|| "unknown".to_owned(), |n| n.to_string())
            )),
        }
        if state.unclean_leader_election {
            findings.push(format!(
                "topic {}: unclean.leader.election.enable=true",
                p.topic
            ));
        }
    }
    Ok(findings)
}

async fn schema(conn: &mut PgConnection) -> StepResult {
    let latest = own_version();
    match schema_version(conn).await.map_err(|e| e.to_string())? {
        Some(v) if v == latest => Ok((format!("version {v} (latest {latest})"), json!(v))),
        Some(v) => Err(format!(
            "version {v}, this build expects {latest}: run `sluice migrate`"
        )),
        None => Err("no migrations applied: run `sluice migrate`".into()),
    }
}

async fn applications(conn: &mut PgConnection, settings: &Settings) -> StepResult {
    let table = &settings.applications_table;
    if applications_table_exists(conn, table)
        .await
        .map_err(|e| e.to_string())?
    {
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {}",
            sluice_postgres::migrate::quote_table(table)
        ))
        .fetch_one(conn)
        .await
        .map_err(|e| e.to_string())?;
        Ok((format!("{table} present, {n} applications"), json!(n)))
    } else {
        Err(format!(
            "{table} does not exist (STORAGE_APPLICATIONS_TABLE)"
        ))
    }
}

fn topics(admin: &Admin, settings: &Settings) -> StepResult {
    let mut parts = Vec::new();
    let mut data = serde_json::Map::new();
    for p in &settings.pipelines {
        match admin.partition_count(&p.topic).map_err(|e| e.to_string())? {
            None => {
                return Err(format!(
                    "topic {} does not exist: run `sluice topics ensure`",
                    p.topic
                ));
            }
            Some(n) if n < 3 => {
                return Err(format!(
                    "topic {} has {n} partitions, needs at least 3",
                    p.topic
                ));
            }
            Some(n) => {
                parts.push(format!("{} ({n})", p.topic));
                data.insert(p.topic.clone(), json!(n));
            }
        }
    }
    Ok((parts.join(", "), Value::Object(data)))
}

fn produced(admin: &Admin, settings: &Settings) -> StepResult {
    let mut parts = Vec::new();
    let mut data = serde_json::Map::new();
    for p in &settings.pipelines {
        let marks = admin.watermarks(&p.topic).map_err(|e| e.to_string())?;
        let n: i64 = marks.iter().map(PartitionOffsets::records).sum();
        parts.push(format!("{} {n}", p.topic));
        data.insert(p.topic.clone(), json!(n));
    }
    Ok((parts.join(", "), Value::Object(data)))
}

async fn rows(conn: &mut PgConnection) -> StepResult {
    let counts = table_counts(conn).await.map_err(|e| e.to_string())?;
    let detail = counts
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok((
        detail,
        json!(
            counts
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>()
        ),
    ))
}

async fn dead_letters(conn: &mut PgConnection) -> StepResult {
    let kinds = dead_letters_by_kind(conn)
        .await
        .map_err(|e| e.to_string())?;
    if kinds.is_empty() {
        return Ok(("none".into(), json!([])));
    }
    let detail = kinds
        .iter()
        .map(|(t, k, n, _)| format!("{t}/{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let data: Vec<Value> = kinds
        .iter()
        .map(|(t, k, n, r)| json!({"topic": t, "error_kind": k, "count": n, "example_reason": r}))
        .collect();
    Ok((detail, json!(data)))
}

async fn lag(admin: &Admin, settings: &Settings, max_lag: Option<i64>) -> StepResult {
    // Judged by what sluice stored (PostgreSQL's offsets): Kafka's commit trails each batch's
    // transaction, so on a live topic Kafka's lag may never read 0.
    let groups = super::lag::collect_stored(settings, admin)
        .await
        .map_err(|e| format!("{:#}", e.error()))?;
    let mut detail = groups
        .iter()
        .map(|g| format!("{} {}", g.group, g.total_stored_lag))
        .collect::<Vec<_>>()
        .join(", ");
    let apart: Vec<String> = groups
        .iter()
        .flat_map(|g| {
            g.partitions.iter().filter(|p| p.apart).map(move |p| {
                format!(
                    "{}[{}] kafka {} postgres {}",
                    g.topic,
                    p.partition,
                    p.committed.unwrap_or(0),
                    p.postgres.unwrap_or(0)
                )
            })
        })
        .collect();
    if !apart.is_empty() {
        detail.push_str(&format!(
            "; offsets more than a batch apart (PostgreSQL's count): {}",
            apart.join(", ")
        ));
    }
    if let Some((max, g)) = max_lag.and_then(|max| {
        groups
            .iter()
            .find(|g| g.total_stored_lag > max)
            .map(|g| (max, g))
    }) {
        return Err(format!(
            "group {} has {} records not yet stored in PostgreSQL (--max-lag {max})",
            g.group, g.total_stored_lag
        ));
    }
    Ok((detail, serde_json::to_value(&groups).unwrap_or(Value::Null)))
}
