//! The `app-stats` topic: one message per app per crawl (docs/ARCHITECTURE.md#messages),
//! written to `app_stats`. Natural key (application_id, crawled_at); the first delivery wins,
//! in a batch as across batches (the table is `DO NOTHING`).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Column, PipelineKind, Topic, TopicSpec, column};
use crate::dedupe::{Deduped, dedupe_by_key, earlier_wins};
use crate::messages::DecodeError;
use crate::messages::fields::{Fields, parse_object};
use crate::resolved::Resolved;

/// One crawl of one app's store listing (topic `app-stats`).
#[derive(Debug, Clone, PartialEq, Serialize)]
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

impl AppStats {
    /// The package name of the app this message is about.
    pub fn package_name(&self) -> &str {
        &self.package_name
    }
}

/// Decodes one `app-stats` record value (`None` is a tombstone) into a storable [`AppStats`].
pub fn decode_app_stats(payload: Option<&[u8]>) -> Result<AppStats, DecodeError> {
    let object = parse_object(payload)?;
    let fields = Fields::new(&object);
    // Fields in the documented order, so the first broken rule is the one reported.
    Ok(AppStats {
        package_name: fields.required_str("package_name", 1, 255)?,
        crawled_at: fields.required_timestamp("crawled_at")?,
        title: fields.optional_str("title", 255)?,
        score: fields.optional_number("score", 0.0, Some(5.0))?,
        ratings: fields.optional_int("ratings", 0, i64::MAX)?,
        reviews_count: fields.optional_int("reviews_count", 0, i64::MAX)?,
        installs_min: fields.optional_int("installs_min", 0, i64::MAX)?,
        installs_real: fields.optional_int("installs_real", 0, i64::MAX)?,
        histogram: fields.optional_int_array("histogram", 5, 0, i64::MAX)?,
        price: fields.optional_number("price", 0.0, None)?,
        free: fields.optional_bool("free")?,
        version: fields.optional_str("version", 64)?,
        updated_at: fields.optional_timestamp("updated_at")?,
    })
}

/// The `app-stats` pipeline.
#[derive(Debug)]
pub struct AppStatsTopic;

impl Topic for AppStatsTopic {
    type Message = AppStats;
    const KIND: PipelineKind = PipelineKind::AppStats;
    const SPEC: TopicSpec = TopicSpec {
        name: "app-stats",
        table: "app_stats",
        env_suffix: "APP_STATS",
        default_batch_size: 200,
    };
    const UPSERT_SQL: &'static str = include_str!("app_stats.sql");

    fn decode(payload: Option<&[u8]>) -> Result<AppStats, DecodeError> {
        decode_app_stats(payload)
    }
    fn package_name(message: &AppStats) -> &str {
        &message.package_name
    }
    fn dedupe(rows: Vec<Resolved<AppStats>>) -> Deduped<Resolved<AppStats>> {
        dedupe_by_key(
            rows,
            |r| (r.application_id, r.message.crawled_at),
            earlier_wins,
        )
    }
    fn columns(rows: &[Resolved<AppStats>]) -> Vec<Column<'_>> {
        vec![
            Column::BigInt(column(rows, |r| r.application_id)),
            Column::Timestamp(column(rows, |r| r.message.crawled_at)),
            Column::OptText(column(rows, |r| r.message.title.as_deref())),
            Column::OptDouble(column(rows, |r| r.message.score)),
            Column::OptBigInt(column(rows, |r| r.message.ratings)),
            Column::OptBigInt(column(rows, |r| r.message.reviews_count)),
            Column::OptBigInt(column(rows, |r| r.message.installs_min)),
            Column::OptBigInt(column(rows, |r| r.message.installs_real)),
            Column::OptJson(column(rows, |r| {
                r.message
                    .histogram
                    .as_ref()
                    .map(|h| serde_json::Value::from(h.clone()))
            })),
            Column::OptDouble(column(rows, |r| r.message.price)),
            Column::OptBool(column(rows, |r| r.message.free)),
            Column::OptText(column(rows, |r| r.message.version.as_deref())),
            Column::OptTimestamp(column(rows, |r| r.message.updated_at)),
        ]
    }
}
