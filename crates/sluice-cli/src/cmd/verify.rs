//! `sluice verify`: check a deployment step by step and name the first failing step.
//!
//! Steps, in order: schema version, applications table, topics (exist, ≥ 3 partitions),
//! topic durability, messages produced, rows written, dead letters by kind, lag per group —
//! of the pipelines `sluice run` would run (`--sinks`, else `SLUICE_SINKS_FILE`: a mapping
//! file's sinks; the seed pipelines without one). The applications table is checked only
//! when they write the seed system's tables.
//! A step that cannot be determined or does not hold fails, and the later steps are not run
//! (they depend on the earlier ones). Topic durability (replication factor ≥ 3,
//! `min.insync.replicas` ≥ 2, unclean leader election off) is a warning that lets the later
//! steps run, unless `--strict` makes it a failure.

use super::pipelines::{Needs, Pipelines};
use anyhow::anyhow;
use clap::Args;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_kafka::Admin;
use sluice_kafka::admin::PartitionOffsets;
use sluice_postgres::migrate::{
    Set, applications_table_exists, missing_migrations, own_version, schema_version,
};
use sluice_postgres::ops::{dead_letters_by_kind, row_counts};
use sluice_process::Failure;
use sluice_storage::StorageSettings;
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
    /// A mapping file of declared sinks, or a folder of them; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
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
    let pipelines = Pipelines::load(args.sinks.as_deref())?;
    let steps = sluice_process::runtime()?.block_on(verify(&pipelines, args));
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

async fn verify(pipelines: &Pipelines, args: &VerifyArgs) -> Vec<Step> {
    let settings = &pipelines.settings;
    let (max_lag, strict) = (args.max_lag, args.strict);
    let mut steps = Vec::new();
    let needs = match pipelines.needs() {
        Ok(needs) => needs,
        Err(e) => {
            push(
                &mut steps,
                "schema version",
                Err(format!("{:#}", e.error())),
            );
            return steps;
        }
    };
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
    let read = match topics_read(&admin, &needs) {
        Ok(read) => read,
        Err(e) => {
            push(&mut steps, "topics", Err(e));
            return steps;
        }
    };
    if !push(
        &mut steps,
        "schema version",
        schema(&mut conn, needs.seeds).await,
    ) || !push(
        &mut steps,
        "applications table",
        applications(&mut conn, settings, needs.seeds).await,
    ) || !push(&mut steps, "topics", topics(&admin, &read))
        || !push_durability(&mut steps, durability(&admin, &read).await, strict)
        || !push(&mut steps, "messages produced", produced(&admin, &read))
        || !push(
            &mut steps,
            "rows written",
            rows(&mut conn, &needs.tables).await,
        )
        || !push(
            &mut steps,
            "dead letters",
            dead_letters(&mut conn, pipelines).await,
        )
    {
        return steps;
    }
    push(&mut steps, "lag", lag(&admin, pipelines, max_lag).await);
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
async fn durability(admin: &Admin, topics: &[String]) -> Result<Vec<String>, String> {
    use sluice_core::settings::topics::{DURABLE_MIN_INSYNC_REPLICAS, DURABLE_REPLICATION_FACTOR};
    let mut findings = Vec::new();
    for topic in topics {
        let Some(state) = admin
            .describe_topic(topic)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Err(format!("topic {topic} does not exist"));
        };
        if state.replication_factor < DURABLE_REPLICATION_FACTOR {
            findings.push(format!(
                "topic {topic}: replication factor {} < {DURABLE_REPLICATION_FACTOR}",
                state.replication_factor
            ));
        }
        match state.min_insync_replicas {
            Some(n) if n >= DURABLE_MIN_INSYNC_REPLICAS => {}
            n => findings.push(format!(
                "topic {topic}: min.insync.replicas {} < {DURABLE_MIN_INSYNC_REPLICAS}",
                n.map_or_else(|| "unknown".to_owned(), |n| n.to_string())
            )),
        }
        if state.unclean_leader_election {
            findings.push(format!(
                "topic {topic}: unclean.leader.election.enable=true"
            ));
        }
    }
    Ok(findings)
}

