//! Dead-letter identity on the real PostgreSQL (issue 10, item 3): a redelivered record's
//! dead letter is inserted once; a different record at the same coordinates is kept.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use chrono::{DateTime, Utc};
use sluice_core::{DeadLetter, DeadLetterKind, RecordCoords};
use sluice_postgres::repo::insert_dead_letters;
use sqlx::Connection;

fn letter(timestamp_ms: Option<i64>, key: Option<&[u8]>, payload: Option<&[u8]>) -> DeadLetter {
    let coords = RecordCoords {
        topic: "reviews".into(),
        partition: 0,
        offset: 0,
    };
    let timestamp = timestamp_ms.map(|ms| DateTime::<Utc>::from_timestamp_millis(ms).unwrap());
    DeadLetter::new(
        coords,
        key,
        payload,
        timestamp,
        DeadLetterKind::DecodeError,
        "bad",
    )
}

#[tokio::test]
async fn redelivery_is_a_no_op_and_a_new_record_at_the_same_coordinates_is_kept() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, "apps_registry_application")
        .await
        .unwrap();
    let mut insert = async |letters: &[DeadLetter]| {
        let mut tx = conn.begin().await.unwrap();
        let n = insert_dead_letters(&mut tx, "g", letters).await.unwrap();
        tx.commit().await.unwrap();
        n
    };
    let first = letter(Some(1_700_000_000_000), Some(b"k"), Some(b"{oops"));
    assert_eq!(insert(std::slice::from_ref(&first)).await, 1);
    assert_eq!(
        insert(&[first.clone(), first]).await,
        0,
        "redelivered: no-op"
    );
    // The topic was re-created: a new record at the same coordinates, produced later.
    let later = letter(Some(1_700_000_100_000), Some(b"k"), Some(b"{oops"));
    assert_eq!(
        insert(std::slice::from_ref(&later)).await,
        1,
        "a new record"
    );
    // A producer that sets the same timestamp explicitly, with other bytes.
    assert_eq!(
        insert(&[letter(Some(1_700_000_000_000), Some(b"k"), Some(b"{other"))]).await,
        1
    );
    assert_eq!(
        insert(&[letter(Some(1_700_000_000_000), Some(b"k2"), Some(b"{oops"))]).await,
        1,
        "another key"
    );
    // Key and payload cannot run into each other: "k" + "{oops" is not "k{" + "oops".
    assert_eq!(
        insert(&[letter(Some(1_700_000_000_000), Some(b"k{"), Some(b"oops"))]).await,
        1
    );
    // No timestamp, tombstones, no key: each still has exactly one identity.
    let without = [
        letter(None, None, None),
        letter(None, None, Some(b"")),
        letter(None, Some(b""), None),
    ];
    assert_eq!(insert(&without).await, 3);
    assert_eq!(
        insert(&without).await,
        0,
        "redelivered without a timestamp: no-op"
    );
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM dead_letter_events")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(total, 8);
    schema.drop_schema().await;
}

/// A letter at `offset` with `headers`.
fn letter_with(offset: i64, headers: &[(&str, Option<&[u8]>)]) -> DeadLetter {
    let mut letter = letter(Some(1_700_000_000_000), Some(b"k"), Some(b"{oops"));
    letter.coords.offset = offset;
    letter.with_headers(
        headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.map(<[u8]>::to_vec)))
            .collect(),
    )
}

#[tokio::test]
async fn each_letter_of_a_batch_keeps_its_own_headers_in_order() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, "apps_registry_application")
        .await
        .unwrap();
    let letters = [
        letter_with(
            0,
            &[("a", Some(b"1")), ("b", None), ("a", Some(b"\xff\x00"))],
        ),
        letter_with(1, &[]),
        letter_with(2, &[("only", Some(b""))]),
        letter_with(3, &[("z", None), ("y", Some(b"2"))]),
    ];
    let mut tx = conn.begin().await.unwrap();
    assert_eq!(
        insert_dead_letters(&mut tx, "g", &letters).await.unwrap(),
        4
    );
    tx.commit().await.unwrap();
    let rows = sluice_postgres::ops::list_dead_letters(
        &mut conn,
        &sluice_postgres::ops::DeadLetterFilter {
            limit: 10,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut stored: Vec<(i64, Vec<sluice_core::dead_letter::RecordHeader>)> = rows
        .iter()
        .map(|r| {
            assert!(r.headers_kept());
            let headers = r
                .headers()
                .map(|(n, v)| (n.to_owned(), v.map(<[u8]>::to_vec)))
                .collect();
            (r.kafka_offset, headers)
        })
        .collect();
    stored.sort();
    let expected: Vec<_> = letters
        .iter()
        .map(|l| (l.coords.offset, l.headers.clone()))
        .collect();
    assert_eq!(stored, expected);
    schema.drop_schema().await;
}

/// Issue 45, item 5: each dead letter keeps the table its record was going to (a sink of
/// many tables), NULL when none was chosen, so an operator finds which table fails.
#[tokio::test]
async fn each_letter_keeps_the_table_its_record_was_going_to() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, "apps_registry_application")
        .await
        .unwrap();
    let orders: std::sync::Arc<str> = "orders".into();
    let payments: std::sync::Arc<str> = "shop.payments".into();
    let letters = [
        letter_with(0, &[]).with_table(&orders),
        letter_with(1, &[]),
        letter_with(2, &[]).with_table(&payments),
        letter_with(3, &[]).with_table(&orders),
    ];
    let mut tx = conn.begin().await.unwrap();
    assert_eq!(
        insert_dead_letters(&mut tx, "g", &letters).await.unwrap(),
        4
    );
    tx.commit().await.unwrap();
    let stored: Vec<(i64, Option<String>)> = sqlx::query_as(
        "SELECT kafka_offset, target_table FROM dead_letter_events ORDER BY kafka_offset",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        stored,
        [
            (0, Some("orders".to_owned())),
            (1, None),
            (2, Some("shop.payments".to_owned())),
            (3, Some("orders".to_owned())),
        ]
    );
    schema.drop_schema().await;
}
