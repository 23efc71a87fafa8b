//! What differs between the three topics: decoder, natural key, survivor rule, upsert.

use sluice_core::dedupe::{Deduped, dedupe_by_key, later_wins};
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

/// `app-stats`: natural key (application_id, crawled_at); the later record wins.
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
            later_wins,
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

/// `network-metrics`: natural key analysis_id; the later record wins.
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
        dedupe_by_key(rows, |r| r.message.analysis_id, later_wins)
    }
    async fn upsert(
        conn: &mut PgConnection,
        rows: &[Bound<NetworkMetrics>],
    ) -> Result<WriteOutcome, sqlx::Error> {
        repo::upsert_network_metrics(conn, rows).await
    }
}
