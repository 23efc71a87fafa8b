//! The seed tables as `migrations/0001`–`0003` and the applications fixture create them, the
//! shapes the seed mappings are planned against here (`crates/sluice-postgres/tests/sinks.rs`
//! plans them on the live catalog).

use std::collections::HashMap;

use crate::{ColumnShape, SqlType, TableShape};

fn column(name: &str, sql_type: SqlType, not_null: bool) -> ColumnShape {
    ColumnShape {
        name: name.into(),
        sql_type,
        not_null,
        has_default: false,
        writable: true,
        time_precision: None,
    }
}

fn defaulted(name: &str, sql_type: SqlType) -> ColumnShape {
    ColumnShape {
        has_default: true,
        ..column(name, sql_type, true)
    }
}

/// The seed tables as `migrations/0001`–`0003` and the applications fixture create them.
pub(super) fn tables() -> HashMap<String, TableShape> {
    use SqlType::{BigInt, Boolean, Double, Integer, SmallInt, Text, TimestampTz, Uuid, Varchar};
    let table = |name: &str, columns: Vec<ColumnShape>, key: &[&str]| {
        let key = key.iter().map(|k| (*k).to_owned()).collect();
        let shape = TableShape {
            name: name.into(),
            columns,
            unique_keys: vec![vec!["id".into()], key],
            nulls_not_distinct_keys: Vec::new(),
            primary_key: None,
            partitioned: false,
        };
        (name.to_owned(), shape)
    };
    HashMap::from([
        table(
            "apps_registry_application",
            vec![
                defaulted("id", BigInt),
                column("package_name", Varchar(Some(255)), true),
                defaulted("is_active", Boolean),
            ],
            &["package_name"],
        ),
        table(
            "reviews",
            vec![
                defaulted("id", BigInt),
                column("review_id", Varchar(Some(255)), true),
                column("application_id", BigInt, true),
                column("user_name", Varchar(Some(255)), false),
                column("score", SmallInt, true),
                column("content", Text, false),
                column("thumbs_up_count", Integer, true),
                column("app_version", Varchar(Some(64)), false),
                column("reviewed_at", TimestampTz, true),
                column("reply_content", Text, false),
                column("replied_at", TimestampTz, false),
                column("last_synced_at", TimestampTz, true),
                defaulted("first_seen_at", TimestampTz),
                column("sentiment", Varchar(Some(32)), false),
            ],
            &["review_id"],
        ),
        table(
            "app_stats",
            vec![
                defaulted("id", BigInt),
                column("application_id", BigInt, true),
                column("crawled_at", TimestampTz, true),
                column("title", Varchar(Some(255)), false),
                column("score", Double, false),
                column("ratings", BigInt, false),
                column("reviews_count", BigInt, false),
                column("installs_min", BigInt, false),
                column("installs_real", BigInt, false),
                column("histogram", SqlType::Array(Box::new(BigInt)), false),
                column("price", Double, false),
                column("free", Boolean, false),
                column("version", Varchar(Some(64)), false),
                column("updated_at", TimestampTz, false),
                defaulted("inserted_at", TimestampTz),
            ],
            &["application_id", "crawled_at"],
        ),
        table(
            "network_metrics",
            vec![
                defaulted("id", BigInt),
                column("analysis_id", Uuid, true),
                column("application_id", BigInt, true),
                column("captured_at", TimestampTz, true),
                column("duration_seconds", Double, true),
                column("packet_count", BigInt, true),
                column("total_bytes", BigInt, true),
                column("bytes_sent", BigInt, false),
                column("bytes_received", BigInt, false),
                column("dns_queries", Integer, false),
                column("tls_handshakes", Integer, false),
                column("plaintext_http_requests", Integer, false),
                column("domains", SqlType::Array(Box::new(Text)), false),
                defaulted("inserted_at", TimestampTz),
            ],
            &["analysis_id"],
        ),
    ])
}
