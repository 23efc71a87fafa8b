//! No bytes panic the transcoder: random bodies, and valid bodies with random bytes changed,
//! give an error or JSON that parses.

use std::sync::LazyLock;

use apache_avro::Schema;
use proptest::collection::vec;
use proptest::prelude::*;
use prost::Message as _;

use super::super::{WriterSchema, header};
use super::{avro, protobuf};

/// A recursive Avro schema with logical types: a list of nodes nesting without end.
const RECURSIVE: &str = r#"{"type":"record","name":"Node","fields":[
  {"name":"value","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":4}},
  {"name":"at","type":{"type":"long","logicalType":"timestamp-nanos"}},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"span","type":{"type":"fixed","name":"Span","size":12,"logicalType":"duration"}},
  {"name":"nothing","type":{"type":"array","items":"null"}},
  {"name":"children","type":{"type":"map","values":"Node"}},
  {"name":"next","type":["null","Node"]}
]}"#;

static AVRO: LazyLock<WriterSchema> = LazyLock::new(|| avro::compile(avro::EVERYTHING));
static NODES: LazyLock<WriterSchema> = LazyLock::new(|| avro::compile(RECURSIVE));
static PROTO: LazyLock<WriterSchema> = LazyLock::new(protobuf::compile_order);
static AVRO_BODY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let parsed = Schema::parse_str(avro::EVERYTHING).expect("the schema parses");
    avro::encode(&parsed, avro::order(Some("note"), 3))
});
static PROTO_BODY: LazyLock<Vec<u8>> =
    LazyLock::new(|| protobuf::order(&protobuf::descriptor(&PROTO, &[])).encode_to_vec());

/// Transcodes and checks that what comes out, if anything, is JSON; and that the fields read
/// straight from the bytes, when they are read, are the transcoded record's.
fn transcode(schema: &WriterSchema, indexes: &[i32], body: &[u8]) {
    if let Ok(text) = schema.to_json(indexes, body) {
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_ok(),
            "not JSON: {text}"
        );
    }
    super::avro_fields::agrees_with_transcode(schema, body);
}

/// `body` with the bytes at `changes` (positions taken modulo its length) replaced.
fn changed(body: &[u8], changes: &[(usize, u8)]) -> Vec<u8> {
    let mut body = body.to_vec();
    for (at, byte) in changes {
        let len = body.len();
        body[at % len] = *byte;
    }
    body
}

proptest! {
    #[test]
    fn random_bodies_never_panic(body in vec(any::<u8>(), 0..256)) {
        transcode(&AVRO, &[], &body);
        transcode(&NODES, &[], &body);
        transcode(&PROTO, &[], &body);
        transcode(&PROTO, &[1, 0], &body);
        let _ = header(&body, true);
        let _ = header(&body, false);
    }

    #[test]
    fn changed_bodies_never_panic(changes in vec((any::<usize>(), any::<u8>()), 1..6)) {
        transcode(&AVRO, &[], &changed(&AVRO_BODY, &changes));
        transcode(&NODES, &[], &changed(&AVRO_BODY, &changes));
        transcode(&PROTO, &[], &changed(&PROTO_BODY, &changes));
    }
}

#[test]
fn avro_nesting_and_item_counts_are_bounded() {
    // `next` taken 10 000 times: union branch 1 (zigzag 2) after the other fields, each
    // empty: value, at, day (a byte each), span (12 bytes), nothing, children (a byte each).
    let mut level = vec![0u8; 17];
    level.push(2);
    let deep: Vec<u8> = level
        .iter()
        .copied()
        .cycle()
        .take(level.len() * 10_000)
        .collect();
    let error = NODES.to_json(&[], &deep).unwrap_err().to_string();
    assert!(error.contains("nested deeper than 256"), "{error}");
    // An array of nulls counting a billion items in five bytes.
    let mut many = vec![0u8; 15];
    many.extend([0x80, 0xa8, 0xd6, 0xb9, 0x07]);
    let error = NODES.to_json(&[], &many).unwrap_err().to_string();
    assert!(error.contains("more than the bytes can hold"), "{error}");
}
