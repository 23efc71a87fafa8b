//! The demo's checks: what one crawl must leave in PostgreSQL, counted before it, and the
//! comparison after it.

use super::consumer::pipeline_totals;
use crate::Failure;
use anyhow::anyhow;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sluice_core::PipelineKind;
use sluice_loadgen::{Expect, Generated};
use sqlx::PgConnection;

/// What one crawl must leave in PostgreSQL, and what was there before it.
pub(super) struct Expected {
    /// The review ids the crawl sends as rows.
    review_ids: Vec<String>,
    /// How many of them were stored before (an earlier crawl).
    reviews_present: i64,
    /// Rows of `reviews`, `app_stats` and dead letters before the crawl.
    reviews: i64,
    app_stats: i64,
    dead_letters: i64,
    /// App-stats rows the crawl sends (each a new crawl time) and its poison messages.
    new_app_stats: i64,
    poison: i64,
}

impl Expected {
    /// What `records` must leave, with the counts before they are sent.
    pub(super) async fn before(
        conn: &mut PgConnection,
        records: &[Generated],
    ) -> Result<Self, Failure> {
        let mut review_ids: Vec<String> = records
            .iter()
            .filter(|r| r.pipeline == PipelineKind::Reviews && r.expect == Expect::Row)
            .filter_map(|r| serde_json::from_slice::<Value>(r.payload.as_deref()?).ok())
            .filter_map(|v| v.get("review_id")?.as_str().map(str::to_owned))
            .collect();
        review_ids.sort_unstable();
        review_ids.dedup();
        let count = |pipeline: PipelineKind, pick: fn(&Expect) -> bool| {
            records
                .iter()
                .filter(|r| r.pipeline == pipeline && pick(&r.expect))
                .count() as i64
        };
        let new_app_stats = count(PipelineKind::AppStats, |e| *e == Expect::Row);
        let poison = count(PipelineKind::AppStats, |e| {
            matches!(e, Expect::DeadLetter(_))
        }) + count(PipelineKind::Reviews, |e| {
            matches!(e, Expect::DeadLetter(_))
        });
        let reviews_present = Self::reviews_present(conn, &review_ids).await?;
        let (reviews, app_stats, dead_letters) = Self::counts(conn).await?;
        Ok(Self {
            review_ids,
            reviews_present,
            reviews,
            app_stats,
            dead_letters,
            new_app_stats,
            poison,
        })
    }

    /// How many of `ids` are stored as reviews.
    async fn reviews_present(conn: &mut PgConnection, ids: &[String]) -> Result<i64, Failure> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM reviews WHERE review_id = ANY($1::text[])")
                .bind(ids)
                .fetch_one(conn)
                .await?,
        )
    }

    /// Rows of `reviews`, `app_stats` and dead letters.
    async fn counts(conn: &mut PgConnection) -> Result<(i64, i64, i64), Failure> {
        Ok(sqlx::query_as(
            "SELECT (SELECT count(*) FROM reviews), (SELECT count(*) FROM app_stats),
                    (SELECT count(*) FROM dead_letter_events)",
        )
        .fetch_one(conn)
        .await?)
    }

    /// Prints the checks and fails naming every one that does not hold: a missing or an
    /// extra row, a review inserted or updated more or less than once, a dead letter too many
    /// or too few, an analyzer message not stored.
    pub(super) async fn check(
        &self,
        conn: &mut PgConnection,
        started_at: DateTime<Utc>,
        analyzed: u64,
        log: &std::path::Path,
    ) -> Result<(), Failure> {
        let present = Self::reviews_present(conn, &self.review_ids).await?;
        let (reviews, app_stats, dead_letters) = Self::counts(conn).await?;
        let metrics: i64 =
            sqlx::query_scalar("SELECT count(*) FROM network_metrics WHERE captured_at >= $1")
                .bind(started_at)
                .fetch_one(&mut *conn)
                .await?;
        let expected_ids = self.review_ids.len() as i64;
        // Each review of the crawl is written once: inserted if new, updated if an earlier
        // crawl stored it; copies and older versions are skipped.
        let (inserted, updated) =
            pipeline_totals(log, PipelineKind::Reviews.name()).unwrap_or((-1, -1));
        let checks = [
            ("reviews of this crawl stored", present, expected_ids),
            (
                "new review rows",
                reviews - self.reviews,
                expected_ids - self.reviews_present,
            ),
            (
                "reviews inserted (consumer)",
                inserted,
                expected_ids - self.reviews_present,
            ),
            ("reviews updated (consumer)", updated, self.reviews_present),
            (
                "new app-stats rows",
                app_stats - self.app_stats,
                self.new_app_stats,
            ),
            (
                "new dead letters",
                dead_letters - self.dead_letters,
                self.poison,
            ),
            (
                "analyzer messages stored",
                metrics,
                i64::try_from(analyzed).unwrap_or(i64::MAX),
            ),
        ];
        println!("\nchecks:");
        let mut failed = Vec::new();
        for (what, got, want) in checks {
            let verdict = if got == want { "ok" } else { "FAILED" };
            println!("  {what:<30} {got:>8} (expected {want:>8})  {verdict}");
            if got != want {
                failed.push(format!("{what}: {got}, expected {want}"));
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        Err(anyhow!("the demo's checks failed: {}", failed.join("; ")).into())
    }
}
