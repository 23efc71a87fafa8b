//! The storage bench's environment: a schema of its own (the applications fixture, the
//! simulated apps, sluice's migrations), topics named after the run, and the settings the
//! drains run `sluice run` with; dropped again at the end.

use super::{BenchArgs, Env};
use crate::Failure;
use anyhow::Context;
use sluice_core::PipelineKind;
use sluice_kafka::Admin;
use sluice_loadgen::app_names;
use sluice_storage::StorageSettings;
use sqlx::PgConnection;
use std::collections::BTreeMap;

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
    sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin_conn)
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

/// Deletes the run's topics and drops its schema.
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
    sqlx::raw_sql(&format!("DROP SCHEMA {} CASCADE", env.schema))
        .execute(&mut admin_conn)
        .await?;
    let _ = conn;
    Ok(())
}
