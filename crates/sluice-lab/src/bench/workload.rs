//! The storage bench's workload: two crawls of generated reviews, as the rows U and L write
//! (computed once, before anything is timed), and as Kafka records produced into the bench's
//! topics for K and S.

use super::{BenchArgs, Env, rows};
use crate::Failure;
use crate::produce::{bar, send_all};
use anyhow::Context;
use sluice_core::PipelineKind;
use sluice_kafka::Admin;
use sluice_loadgen::{CrawlerConfig, Generated, reviews_for_crawl};
use sluice_sinks::{SinkPlan, SinkRow};
use sluice_storage::StorageSettings;
use sqlx::PgConnection;
use std::collections::HashMap;
use std::time::Duration;

/// Both crawls of the run: the records and the rows made of them.
pub(super) struct Workload {
    /// The first crawl's generator settings (the apps' prefix is the run's).
    pub(super) config: CrawlerConfig,
    /// The first crawl's records (all inserts).
    pub(super) records: Vec<Generated>,
    /// The second crawl's records: every review again, newer (all updates).
    pub(super) records2: Vec<Generated>,
    /// The reviews pipeline's plan against the bench's schema.
    pub(super) plan: SinkPlan,
    /// The first crawl as typed reviews with their application ids (L's `COPY`).
    pub(super) typed: Vec<rows::Resolved>,
    /// The first crawl as the pipeline's rows (U).
    pub(super) rows: Vec<SinkRow>,
    /// The second crawl as the pipeline's rows (U_update).
    pub(super) rows2: Vec<SinkRow>,
}

/// The bench's Kafka side once both crawls are produced.
pub(super) struct Produced {
    /// The admin client of the run.
    pub(super) admin: Admin,
    /// The reviews topic, holding the first crawl.
    pub(super) topic: String,
    /// The topic holding the second crawl.
    pub(super) topic2: String,
}

impl Workload {
    /// Generates both crawls and turns them into rows against the bench's schema; returns
    /// them with the connection the phases share.
    pub(super) async fn prepare(
        env: &Env,
        args: &BenchArgs,
    ) -> Result<(Workload, PgConnection), Failure> {
        println!(
            "== workload: {} reviews over {} apps, two crawls (the second re-reads every review, newer)",
            args.reviews, args.apps
        );
        let config = CrawlerConfig {
            apps: args.apps,
            reviews: args.reviews,
            app_prefix: format!("com.{}", env.id),
            duplicate_fraction: 0.0,
            out_of_order_fraction: 0.0,
            poison_fraction: 0.0,
            ..CrawlerConfig::default()
        };
        let records = reviews_for_crawl(&config);
        let records2 = reviews_for_crawl(&CrawlerConfig {
            crawl: 2,
            ..config.clone()
        });
        let mut conn = sluice_postgres::connect(&env.url, "bench")
            .await
            .context("bench schema")?;
        let ids: HashMap<String, i64> =
            sqlx::query_as("SELECT package_name, id FROM apps_registry_application")
                .fetch_all(&mut conn)
                .await?
                .into_iter()
                .collect();
        let plan = rows::reviews_plan(&mut conn, &env.settings).await?;
        let typed = rows::resolve_rows(&records, &ids)?;
        let rows = rows::sink_rows(&plan, &records, &ids)?;
        let rows2 = rows::sink_rows(&plan, &records2, &ids)?;
        let work = Workload {
            config,
            records,
            records2,
            plan,
            typed,
            rows,
            rows2,
        };
        work.print_size();
        Ok((work, conn))
    }

    /// Prints the rows per crawl and the first crawl's JSON size.
    fn print_size(&self) {
        let bytes: usize = self
            .records
            .iter()
            .map(|r| r.payload.as_ref().map_or(0, Vec::len))
            .sum();
        println!(
            "   {} rows per crawl, {:.1} MiB of JSON",
            self.rows.len(),
            bytes as f64 / 1048576.0
        );
    }

    /// Produces the first crawl to the reviews topic and the second to a topic of its own
    /// (not timed).
    pub(super) async fn produce(
        &self,
        settings: &StorageSettings,
        env: &Env,
    ) -> Result<Produced, Failure> {
        println!("== producing both crawls (not timed)");
        let topic = env
            .settings
            .pipeline(sluice_core::PipelineKind::Reviews)
            .map(|p| p.topic.clone())
            .unwrap_or_default();
        let topic2 = format!("{topic}-crawl2");
        let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
        for p in &env.settings.pipelines {
            admin.ensure_topic(&p.topic, 3).await?;
        }
        admin.ensure_topic(&topic2, 3).await?;
        let producer = sluice_kafka::ResilientProducer::new(&settings.kafka, "sluice-bench")?;
        let progress = bar(self.records.len() as u64 * 2, "produce", false);
        send_all(&env.settings, &producer, &self.records, 0, &progress).await?;
        let mut settings2 = env.settings.clone();
        for p in &mut settings2.pipelines {
            if p.kind == PipelineKind::Reviews {
                p.topic.clone_from(&topic2);
            }
        }
        send_all(&settings2, &producer, &self.records2, 0, &progress).await?;
        progress.finish();
        Ok(Produced {
            admin,
            topic,
            topic2,
        })
    }
}
