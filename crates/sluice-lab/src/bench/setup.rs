//! The storage bench's environment: a schema of its own (the applications fixture, the
//! simulated apps, sluice's migrations), topics named after the run, and the settings the
//! drains run `sluice run` with; dropped again at the end.

use super::{BenchArgs, Env};
use crate::Failure;
use anyhow::{Context, anyhow};
use sluice_core::PipelineKind;
use sluice_kafka::Admin;
use sluice_loadgen::app_names;
use sluice_storage::StorageSettings;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::path::Path;

const FIXTURE: &str = include_str!("../../../../fixtures/applications.sql");

/// Creates the run's schema `id` with the fixture, the apps and the migrations; the settings
/// of its drains.
pub(super) async fn setup(
    settings: &StorageSettings,
    id: &str,
    args: &BenchArgs,
) -> Result<Env, Failure> {
    let mut admin_conn = sluice_postgres::connect(&settings.database_url, "bench")
        .await
        .context("DATABASE_URL")?;
    let schema = id.to_owned();
    let (url, mut conn) = schema_with_apps(&mut admin_conn, settings, &schema, id, args).await?;
    sluice_postgres::migrate(&mut conn, "apps_registry_application").await?;
    let vars: BTreeMap<String, String> = [
        (
            "KAFKA_BOOTSTRAP_SERVERS".to_owned(),
            settings.kafka.bootstrap_servers.clone(),
        ),
        ("DATABASE_URL".to_owned(), url.clone()),
        (
            "STORAGE_PIPELINES".to_owned(),
            "reviews,network-metrics".into(),
        ),
        (
            PipelineKind::Reviews.topic_variable(),
            format!("{id}-reviews"),
        ),
        (
            PipelineKind::NetworkMetrics.topic_variable(),
            format!("{id}-network-metrics"),
        ),
        ("STORAGE_GROUP_PREFIX".to_owned(), id.to_owned()),
    ]
    .into_iter()
    .collect();
    let settings = StorageSettings::from_map(&vars).map_err(Failure::config)?;
    Ok(Env {
        sluice: crate::sluice_exe()?,
        id: id.to_owned(),
        schema,
        url,
        settings,
    })
}

/// Creates `schema` with the applications fixture and the run's apps; its URL (the stack's
/// database with `schema` as the search path) and a connection to it.
async fn schema_with_apps(
    admin_conn: &mut PgConnection,
    settings: &StorageSettings,
    schema: &str,
    id: &str,
    args: &BenchArgs,
) -> Result<(String, PgConnection), Failure> {
    sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut *admin_conn)
        .await?;
    let separator = if settings.database_url.contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!(
        "{}{separator}options=-c%20search_path%3D{schema}",
        settings.database_url
    );
    let mut conn = sluice_postgres::connect(&url, "bench").await?;
    sqlx::raw_sql(FIXTURE).execute(&mut conn).await?;
    sqlx::query("INSERT INTO apps_registry_application (package_name) SELECT unnest($1::text[])")
        .bind(app_names(&format!("com.{id}"), args.apps))
        .execute(&mut conn)
        .await?;
    Ok((url, conn))
}

/// The baseline's environment (`--baseline-sluice`): `env` with `exe` as its `sluice` and a
/// schema of its own, `<schema>_base` (the same fixture and apps), which the baseline's
/// `sluice run` migrates itself when it starts (`migrate` took other options in older
/// builds). Builds never share a schema: an older build refuses a database that a newer one
/// migrated further, and a newer one would change the older one's tables under it.
pub(super) async fn baseline_env(
    settings: &StorageSettings,
    env: &Env,
    args: &BenchArgs,
    exe: &Path,
) -> Result<Env, Failure> {
    if !exe.is_file() {
        return Err(Failure::config(anyhow!(
            "--baseline-sluice {}: no such file",
            exe.display()
        )));
    }
    let schema = baseline_schema(env);
    let mut admin_conn = sluice_postgres::connect(&settings.database_url, "bench").await?;
    sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&mut admin_conn)
        .await?;
    let (url, _conn) = schema_with_apps(&mut admin_conn, settings, &schema, &env.id, args).await?;
    Ok(Env {
        sluice: exe.to_path_buf(),
        schema,
        url,
        ..env.clone()
    })
}

/// The baseline build's schema beside the run's own.
fn baseline_schema(env: &Env) -> String {
    format!("{}_base", env.schema)
}

/// Deletes the run's topics and drops its schema (and the baseline's, if there is one).
pub(super) async fn teardown(
    settings: &StorageSettings,
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
) -> Result<(), Failure> {
    for p in &env.settings.pipelines {
        admin.delete_topic(&p.topic).await?;
    }
    let mut admin_conn = sluice_postgres::connect(&settings.database_url, "bench").await?;
    sqlx::raw_sql(&format!(
        "DROP SCHEMA {} CASCADE; DROP SCHEMA IF EXISTS {} CASCADE",
        env.schema,
        baseline_schema(env)
    ))
    .execute(&mut admin_conn)
    .await?;
    let _ = conn;
    Ok(())
}
