//! A declared sink's lookup on the real PostgreSQL: its TTL cache keeps what it finds and
//! never what it misses. (The seed mappings against the built-ins, and a fourth topic from a
//! mapping alone, run through the storage consumer's batch path: sluice-storage tests/sinks.rs.)
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::time::Duration;

use sluice_postgres::lookup::{LookupResolver, LookupValue};
use sluice_sinks::Cell;
use sluice_testkit::TestSchema;

const APPS: &str = "apps_registry_application";
const TTL: Duration = Duration::from_secs(300);

#[tokio::test]
async fn a_lookup_caches_what_it_finds_and_never_what_it_misses() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    schema.register_apps(&["com.a".into()]).await;
    let lookup = sluice_sinks::Lookup {
        field: sluice_sinks::FieldPath::parse("package_name").unwrap(),
        table: APPS.into(),
        key_column: "package_name".into(),
        value_column: "id".into(),
        unknown_kind: "unknown_application".into(),
    };
    let resolver = LookupResolver::new(&lookup, Some("text"), LookupValue::Int, TTL);
    let (found, stats) = resolver
        .resolve(&mut conn, ["com.a", "com.b", "com.a"])
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found.get("com.a"), Some(&Cell::Int(1)));
    assert_eq!((stats.cache_hits, stats.queried, stats.found), (0, 2, 1));
    // Registered a moment later: found at once (no negative caching); com.a from the cache.
    schema.register_apps(&["com.b".into()]).await;
    let (found, stats) = resolver
        .resolve(&mut conn, ["com.a", "com.b"])
        .await
        .unwrap();
    assert_eq!(found.get("com.b"), Some(&Cell::Int(2)));
    assert_eq!((stats.cache_hits, stats.queried, stats.found), (1, 1, 1));
    drop(conn);
    schema.drop_schema().await;
}
