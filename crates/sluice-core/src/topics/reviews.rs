//! The `reviews` topic: one message per review per crawl (docs/ARCHITECTURE.md#messages),
//! upserted into `reviews`. Natural key review_id; the newest `last_synced_at` wins (ties: the
//! later record), the same rule as the monotonic guard of the upsert.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Column, PipelineKind, Topic, TopicSpec, column};
use crate::dedupe::{Deduped, dedupe_by_key};
use crate::messages::DecodeError;
use crate::messages::fields::{Fields, parse_object};
use crate::resolved::Resolved;

/// One store review as the crawler last saw it (topic `reviews`).
#[derive(Debug, Clone, PartialEq, Serialize)]
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

impl Review {
    /// The package name of the app this review is about.
    pub fn package_name(&self) -> &str {
        &self.package_name
    }
}

/// Decodes one `reviews` record value (`None` is a tombstone) into a storable [`Review`].
pub fn decode_review(payload: Option<&[u8]>) -> Result<Review, DecodeError> {
    let object = parse_object(payload)?;
    let fields = Fields::new(&object);
    // Fields in the documented order, so the first broken rule is the one reported.
    Ok(Review {
        review_id: fields.required_str("review_id", 1, 255)?,
        package_name: fields.required_str("package_name", 1, 255)?,
        user_name: fields.optional_str("user_name", 255)?,
        score: fields.required_int::<i16>("score", 1, 5)?,
        content: fields.optional_text("content")?,
        thumbs_up_count: fields.required_int("thumbs_up_count", 0, i32::MAX)?,
        app_version: fields.optional_str("app_version", 64)?,
        at: fields.required_timestamp("at")?,
        reply_content: fields.optional_text("reply_content")?,
        replied_at: fields.optional_timestamp("replied_at")?,
        last_synced_at: fields.required_timestamp("last_synced_at")?,
    })
}

/// The `reviews` pipeline.
#[derive(Debug)]
pub struct ReviewsTopic;

impl Topic for ReviewsTopic {
    type Message = Review;
    const KIND: PipelineKind = PipelineKind::Reviews;
    const SPEC: TopicSpec = TopicSpec {
        name: "reviews",
        table: "reviews",
        env_suffix: "REVIEWS",
        default_batch_size: 500,
    };
    const UPSERT_SQL: &'static str = include_str!("reviews.sql");

    fn decode(payload: Option<&[u8]>) -> Result<Review, DecodeError> {
        decode_review(payload)
    }
    fn package_name(message: &Review) -> &str {
        &message.package_name
    }
    fn dedupe(rows: Vec<Resolved<Review>>) -> Deduped<Resolved<Review>> {
        dedupe_by_key(
            rows,
            |r| r.message.review_id.clone(),
            |current, candidate| candidate.message.last_synced_at >= current.message.last_synced_at,
        )
    }
    fn columns(rows: &[Resolved<Review>]) -> Vec<Column<'_>> {
        vec![
            Column::Text(column(rows, |r| r.message.review_id.as_str())),
            Column::BigInt(column(rows, |r| r.application_id)),
            Column::OptText(column(rows, |r| r.message.user_name.as_deref())),
            Column::SmallInt(column(rows, |r| r.message.score)),
            Column::OptText(column(rows, |r| r.message.content.as_deref())),
            Column::Int(column(rows, |r| r.message.thumbs_up_count)),
            Column::OptText(column(rows, |r| r.message.app_version.as_deref())),
            Column::Timestamp(column(rows, |r| r.message.at)),
            Column::OptText(column(rows, |r| r.message.reply_content.as_deref())),
            Column::OptTimestamp(column(rows, |r| r.message.replied_at)),
            Column::Timestamp(column(rows, |r| r.message.last_synced_at)),
        ]
    }
}
