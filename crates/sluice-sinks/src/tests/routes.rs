//! `[[sink.route]]`: the file's form (each route its own table, columns, key and policy; the
//! sink's own settings shared), its errors, and which route a record's field, header or key
//! takes it to — through the sink's format (a change event's row image, the Connect
//! envelope).

use serde_json::json;

use crate::{
    ConflictPolicy, Constant, Format, RouteInput, Sink, SinkDecoder, Unrouted, WhenSource,
    check_sinks, parse_sinks, plan_template,
};

const ROUTED: &str = r#"
[[sink]]
name = "events"
topic = "shop.events"
batch_size = 200
unrouted = "ignore"

[[sink.route]]
when = { field = "type", equals = "order.created" }
table = "orders"
key = ["id"]
[sink.route.columns]
id = { field = "id" }
total = { field = "total" }

[[sink.route]]
when = { header = "event-type", equals = "refund" }
table = "refunds"
columns = "auto"

[[sink.route]]
when = { key = "kind", equals = 3 }
table = "audit"
key = ["id"]
conflict = "insert-ignore"
columns = { id = { field = "id" } }
"#;

fn routed() -> Sink {
    parse_sinks("m.toml", ROUTED)
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

fn error_of(text: &str) -> String {
    match parse_sinks("m.toml", text) {
        Ok(sinks) => check_sinks("m.toml", &sinks)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn each_route_has_its_table_columns_key_and_policy_and_shares_the_rest() {
    let sink = routed();
    assert!(sink.many_tables());
    assert_eq!(sink.unrouted, Unrouted::Ignore);
    let tables: Vec<&str> = sink.routes.iter().map(|r| r.sink.table.as_str()).collect();
    assert_eq!(tables, ["orders", "refunds", "audit"]);
    let [orders, refunds, audit] = &sink.routes[..] else {
        panic!("three routes");
    };
    assert_eq!(
        orders.when.source,
        WhenSource::Field(crate::FieldPath::field("type"))
    );
    assert_eq!(orders.when.equals, Constant::Text("order.created".into()));
    assert_eq!(orders.sink.key, ["id"]);
    assert_eq!(orders.sink.columns.len(), 2);
    assert_eq!(orders.sink.conflict, ConflictPolicy::AlwaysUpdate);
    assert!(refunds.sink.auto_columns && refunds.sink.key.is_empty());
    assert_eq!(refunds.when.source, WhenSource::Header("event-type".into()));
    assert_eq!(audit.sink.conflict, ConflictPolicy::InsertIgnore);
    assert_eq!(audit.when.equals, Constant::Int(3));
    for route in &sink.routes {
        assert_eq!(
            (
                route.sink.name.as_str(),
                route.sink.topics.named(),
                route.sink.batch_size,
                route.sink.routes.len()
            ),
            ("events", &["shop.events".to_owned()][..], 200, 0),
            "a route reads the sink's topics in its batches"
        );
    }
    assert!(check_sinks("m.toml", &[sink]).is_empty());
}

#[test]
fn a_routed_sink_is_refused_what_each_route_sets_and_a_bad_route_is_named() {
    let with = |sink_keys: &str, route: &str| {
        error_of(&format!(
            "[[sink]]\nname = \"e\"\n{sink_keys}\n[[sink.route]]\n{route}\n"
        ))
    };
    let good_route = "when = { field = \"t\", equals = \"a\" }\ntable = \"a\"\nkey = [\"id\"]\ncolumns = { id = { field = \"id\" } }";
    assert!(with("", good_route).is_empty(), "{}", with("", good_route));
    let error = with("table = \"x\"", good_route);
    assert!(
        error.contains("`table` is set by each `[[sink.route]]`"),
        "{error}"
    );
    let error = with("key = [\"id\"]", good_route);
    assert!(error.contains("`key` is set by each"), "{error}");
    let error = with("", &good_route.replace("field = \"t\", ", ""));
    assert!(
        error.contains("route #1: `when`: exactly one of `field`, `header`, `key`"),
        "{error}"
    );
    let error = with("", &good_route.replace("equals = \"a\"", "equals = 1.5"));
    assert!(
        error.contains("`equals` is a string, an integer or a boolean"),
        "{error}"
    );
    let error = with("", &good_route.replace("table = \"a\"", "tabel = \"a\""));
    assert!(
        error.contains("route[1]") && error.contains("tabel"),
        "{error}"
    );
    // A route's own problem, found by the checks: named with its number and table.
    let error = with("", &good_route.replace("key = [\"id\"]\n", ""));
    assert!(
        error.contains("route #1 (table `a`):") && error.contains("key"),
        "{error}"
    );
    let error = error_of(
        "[[sink]]\nname = \"e\"\ntable = \"t\"\nkey = [\"id\"]\nunrouted = \"ignore\"\ncolumns = { id = { field = \"id\" } }\n",
    );
    assert!(
        error.contains("`unrouted` needs `[[sink.route]]` entries"),
        "{error}"
    );
    let error = error_of("[[sink]]\nname = \"e\"\n");
    assert!(error.contains("key `table`: missing"), "{error}");
}

/// The route a record takes: the first whose condition holds.
fn route_of(
    sink: &Sink,
    payload: Option<&str>,
    key: Option<&str>,
    headers: &[(&str, &str)],
) -> Option<usize> {
    let reader = SinkDecoder::new(sink, &plan_template(sink, ""));
    let headers: Vec<(String, Option<Vec<u8>>)> = headers
        .iter()
        .map(|(name, value)| ((*name).to_owned(), Some(value.as_bytes().to_vec())))
        .collect();
    let input = RouteInput {
        image: payload.and_then(|p| reader.row_image(p.as_bytes()).unwrap()),
        key_fields: key.and_then(|k| reader.key_fields(k.as_bytes()).ok()),
        key: key.map(str::as_bytes),
        headers: &headers,
    };
    sink.routes
        .iter()
        .position(|route| route.when.holds(&input))
}

#[test]
fn a_record_takes_the_first_route_its_field_header_or_key_meets() {
    let sink = routed();
    let order = r#"{"type": "order.created", "id": 1, "total": 5}"#;
    assert_eq!(route_of(&sink, Some(order), None, &[]), Some(0));
    // The field first: a header route later in the file does not take it.
    assert_eq!(
        route_of(&sink, Some(order), None, &[("event-type", "refund")]),
        Some(0)
    );
    let other = r#"{"type": "order.deleted", "id": 1}"#;
    assert_eq!(
        route_of(&sink, Some(other), None, &[("event-type", "refund")]),
        Some(1)
    );
    // The last header of a name is its value, as Kafka clients read it.
    assert_eq!(
        route_of(
            &sink,
            Some(other),
            None,
            &[("event-type", "refund"), ("event-type", "charge")]
        ),
        None
    );
    // A key field compared by type: 3 is not "3".
    assert_eq!(
        route_of(&sink, Some(other), Some(r#"{"kind": 3}"#), &[]),
        Some(2)
    );
    assert_eq!(
        route_of(&sink, Some(other), Some(r#"{"kind": "3"}"#), &[]),
        None
    );
    // A tombstone meets no field condition; a header still takes it.
    assert_eq!(route_of(&sink, None, None, &[]), None);
    assert_eq!(
        route_of(&sink, None, None, &[("event-type", "refund")]),
        Some(1)
    );
    assert_eq!(
        route_of(&sink, Some(r#"{"type": 7}"#), None, &[]),
        None,
        "a number is not the string"
    );
}

#[test]
fn a_change_events_field_is_read_from_its_row_image() {
    let mut sink = parse_sinks(
        "m.toml",
        r#"
[[sink]]
name = "cdc"
topic = "db.public.items"
format = "debezium"

[[sink.route]]
when = { field = "kind", equals = "book" }
table = "books"
columns = "auto"

[[sink.route]]
when = { field = "meta.region", equals = "eu" }
table = "eu_items"
columns = "auto"
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .remove(0);
    assert_eq!(sink.format, Format::Debezium);
    let event = |op: &str, before: serde_json::Value, after: serde_json::Value| {
        json!({"schema": {"type": "struct", "fields": []},
               "payload": {"op": op, "before": before, "after": after,
                           "source": {"schema": "public", "table": "items", "lsn": 1}}})
        .to_string()
    };
    let book = json!({"id": 1, "kind": "book", "meta": {"region": "us"}});
    let eu = json!({"id": 2, "kind": "pen", "meta": {"region": "eu"}});
    assert_eq!(
        route_of(
            &sink,
            Some(&event("c", json!(null), book.clone())),
            None,
            &[]
        ),
        Some(0)
    );
    assert_eq!(
        route_of(
            &sink,
            Some(&event("u", book.clone(), eu.clone())),
            None,
            &[]
        ),
        Some(1)
    );
    assert_eq!(
        route_of(&sink, Some(&event("d", book, json!(null))), None, &[]),
        Some(0),
        "a delete's row image is its `before`"
    );
    sink.routes.truncate(1);
    assert_eq!(
        route_of(&sink, Some(&event("c", json!(null), eu)), None, &[]),
        None
    );
}

#[test]
fn an_unrouted_records_reason_shows_what_each_condition_read() {
    let sink = routed();
    let reader = SinkDecoder::new(&sink, &plan_template(&sink, ""));
    let headers = vec![("event-type".to_owned(), Some(b"charge".to_vec()))];
    let input = RouteInput {
        image: reader.row_image(br#"{"type": "order.deleted"}"#).unwrap(),
        key_fields: None,
        key: None,
        headers: &headers,
    };
    let found: Vec<String> = sink.routes.iter().map(|r| r.when.found(&input)).collect();
    assert_eq!(
        found,
        [
            r#"field `type` is "order.deleted""#,
            r#"header `event-type` is "charge""#,
            "key field `kind` is missing"
        ]
    );
}

#[test]
fn a_whole_key_condition_is_refused_where_keys_are_not_plain() {
    let with = |extra: &str| {
        error_of(&format!(
            "[[sink]]\nname = \"e\"\n{extra}\n[[sink.route]]\nwhen = {{ key = \"\", equals = \"a\" }}\ntable = \"a\"\ncolumns = \"auto\"\n"
        ))
    };
    assert!(with("").is_empty(), "{}", with(""));
    for extra in [
        "key_format = \"avro\"",
        "format = \"debezium\"",
        "format = \"connect-json\"",
    ] {
        let error = with(extra);
        assert!(
            error.contains("route #1 (table `a`): `when`: `key = \"\"` compares a plain text key"),
            "{extra}: {error}"
        );
    }
}
