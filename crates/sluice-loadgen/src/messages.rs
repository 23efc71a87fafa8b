//! The seed topics' messages as the generators produce them: plain `Serialize` structs, the
//! producer's side of the seed mappings (`deploy/sinks/*.toml`), which decode and check them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One `app-stats` message: an app's store listing as one crawl saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppStats {
    /// The app's package name (1–255 characters); resolved to `application_id`.
    pub package_name: String,
    /// When the crawler read the listing; with the app, the natural key of the row.
    pub crawled_at: DateTime<Utc>,
    /// The listing's title (at most 255 characters).
    pub title: Option<String>,
    /// The average rating, 0–5.
    pub score: Option<f64>,
    /// How many ratings the app has.
    pub ratings: Option<i64>,
    /// How many written reviews the app has.
    pub reviews_count: Option<i64>,
    /// The lower bound of the store's install bucket.
    pub installs_min: Option<i64>,
    /// The exact install count, when the store gives it.
    pub installs_real: Option<i64>,
    /// Ratings per star, one to five stars: exactly 5 counts.
    pub histogram: Option<Vec<i64>>,
    /// The price, in the store's currency (finite, at least 0).
    pub price: Option<f64>,
    /// Whether the app is free.
    pub free: Option<bool>,
    /// The app's version string (at most 64 characters).
    pub version: Option<String>,
    /// When the app was last updated in the store.
    pub updated_at: Option<DateTime<Utc>>,
}

/// One `reviews` message: a store review as the crawler last saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// The store's id of the review (1–255 characters); the natural key of the row.
    pub review_id: String,
    /// The reviewed app's package name (1–255 characters); resolved to `application_id`.
    pub package_name: String,
    /// The reviewer's display name (at most 255 characters).
    pub user_name: Option<String>,
    /// The star rating, 1–5.
    pub score: i16,
    /// The review text.
    pub content: Option<String>,
    /// How many users found the review helpful (0 … INTEGER max).
    pub thumbs_up_count: i32,
    /// The app version the review was written for (at most 64 characters).
    pub app_version: Option<String>,
    /// When the review was written (the `reviewed_at` column).
    pub at: DateTime<Utc>,
    /// The developer's reply.
    pub reply_content: Option<String>,
    /// When the developer replied.
    pub replied_at: Option<DateTime<Utc>>,
    /// When the crawler read the review; the monotonic guard compares it (docs/ARCHITECTURE.md#tables).
    pub last_synced_at: DateTime<Utc>,
}

/// One `network-metrics` message: one analysed capture of an app's traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkMetrics {
    /// The analysis run's id; the natural key of the row (a re-run gets a new one).
    pub analysis_id: Uuid,
    /// The captured app's package name (1–255 characters); resolved to `application_id`.
    pub package_name: String,
    /// When the capture was taken.
    pub captured_at: DateTime<Utc>,
    /// How long the capture ran, in seconds (finite, at least 0).
    pub duration_seconds: f64,
    /// Packets captured.
    pub packet_count: i64,
    /// Bytes captured, both directions.
    pub total_bytes: i64,
    /// Bytes the app sent.
    pub bytes_sent: Option<i64>,
    /// Bytes the app received.
    pub bytes_received: Option<i64>,
    /// DNS queries seen.
    pub dns_queries: Option<i32>,
    /// TLS handshakes seen.
    pub tls_handshakes: Option<i32>,
    /// Plain-text HTTP requests seen.
    pub plaintext_http_requests: Option<i32>,
    /// Domains contacted (at most 10,000, each 1–253 characters).
    pub domains: Option<Vec<String>>,
}
