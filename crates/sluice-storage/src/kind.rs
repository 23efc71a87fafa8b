//! What differs between the three topics: decoder, natural key, survivor rule, upsert.

use sluice_core::dedupe::{Deduped, dedupe_by_key, earlier_wins};
use sluice_core::messages::{
    AppStats, DecodeError, NetworkMetrics, Review, decode_app_stats, decode_network_metrics,
    decode_review,
};
use sluice_core::{Bound, PipelineKind, WriteOutcome};
use sluice_postgres::repo;
use sqlx::PgConnection;

/// One storage topic.
pub trait TopicKind: Send + Sync + 'static {
    /// The decoded message.
    type Message: Send + Sync + Clone + std::fmt::Debug;
    /// Which pipeline this is.
    const KIND: PipelineKind;
    /// Decodes one record value.
    fn decode(payload: Option<&[u8]>) -> Result<Self::Message, DecodeError>;
    /// The message's package name.
    fn package_name(message: &Self::Message) -> &str;
    /// Keeps one row per natural key.
    fn dedupe(rows: Vec<Bound<Self::Message>>) -> Deduped<Bound<Self::Message>>;
    /// Writes the rows with one statement.
    fn upsert(
        conn: &mut PgConnection,
        rows: &[Bound<Self::Message>],
    ) -> impl Future<Output = Result<WriteOutcome, sqlx::Error>> + Send;
}

/// `app-stats`: natural key (application_id, crawled_at); the first delivery wins (the
/// table is `DO NOTHING`: a later batch never replaces a stored row either).
#[derive(Debug)]
pub struct AppStatsTopic;

impl TopicKind for AppStatsTopic {
    type Message = AppStats;
    const KIND: PipelineKind = PipelineKind::AppStats;

    fn decode(payload: Option<&[u8]>) -> Result<AppStats, DecodeError> {
        decode_app_stats(payload)
    }
    fn package_name(message: &AppStats) -> &str {
        &message.package_name
    }
    fn dedupe(rows: Vec<Bound<AppStats>>) -> Deduped<Bound<AppStats>> {
        dedupe_by_key(
            rows,
            |r| (r.application_id, r.message.crawled_at),
            earlier_wins,
        )
    }
    async fn upsert(
        conn: &mut PgConnection,
        rows: &[Bound<AppStats>],
    ) -> Result<WriteOutcome, sqlx::Error> {
        repo::upsert_app_stats(conn, rows).await
    }
}

/// `reviews`: natural key review_id; the newest `last_synced_at` wins (ties: later record),
/// the same rule as the monotonic guard in the database.
#[derive(Debug)]
pub struct ReviewsTopic;

impl TopicKind for ReviewsTopic {
    type Message = Review;
    const KIND: PipelineKind = PipelineKind::Reviews;

    fn decode(payload: Option<&[u8]>) -> Result<Review, DecodeError> {
        decode_review(payload)
    }
    fn package_name(message: &Review) -> &str {
        &message.package_name
    }
    fn dedupe(rows: Vec<Bound<Review>>) -> Deduped<Bound<Review>> {
        dedupe_by_key(
            rows,
            |r| r.message.review_id.clone(),
            |current, candidate| candidate.message.last_synced_at >= current.message.last_synced_at,
        )
    }
    async fn upsert(
        conn: &mut PgConnection,
        rows: &[Bound<Review>],
    ) -> Result<WriteOutcome, sqlx::Error> {
        repo::upsert_reviews(conn, rows).await
    }
}

/// `network-metrics`: natural key analysis_id; the first delivery wins (`DO NOTHING`).
#[derive(Debug)]
pub struct NetworkMetricsTopic;

impl TopicKind for NetworkMetricsTopic {
    type Message = NetworkMetrics;
    const KIND: PipelineKind = PipelineKind::NetworkMetrics;

    fn decode(payload: Option<&[u8]>) -> Result<NetworkMetrics, DecodeError> {
        decode_network_metrics(payload)
    }
    fn package_name(message: &NetworkMetrics) -> &str {
        &message.package_name
    }
    fn dedupe(rows: Vec<Bound<NetworkMetrics>>) -> Deduped<Bound<NetworkMetrics>> {
        dedupe_by_key(rows, |r| r.message.analysis_id, earlier_wins)
    }
    async fn upsert(
        conn: &mut PgConnection,
        rows: &[Bound<NetworkMetrics>],
    ) -> Result<WriteOutcome, sqlx::Error> {
        repo::upsert_network_metrics(conn, rows).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound<K: TopicKind>(record: usize, json: serde_json::Value) -> Bound<K::Message> {
        let payload = json.to_string();
        Bound {
            record,
            application_id: 7,
            message: K::decode(Some(payload.as_bytes())).expect("valid message"),
        }
    }

    fn stats(record: usize, ratings: i64) -> Bound<AppStats> {
        bound::<AppStatsTopic>(
            record,
            serde_json::json!({"package_name": "com.a", "crawled_at": "2026-11-01T00:00:00Z",
                               "ratings": ratings}),
        )
    }

    fn review(record: usize, synced: &str, thumbs: i64) -> Bound<Review> {
        bound::<ReviewsTopic>(
            record,
            serde_json::json!({"review_id": "r1", "package_name": "com.a", "score": 3,
                               "thumbs_up_count": thumbs, "at": "2026-11-01T00:00:00Z",
                               "last_synced_at": synced}),
        )
    }

    #[test]
    fn app_stats_keep_the_first_delivery_in_a_batch() {
        let out = AppStatsTopic::dedupe(vec![stats(0, 1), stats(1, 2), stats(2, 3)]);
        assert_eq!(out.rows.len(), 1);
        assert_eq!(out.rows[0].record, 0, "the first delivery wins");
        let runners_up: Vec<usize> = out.superseded[0].iter().map(|r| r.record).collect();
        assert_eq!(runners_up, vec![1, 2], "runners-up in delivery order");
    }

    #[test]
    fn network_metrics_keep_the_first_delivery_in_a_batch() {
        let metrics = |record: usize, packets: i64| {
            bound::<NetworkMetricsTopic>(
                record,
                serde_json::json!({"analysis_id": "7d1b2a5e-7c1f-4a35-9d0b-3f1c2b4a5e6f",
                    "package_name": "com.a", "captured_at": "2026-11-01T00:00:00Z",
                    "duration_seconds": 1.0, "packet_count": packets, "total_bytes": 10}),
            )
        };
        let out = NetworkMetricsTopic::dedupe(vec![metrics(0, 1), metrics(1, 2)]);
        assert_eq!(out.rows.len(), 1);
        assert_eq!(out.rows[0].record, 0, "the first delivery wins");
    }

    #[test]
    fn reviews_keep_the_newest_version_and_ties_go_to_the_later_record() {
        let out = ReviewsTopic::dedupe(vec![
            review(0, "2026-11-03T00:00:00Z", 1),
            review(1, "2026-11-02T00:00:00Z", 2),
            review(2, "2026-11-03T00:00:00Z", 3),
        ]);
        assert_eq!(out.rows.len(), 1);
        assert_eq!(
            out.rows[0].record, 2,
            "newest last_synced_at, tie: the later record"
        );
        let runners_up: Vec<usize> = out.superseded[0].iter().map(|r| r.record).collect();
        assert_eq!(runners_up, vec![0, 1]);
    }
}
