//! The generated reviews as the bench writes them: the pipeline's own rows (the seed mapping's
//! decoder and plan against the live schema, the application looked up) for U, and their
//! typed fields for L's binary `COPY` and U's key split.

use crate::Failure;
use anyhow::anyhow;
use sluice_core::PipelineKind;
use sluice_core::WriteOutcome;
use sluice_loadgen::{Generated, Review};
use sluice_sinks::{Cell, RecordMeta, SinkDecoder, SinkPlan, SinkRow};
use sluice_storage::StorageSettings;
use sluice_storage::{Unplanned, plan_pipelines};
use sqlx::PgConnection;
use std::collections::HashMap;

/// A review with its application resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The resolved `application_id`.
    pub application_id: i64,
    /// The review as generated.
    pub message: Review,
}

/// The reviews seed pipeline's plan against `conn`'s schema.
pub async fn reviews_plan(
    conn: &mut PgConnection,
    settings: &StorageSettings,
) -> Result<SinkPlan, Failure> {
    let pipeline = settings
        .pipeline(PipelineKind::Reviews)
        .ok_or_else(|| anyhow!("the reviews pipeline is not selected"))?;
    let seed = Unplanned::seed(pipeline, settings).map_err(|e| anyhow!("{e}"))?;
    let planned = plan_pipelines(conn, vec![seed], "")
        .await?
        .map_err(|errors| anyhow!("the reviews seed does not plan: {errors:?}"))?;
    planned
        .into_iter()
        .next()
        .map(|p| p.plan)
        .ok_or_else(|| anyhow!("no plan").into())
}

/// The records decoded by the seed mapping and bound to their application ids, as the
/// pipeline would.
pub fn sink_rows(
    plan: &SinkPlan,
    records: &[Generated],
    ids: &HashMap<String, i64>,
) -> Result<Vec<SinkRow>, Failure> {
    let sink = sluice_sinks::seed_sink(PipelineKind::Reviews).map_err(|e| anyhow!("{e}"))?;
    let decoder = SinkDecoder::new(&sink, plan);
    let meta = RecordMeta {
        topic: "reviews",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: None,
        headers: &[],
    };
    let mut rows = Vec::with_capacity(records.len());
    for (i, record) in records.iter().enumerate() {
        let mut cells = decoder
            .decode(record.payload.as_deref(), &meta)
            .map_err(|e| anyhow!("generated row {i}: {e}"))?;
        let mut keys = Vec::new();
        for cell in &mut cells {
            if let Cell::Lookup(key) = cell {
                let id = *ids
                    .get(key.as_str())
                    .ok_or_else(|| anyhow!("unregistered app"))?;
                keys.push(Some(std::mem::take(key)));
                *cell = Cell::BigInt(id);
            }
        }
        let mut row = SinkRow::new(i, cells);
        row.keys = keys.into();
        rows.push(row);
    }
    Ok(rows)
}

/// The records as typed reviews with their application ids.
pub fn resolve_rows(
    records: &[Generated],
    ids: &HashMap<String, i64>,
) -> Result<Vec<Resolved>, Failure> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let message: Review = serde_json::from_slice(r.payload.as_deref().unwrap_or(b"null"))
                .map_err(|e| anyhow!("generated row {i}: {e}"))?;
            let application_id = *ids
                .get(&message.package_name)
                .ok_or_else(|| anyhow!("unregistered app"))?;
            Ok(Resolved {
                application_id,
                message,
            })
        })
        .collect::<Result<_, anyhow::Error>>()
        .map_err(Failure::from)
}

/// The pipeline's statement over `rows` (one per key).
pub async fn upsert(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    rows: &[SinkRow],
) -> Result<WriteOutcome, Failure> {
    sluice_postgres::declared::write_declared(conn, plan, rows, &|_| None)
        .await
        .map_err(|e| Failure::from(anyhow!("{e}")))
}
