use super::*;
use crate::model::{Column, ReplicaIdentity};

/// sluice's outbox table as pgoutput describes it (with columns the router does not read).
fn outbox(without: Option<&str>) -> Relation {
    let names = [
        "id",
        "seq",
        "aggregate_type",
        "aggregate_id",
        "event_type",
        "topic",
        "partition_key",
        "partition",
        "payload",
        "headers",
        "status",
    ];
    Relation {
        oid: 7,
        schema: "public".into(),
        table: "outbox_events".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: names
            .iter()
            .filter(|n| Some(**n) != without)
            .map(|n| Column {
                name: (*n).to_owned(),
                type_oid: 25,
                type_modifier: -1,
                is_key: *n == "id",
            })
            .collect(),
    }
}

fn row(status: &str, partition: Option<&str>) -> Tuple {
    let text = |t: &str| Cell::Text(t.to_owned());
    vec![
        text("0b9e5e0c-8d4f-4a43-9f0e-2f3c3f1f6a01"),
        text("12"),
        text("user"),
        text("42"),
        text("user.created"),
        text("users"),
        text("user-42"),
        partition.map_or(Cell::Null, text),
        text(r#"{"a": 1, "b": "x\ny"}"#),
        text("{}"),
        text(status),
    ]
}

#[test]
fn a_cdc_row_is_the_record_the_event_router_writes() {
    let shape = OutboxShape::new(&outbox(None)).unwrap();
    let record = shape.record(&row("CDC", Some("2"))).unwrap().unwrap();
    assert_eq!(record.topic, "users");
    assert_eq!(record.key.as_deref(), Some(&b"user-42"[..]));
    assert_eq!(
        record.value.as_deref(),
        Some(&br#"{"a": 1, "b": "x\ny"}"#[..])
    );
    assert_eq!(record.partition, Some(2));
    assert_eq!(
        record.headers,
        [
            (
                "sluice-event-id",
                "0b9e5e0c-8d4f-4a43-9f0e-2f3c3f1f6a01".to_owned()
            ),
            ("sluice-event-type", "user.created".to_owned()),
            ("sluice-aggregate-type", "user".to_owned()),
            ("sluice-aggregate-id", "42".to_owned()),
        ]
    );
    let hashed = shape.record(&row("CDC", None)).unwrap().unwrap();
    assert_eq!(hashed.partition, None, "no partition: the key's hash");
}

#[test]
fn a_row_for_the_dispatcher_is_not_relayed() {
    let shape = OutboxShape::new(&outbox(None)).unwrap();
    for status in ["PENDING", "PREQUEUED", "PUBLISHED"] {
        assert_eq!(shape.record(&row(status, None)).unwrap(), None, "{status}");
    }
}

#[test]
fn a_table_without_the_outbox_columns_is_refused_by_name() {
    let error = OutboxShape::new(&outbox(Some("partition_key"))).unwrap_err();
    assert_eq!(
        error,
        RouteError::NotAnOutbox {
            table: "public.outbox_events".into(),
            column: "partition_key"
        }
    );
    assert!(
        error.to_string().contains("CAPTURE_OUTBOX_TABLES"),
        "{error}"
    );
}

#[test]
fn a_bad_value_names_its_column() {
    let shape = OutboxShape::new(&outbox(None)).unwrap();
    let error = shape.record(&row("CDC", Some("two"))).unwrap_err();
    assert!(
        matches!(
            &error,
            RouteError::Value {
                column: "partition",
                ..
            }
        ),
        "{error}"
    );
    let mut unsent = row("CDC", None);
    unsent[8] = Cell::UnchangedToast;
    let error = shape.record(&unsent).unwrap_err();
    assert!(
        matches!(
            &error,
            RouteError::Value {
                column: "payload",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_message_goes_to_the_topic_its_prefix_names() {
    let record = message_record("outbox:orders/customer-7", "outbox:", b"{\"n\":1}")
        .unwrap()
        .unwrap();
    assert_eq!(record.topic, "orders");
    assert_eq!(record.key.as_deref(), Some(&b"customer-7"[..]));
    assert_eq!(record.value.as_deref(), Some(&b"{\"n\":1}"[..]));
    assert!(record.headers.is_empty());
    let keyless = message_record("outbox:orders", "outbox:", b"x")
        .unwrap()
        .unwrap();
    assert_eq!((keyless.topic.as_str(), keyless.key), ("orders", None));
    let with_slash = message_record("outbox:orders/a/b", "outbox:", b"x")
        .unwrap()
        .unwrap();
    assert_eq!(
        with_slash.key.as_deref(),
        Some(&b"a/b"[..]),
        "the key after the first '/'"
    );
}

#[test]
fn another_prefix_is_not_ours_and_a_bad_topic_is_an_error() {
    assert_eq!(message_record("wal2json:x", "outbox:", b"x").unwrap(), None);
    for prefix in ["outbox:", "outbox:/key", "outbox:has space", "outbox:.."] {
        let error = message_record(prefix, "outbox:", b"x").unwrap_err();
        assert!(
            matches!(error, RouteError::MessageTopic { .. }),
            "{prefix}: {error}"
        );
    }
}

#[test]
fn a_row_whose_topic_no_broker_takes_names_it() {
    let shape = OutboxShape::new(&outbox(None)).unwrap();
    let mut bad = row("CDC", None);
    bad[5] = Cell::Text("has space".into());
    let error = shape.record(&bad).unwrap_err();
    assert!(
        matches!(
            &error,
            RouteError::Value {
                column: "topic",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("has space"), "{error}");
}
