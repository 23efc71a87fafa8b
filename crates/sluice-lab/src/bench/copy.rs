//! PostgreSQL binary `COPY` of review rows: the ingest limit (L) the pipeline is compared to.

use super::rows::Resolved;
use chrono::{DateTime, TimeZone, Utc};
use sqlx::PgConnection;

/// The columns written, in order.
pub const COLUMNS: &str = "review_id, application_id, user_name, score, content, \
    thumbs_up_count, app_version, reviewed_at, reply_content, replied_at, last_synced_at";

fn text(out: &mut Vec<u8>, value: Option<&str>) {
    match value {
        Some(v) => {
            out.extend_from_slice(&(v.len() as i32).to_be_bytes());
            out.extend_from_slice(v.as_bytes());
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

fn fixed(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn timestamp(out: &mut Vec<u8>, value: Option<DateTime<Utc>>) {
    // Binary timestamptz: microseconds since 2000-01-01 00:00:00 UTC.
    let epoch = Utc
        .with_ymd_and_hms(2000, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    match value {
        Some(t) => fixed(
            out,
            &(t - epoch).num_microseconds().unwrap_or(0).to_be_bytes(),
        ),
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

/// Encodes rows in PostgreSQL's binary COPY format.
pub fn encode(rows: &[Resolved]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows.len() * 512);
    out.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
    out.extend_from_slice(&0i32.to_be_bytes()); // flags
    out.extend_from_slice(&0i32.to_be_bytes()); // header extension
    for row in rows {
        let r = &row.message;
        out.extend_from_slice(&11i16.to_be_bytes());
        text(&mut out, Some(&r.review_id));
        fixed(&mut out, &row.application_id.to_be_bytes());
        text(&mut out, r.user_name.as_deref());
        fixed(&mut out, &r.score.to_be_bytes());
        text(&mut out, r.content.as_deref());
        fixed(&mut out, &r.thumbs_up_count.to_be_bytes());
        text(&mut out, r.app_version.as_deref());
        timestamp(&mut out, Some(r.at));
        text(&mut out, r.reply_content.as_deref());
        timestamp(&mut out, r.replied_at);
        timestamp(&mut out, Some(r.last_synced_at));
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

/// Copies the rows into `table` with one binary COPY.
pub async fn copy_rows(
    conn: &mut PgConnection,
    table: &str,
    rows: &[Resolved],
) -> Result<u64, sqlx::Error> {
    let data = encode(rows);
    let mut copy = conn
        .copy_in_raw(&format!(
            "COPY {table} ({COLUMNS}) FROM STDIN (FORMAT binary)"
        ))
        .await?;
    for chunk in data.chunks(1 << 20) {
        copy.send(chunk).await?;
    }
    copy.finish().await
}
