//! The `network-metrics` topic: one message per analysed capture
//! (docs/ARCHITECTURE.md#messages), written to `network_metrics`. Natural key analysis_id; the
//! first delivery wins (`DO NOTHING`).

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{Column, PipelineKind, Topic, TopicSpec, column};
use crate::dedupe::{Deduped, dedupe_by_key, earlier_wins};
use crate::messages::DecodeError;
use crate::messages::fields::{Fields, parse_object};
use crate::resolved::Resolved;

/// Most domains one capture may list.
const MAX_DOMAINS: usize = 10_000;

/// Longest domain name, in characters (the DNS limit).
const MAX_DOMAIN_CHARS: usize = 253;

/// The traffic summary of one analysed network capture (topic `network-metrics`).
#[derive(Debug, Clone, PartialEq, Serialize)]
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

impl NetworkMetrics {
    /// The package name of the app this capture is about.
    pub fn package_name(&self) -> &str {
        &self.package_name
    }
}

/// Decodes one `network-metrics` record value (`None` is a tombstone) into a storable
/// [`NetworkMetrics`].
pub fn decode_network_metrics(payload: Option<&[u8]>) -> Result<NetworkMetrics, DecodeError> {
    let object = parse_object(payload)?;
    let fields = Fields::new(&object);
    // Fields in the documented order, so the first broken rule is the one reported.
    Ok(NetworkMetrics {
        analysis_id: fields.required_uuid("analysis_id")?,
        package_name: fields.required_str("package_name", 1, 255)?,
        captured_at: fields.required_timestamp("captured_at")?,
        duration_seconds: fields.required_number("duration_seconds", 0.0, None)?,
        packet_count: fields.required_int("packet_count", 0, i64::MAX)?,
        total_bytes: fields.required_int("total_bytes", 0, i64::MAX)?,
        bytes_sent: fields.optional_int("bytes_sent", 0, i64::MAX)?,
        bytes_received: fields.optional_int("bytes_received", 0, i64::MAX)?,
        dns_queries: fields.optional_int("dns_queries", 0, i32::MAX)?,
        tls_handshakes: fields.optional_int("tls_handshakes", 0, i32::MAX)?,
        plaintext_http_requests: fields.optional_int("plaintext_http_requests", 0, i32::MAX)?,
        domains: fields.optional_str_array("domains", MAX_DOMAINS, 1, MAX_DOMAIN_CHARS)?,
    })
}

/// The `network-metrics` pipeline.
#[derive(Debug)]
pub struct NetworkMetricsTopic;

impl Topic for NetworkMetricsTopic {
    type Message = NetworkMetrics;
    const KIND: PipelineKind = PipelineKind::NetworkMetrics;
    const SPEC: TopicSpec = TopicSpec {
        name: "network-metrics",
        table: "network_metrics",
        env_suffix: "NETWORK_METRICS",
        default_batch_size: 50,
    };
    const UPSERT_SQL: &'static str = include_str!("network_metrics.sql");

    fn decode(payload: Option<&[u8]>) -> Result<NetworkMetrics, DecodeError> {
        decode_network_metrics(payload)
    }
    fn package_name(message: &NetworkMetrics) -> &str {
        &message.package_name
    }
    fn dedupe(rows: Vec<Resolved<NetworkMetrics>>) -> Deduped<Resolved<NetworkMetrics>> {
        dedupe_by_key(rows, |r| r.message.analysis_id, earlier_wins)
    }
    fn columns(rows: &[Resolved<NetworkMetrics>]) -> Vec<Column<'_>> {
        vec![
            Column::Uuid(column(rows, |r| r.message.analysis_id)),
            Column::BigInt(column(rows, |r| r.application_id)),
            Column::Timestamp(column(rows, |r| r.message.captured_at)),
            Column::Double(column(rows, |r| r.message.duration_seconds)),
            Column::BigInt(column(rows, |r| r.message.packet_count)),
            Column::BigInt(column(rows, |r| r.message.total_bytes)),
            Column::OptBigInt(column(rows, |r| r.message.bytes_sent)),
            Column::OptBigInt(column(rows, |r| r.message.bytes_received)),
            Column::OptInt(column(rows, |r| r.message.dns_queries)),
            Column::OptInt(column(rows, |r| r.message.tls_handshakes)),
            Column::OptInt(column(rows, |r| r.message.plaintext_http_requests)),
            Column::OptJson(column(rows, |r| {
                r.message
                    .domains
                    .as_ref()
                    .map(|d| serde_json::Value::from(d.clone()))
            })),
        ]
    }
}