async fn schema(conn: &mut PgConnection, seeds: bool) -> StepResult {
    let latest = own_version();
    let Some(version) = schema_version(conn).await.map_err(|e| e.to_string())? else {
        return Err("no migrations applied: run `sluice migrate`".into());
    };
    let missing = missing_migrations(conn, seeds)
        .await
        .map_err(|e| e.to_string())?;
    match missing.first() {
        None => Ok((
            format!("version {version} (latest {latest})"),
            json!(version),
        )),
        Some(m) if m.set == Set::Seeds => Err(format!(
            "migration {} (the seed system's tables) is not applied: run `sluice migrate --seeds`",
            m.name
        )),
        Some(m) => Err(format!(
            "migration {} is not applied (version {version}, this build has {latest}): run \
             `sluice migrate`",
            m.name
        )),
    }
}

async fn applications(
    conn: &mut PgConnection,
    settings: &StorageSettings,
    seeds: bool,
) -> StepResult {
    let table = &settings.applications_table;
    if !seeds {
        return Ok((
            "not needed: no pipeline writes the seed system's tables".into(),
            Value::Null,
        ));
    }
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

/// The topics the pipelines read: the named ones, then those of the cluster each
/// `topic_pattern` matches now (one that matches none is an error naming it).
fn topics_read(admin: &Admin, needs: &Needs) -> Result<Vec<String>, String> {
    let mut read = needs.topics.clone();
    for pattern in &needs.patterns {
        let found = admin.topics_of(pattern).map_err(|e| e.to_string())?;
        if found.is_empty() {
            return Err(format!(
                "the cluster has none of the {pattern} a topic_pattern sink reads"
            ));
        }
        for topic in found {
            if !read.contains(&topic) {
                read.push(topic);
            }
        }
    }
    Ok(read)
}

fn topics(admin: &Admin, topics: &[String]) -> StepResult {
    let mut parts = Vec::new();
    let mut data = serde_json::Map::new();
    for topic in topics {
        match admin.partition_count(topic).map_err(|e| e.to_string())? {
            None => {
                return Err(format!(
                    "topic {topic} does not exist: run `sluice topics ensure`"
                ));
            }
            Some(n) if n < 3 => {
                return Err(format!(
                    "topic {topic} has {n} partitions, needs at least 3"
                ));
            }
            Some(n) => {
                parts.push(format!("{topic} ({n})"));
                data.insert(topic.clone(), json!(n));
            }
        }
    }
    Ok((parts.join(", "), Value::Object(data)))
}

fn produced(admin: &Admin, topics: &[String]) -> StepResult {
    let mut parts = Vec::new();
    let mut data = serde_json::Map::new();
    for topic in topics {
        let marks = admin.watermarks(topic).map_err(|e| e.to_string())?;
        let n: i64 = marks.iter().map(PartitionOffsets::records).sum();
        parts.push(format!("{topic} {n}"));
        data.insert(topic.clone(), json!(n));
    }
    Ok((parts.join(", "), Value::Object(data)))
}

async fn rows(conn: &mut PgConnection, tables: &[String]) -> StepResult {
    let counts = row_counts(conn, tables).await.map_err(|e| e.to_string())?;
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

/// The dead letters of the verified pipelines' groups (not those of other deployments
/// sharing the database).
async fn dead_letters(conn: &mut PgConnection, pipelines: &Pipelines) -> StepResult {
    let groups: Vec<String> = pipelines
        .names()
        .map_err(|e| format!("{:#}", e.error()))?
        .into_iter()
        .map(|(_, _, group)| group)
        .collect();
    let kinds = dead_letters_by_kind(conn, &groups)
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

async fn lag(admin: &Admin, pipelines: &Pipelines, max_lag: Option<i64>) -> StepResult {
    // Judged by what sluice stored (PostgreSQL's offsets): Kafka's commit trails each batch's
    // transaction, so on a live topic Kafka's lag may never read 0.
    let groups = super::lag::collect_stored_of(pipelines, admin)
        .await
        .map_err(|e| format!("{:#}", e.error()))?;
    let mut detail = groups
        .iter()
        .map(|g| format!("{} {} {}", g.group, g.topic, g.total_stored_lag))
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
