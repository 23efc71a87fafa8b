//! Storage consumer on the real stack: rows, values, offsets, replay, the monotonic guard,
//! in-batch duplicates, and unknown packages (issue 3, tests 1, 2, 3, 5, 9).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::*;
use serde_json::json;
use sluice_core::PipelineKind;
use sqlx::Row;
use std::time::{Duration, Instant};

fn reviews_n() -> usize {
    std::env::var("SLUICE_IT_REVIEWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_topic_lands_exactly_once_and_replay_changes_nothing() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let apps = app_names(&fx.prefix, 50);
    let ids = fx.schema.register_apps(&apps).await;
    let n_reviews = reviews_n();
    let n_stats = 2_000;
    let n_metrics = 500;

    let reviews: Vec<_> = (0..n_reviews)
        .map(|i| {
            let app = &apps[i % apps.len()];
            (
                app.clone(),
                review(i, app, "2026-11-03T08:00:00.000001Z", (i % 1000) as i64),
            )
        })
        .collect();
    let stats: Vec<_> = (0..n_stats)
        .map(|i| {
            let app = &apps[i % apps.len()];
            let crawled = format!(
                "2026-11-{:02}T{:02}:00:00.123456Z",
                1 + i / 50 / 24 % 28,
                i / 50 % 24
            );
            (app.clone(), app_stats(app, &crawled))
        })
        .collect();
    let metrics: Vec<_> = (0..n_metrics)
        .map(|i| {
            let id = format!("00000000-0000-4000-8000-{i:012}");
            (id.clone(), network_metrics(&id, &apps[i % apps.len()]))
        })
        .collect();
    fx.produce_json(PipelineKind::Reviews, &reviews).await;
    fx.produce_json(PipelineKind::AppStats, &stats).await;
    fx.produce_json(PipelineKind::NetworkMetrics, &metrics)
        .await;

    let started = Instant::now();
    let running = fx.start(fx.settings(&PipelineKind::ALL, &[]));
    fx.wait_caught_up(PipelineKind::Reviews, Duration::from_secs(600))
        .await;
    let reviews_elapsed = started.elapsed();
    fx.wait_caught_up(PipelineKind::AppStats, Duration::from_secs(120))
        .await;
    fx.wait_caught_up(PipelineKind::NetworkMetrics, Duration::from_secs(120))
        .await;
    let first = stop(running);
    println!(
        "reviews: {n_reviews} messages drained in {:.2} s = {:.0} msg/s (debug={})",
        reviews_elapsed.as_secs_f64(),
        n_reviews as f64 / reviews_elapsed.as_secs_f64(),
        cfg!(debug_assertions)
    );

    assert_eq!(
        fx.count("SELECT count(*) FROM reviews").await,
        n_reviews as i64
    );
    assert_eq!(
        fx.count("SELECT count(*) FROM app_stats").await,
        n_stats as i64
    );
    assert_eq!(
        fx.count("SELECT count(*) FROM network_metrics").await,
        n_metrics as i64
    );
    assert_eq!(fx.count("SELECT count(*) FROM dead_letter_events").await, 0);
    for kind in PipelineKind::ALL {
        let (end, committed) = fx.offsets(kind);
        assert_eq!(committed, end, "{kind}: committed offsets = end offsets");
        assert_eq!(
            first[&kind].report.write.inserted, end as u64,
            "{kind} inserted"
        );
        assert!(first[&kind].report.balances());
    }

    // Values, one row per table checked field by field.
    let mut conn = fx.conn().await;
    let row = sqlx::query(
        "SELECT application_id, user_name, score, content, thumbs_up_count, app_version,
                reviewed_at::text AS reviewed_at, reply_content, replied_at, last_synced_at::text AS synced,
                sentiment FROM reviews WHERE review_id = 'gp:review-7'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(row.get::<i64, _>("application_id"), ids[7]);
    assert_eq!(row.get::<String, _>("user_name"), "User 7 Ünïcödé");
    assert_eq!(row.get::<i16, _>("score"), 3);
    assert_eq!(row.get::<String, _>("content"), "review text 7 — پیام ✓");
    assert_eq!(row.get::<i32, _>("thumbs_up_count"), 7);
    assert_eq!(row.get::<String, _>("app_version"), "1.2.3");
    assert_eq!(
        row.get::<String, _>("reviewed_at"),
        "2026-11-01 10:00:00+00"
    );
    assert_eq!(row.get::<Option<String>, _>("reply_content"), None);
    assert_eq!(
        row.get::<String, _>("synced"),
        "2026-11-03 08:00:00.000001+00"
    );
    assert_eq!(row.get::<Option<String>, _>("sentiment"), None);

    let row = sqlx::query(
        "SELECT title, score, ratings, histogram, price, free, version, crawled_at::text AS c,
                updated_at::text AS u FROM app_stats WHERE application_id = $1 ORDER BY crawled_at LIMIT 1",
    )
    .bind(ids[0])
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(row.get::<String, _>("title"), "An app");
    assert_eq!(row.get::<f64, _>("score"), 4.25);
    assert_eq!(row.get::<i64, _>("ratings"), 12345);
    assert_eq!(row.get::<Vec<i64>, _>("histogram"), vec![1, 2, 3, 4, 5]);
    assert_eq!(row.get::<f64, _>("price"), 0.0);
    assert!(row.get::<bool, _>("free"));
    assert_eq!(row.get::<String, _>("c"), "2026-11-01 00:00:00.123456+00");
    assert_eq!(
        row.get::<String, _>("u"),
        "2026-10-01 00:00:00+00",
        "naive time is UTC"
    );

    let row = sqlx::query(
        "SELECT application_id, duration_seconds, total_bytes, domains, captured_at::text AS c
         FROM network_metrics WHERE analysis_id = '00000000-0000-4000-8000-000000000003'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(row.get::<i64, _>("application_id"), ids[3]);
    assert_eq!(row.get::<f64, _>("duration_seconds"), 12.5);
    assert_eq!(row.get::<i64, _>("total_bytes"), 123_456_789);
    assert_eq!(
        row.get::<Vec<String>, _>("domains"),
        vec!["a.example.com", "b.example.org"]
    );
    assert_eq!(row.get::<String, _>("c"), "2026-11-02 12:00:00.123456+00");

    // Replay: reset every group to earliest and run again.
    let snapshot = table_digest(&fx).await;
    for kind in PipelineKind::ALL {
        fx.replay_to_earliest(kind).await;
    }
    let running = fx.start(fx.settings(&PipelineKind::ALL, &[]));
    for kind in PipelineKind::ALL {
        fx.wait_caught_up(kind, Duration::from_secs(600)).await;
    }
    let second = stop(running);
    assert_eq!(table_digest(&fx).await, snapshot, "replay changed no row");
    for kind in PipelineKind::ALL {
        let w = second[&kind].report.write;
        let (end, _) = fx.offsets(kind);
        assert_eq!(
            (w.inserted, w.updated, w.skipped),
            (0, 0, end as u64),
            "{kind} replay"
        );
    }
    fx.cleanup().await;
}

/// Every row of the three tables, hashed, so a replay can be compared to the original.
async fn table_digest(fx: &Fixture) -> Vec<String> {
    let mut out = Vec::new();
    for table in [
        "reviews",
        "app_stats",
        "network_metrics",
        "dead_letter_events",
    ] {
        let sql = format!(
            "SELECT count(*)::text || ':' || coalesce(md5(string_agg(t::text, ',' ORDER BY t.id)), '') FROM {table} t"
        );
        out.push(fx.count_text(&sql).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_keep_the_newest_version_first_seen_and_sentiment() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let apps = app_names(&fx.prefix, 1);
    fx.schema.register_apps(&apps).await;
    let app = &apps[0];
    let key = app.clone();

    // Newer first, then older: the newer values stay.
    fx.produce_json(
        PipelineKind::Reviews,
        &[(key.clone(), review(1, app, "2026-11-05T00:00:00Z", 50))],
    )
    .await;
    let running = fx.start(fx.settings(&[PipelineKind::Reviews], &[]));
    fx.wait_caught_up(PipelineKind::Reviews, Duration::from_secs(60))
        .await;
    let mut conn = fx.conn().await;
    let first_seen: String = sqlx::query_scalar("SELECT first_seen_at::text FROM reviews")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    sqlx::query("UPDATE reviews SET sentiment = 'positive'")
        .execute(&mut conn)
        .await
        .unwrap();

    fx.produce_json(
        PipelineKind::Reviews,
        &[(key.clone(), review(1, app, "2026-11-04T00:00:00Z", 10))],
    )
    .await;
    fx.wait_caught_up(PipelineKind::Reviews, Duration::from_secs(60))
        .await;
    let thumbs: i32 = sqlx::query_scalar("SELECT thumbs_up_count FROM reviews")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(thumbs, 50, "an older message never overwrites a newer row");

    // A newer crawl updates; first_seen_at and sentiment survive.
    tokio::time::sleep(Duration::from_millis(20)).await;
    fx.produce_json(
        PipelineKind::Reviews,
        &[(key.clone(), review(1, app, "2026-11-06T00:00:00Z", 70))],
    )
    .await;
    fx.wait_caught_up(PipelineKind::Reviews, Duration::from_secs(60))
        .await;
    let totals = stop(running);
    let row =
        sqlx::query("SELECT thumbs_up_count, first_seen_at::text AS f, sentiment FROM reviews")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(row.get::<i32, _>("thumbs_up_count"), 70);
    assert_eq!(
        row.get::<String, _>("f"),
        first_seen,
        "first_seen_at never changes"
    );
    assert_eq!(
        row.get::<Option<String>, _>("sentiment").as_deref(),
        Some("positive")
    );
    let w = totals[&PipelineKind::Reviews].report.write;
    assert_eq!((w.inserted, w.updated, w.skipped), (1, 1, 1));
    fx.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_review_twice_in_one_batch_keeps_the_newer() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let apps = app_names(&fx.prefix, 1);
    fx.schema.register_apps(&apps).await;
    let app = &apps[0];
    // Same key → same partition → one batch. Newer first, then older, then another review.
    fx.produce_json(
        PipelineKind::Reviews,
        &[
            (app.clone(), review(1, app, "2026-11-05T00:00:00Z", 50)),
            (app.clone(), review(1, app, "2026-11-04T00:00:00Z", 10)),
            (app.clone(), review(2, app, "2026-11-04T00:00:00Z", 1)),
        ],
    )
    .await;
    let running = fx.start(fx.settings(&[PipelineKind::Reviews], &[]));
    fx.wait_caught_up(PipelineKind::Reviews, Duration::from_secs(60))
        .await;
    let totals = stop(running);
    let report = totals[&PipelineKind::Reviews].report;
    assert_eq!(
        totals[&PipelineKind::Reviews].batches,
        1,
        "all three records in one batch"
    );
    assert_eq!((report.write.inserted, report.write.skipped), (2, 1));
    assert_eq!(
        fx.count("SELECT count(*) FROM dead_letter_events").await,
        0,
        "no SQLSTATE 21000"
    );
    let thumbs = fx
        .count("SELECT thumbs_up_count::bigint FROM reviews WHERE review_id = 'gp:review-1'")
        .await;
    assert_eq!(thumbs, 50);
    fx.cleanup().await;
}

/// `DO NOTHING` tables keep the first delivery, in one batch as across batches (issue 10,
/// item 3): a re-sent snapshot with different values never replaces the first one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_snapshot_twice_in_one_batch_keeps_the_first() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let apps = app_names(&fx.prefix, 1);
    fx.schema.register_apps(&apps).await;
    let app = &apps[0];
    let crawled_at = "2026-11-01T10:00:00Z";
    let mut first = app_stats(app, crawled_at);
    first["ratings"] = json!(111);
    let mut resent = app_stats(app, crawled_at);
    resent["ratings"] = json!(222);
    let analysis_id = uuid::Uuid::new_v4().to_string();
    let mut first_metrics = network_metrics(&analysis_id, app);
    first_metrics["packet_count"] = json!(111);
    let mut resent_metrics = network_metrics(&analysis_id, app);
    resent_metrics["packet_count"] = json!(222);
    // Same key → same partition → one batch each.
    fx.produce_json(
        PipelineKind::AppStats,
        &[(app.clone(), first), (app.clone(), resent)],
    )
    .await;
    fx.produce_json(
        PipelineKind::NetworkMetrics,
        &[(app.clone(), first_metrics), (app.clone(), resent_metrics)],
    )
    .await;
    let kinds = [PipelineKind::AppStats, PipelineKind::NetworkMetrics];
    let running = fx.start(fx.settings(&kinds, &[]));
    for kind in kinds {
        fx.wait_caught_up(kind, Duration::from_secs(60)).await;
    }
    let totals = stop(running);
    for kind in kinds {
        let t = &totals[&kind];
        assert_eq!(t.batches, 1, "{kind}: both records in one batch");
        assert_eq!(
            (t.report.write.inserted, t.report.write.skipped),
            (1, 1),
            "{kind}: {:?}",
            t.report
        );
    }
    assert_eq!(
        fx.count("SELECT ratings FROM app_stats").await,
        111,
        "app_stats: the first delivery stays"
    );
    assert_eq!(
        fx.count("SELECT packet_count FROM network_metrics").await,
        111,
        "network_metrics: the first delivery stays"
    );
    fx.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_package_is_dead_lettered_and_seen_at_once_after_registration() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let package = format!("com.{}.late", fx.prefix.replace('-', "_"));
    let id = format!("{package}-1");
    fx.produce_json(
        PipelineKind::NetworkMetrics,
        &[(
            id.clone(),
            network_metrics("11111111-1111-4111-8111-111111111111", &package),
        )],
    )
    .await;
    // A long cache TTL: only the absence of negative caching lets the second message in.
    let running = fx.start(fx.settings(
        &[PipelineKind::NetworkMetrics],
        &[("STORAGE_APP_CACHE_TTL_SECONDS", "3600")],
    ));
    fx.wait_caught_up(PipelineKind::NetworkMetrics, Duration::from_secs(60))
        .await;
    assert_eq!(fx.count("SELECT count(*) FROM network_metrics").await, 0);
    let mut conn = fx.conn().await;
    let (kind, reason): (String, String) =
        sqlx::query_as("SELECT error_kind, reason FROM dead_letter_events")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(kind, "unknown_application");
    assert!(
        reason.contains("package_name") && reason.contains(&package),
        "{reason}"
    );

    fx.schema
        .register_apps(std::slice::from_ref(&package))
        .await;
    fx.produce_json(
        PipelineKind::NetworkMetrics,
        &[(
            id,
            network_metrics("22222222-2222-4222-8222-222222222222", &package),
        )],
    )
    .await;
    fx.wait_caught_up(PipelineKind::NetworkMetrics, Duration::from_secs(60))
        .await;
    stop(running);
    assert_eq!(fx.count("SELECT count(*) FROM network_metrics").await, 1);
    assert_eq!(fx.count("SELECT count(*) FROM dead_letter_events").await, 1);
    let _ = json!(null);
    fx.cleanup().await;
}
