//! The registry wire header: magic byte, schema id, Protobuf message indexes.

use super::super::{Header, SchemaKind, WireError, header};

#[test]
fn header_takes_off_magic_and_id() {
    let payload = [0, 0, 0, 1, 0x2c, 9, 9];
    assert_eq!(
        header(&payload, false),
        Ok(Header {
            schema_id: 300,
            indexes: vec![],
            body: &[9, 9]
        })
    );
    assert_eq!(
        header(&[1, 0, 0, 0, 1], false),
        Err(WireError::WrongMagic { byte: 1 })
    );
    assert_eq!(
        header(&[0, 0, 0], false).unwrap_err().to_string(),
        "schema registry wire header: payload of 3 bytes is too short for the magic byte and \
         schema id"
    );
    assert!(matches!(header(&[], true), Err(WireError::TooShort { .. })));
}

#[test]
fn header_reads_protobuf_message_indexes() {
    let id = [0, 0, 0, 0, 5];
    let with = |tail: &[u8]| [&id[..], tail].concat();
    let read = |payload: &[u8]| header(payload, true).map(|h| (h.indexes, h.body.to_vec()));
    assert_eq!(read(&with(&[0, 7])), Ok((vec![0], vec![7])));
    // Count 2 (zigzag 4), then indexes 1 and 0.
    assert_eq!(read(&with(&[4, 2, 0, 7])), Ok((vec![1, 0], vec![7])));
    assert!(matches!(
        read(&with(&[])),
        Err(WireError::BadIndexes { .. })
    ));
    // A negative count (zigzag 1 = -1), and more indexes than bytes.
    assert!(matches!(
        read(&with(&[1])),
        Err(WireError::BadIndexes { .. })
    ));
    assert_eq!(
        read(&with(&[0x80, 0x01])).unwrap_err().to_string(),
        "schema registry wire header: message-index list counts 64 indexes in 0 bytes"
    );
    assert!(matches!(
        read(&with(&[2])),
        Err(WireError::BadIndexes { .. })
    ));
}

#[test]
fn registry_schema_types() {
    assert_eq!(SchemaKind::from_registry(None), Ok(SchemaKind::Avro));
    assert_eq!(
        SchemaKind::from_registry(Some("AVRO")),
        Ok(SchemaKind::Avro)
    );
    assert_eq!(
        SchemaKind::from_registry(Some("PROTOBUF")),
        Ok(SchemaKind::Protobuf)
    );
    assert_eq!(
        SchemaKind::from_registry(Some("JSON")),
        Ok(SchemaKind::Json)
    );
    assert_eq!(
        SchemaKind::from_registry(Some("XML"))
            .unwrap_err()
            .to_string(),
        "schema type \"XML\" is not AVRO, PROTOBUF or JSON"
    );
}
