//! The element types of the array columns this map reads: a one-dimensional array of one of
//! them is Debezium's `array` whose items have the element's schema, optional.

/// An array's element type: the scalar kinds an array of which Debezium writes as `array`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    /// `bool[]`.
    Boolean,
    /// `int2[]`.
    Int16,
    /// `int4[]`.
    Int32,
    /// `int8[]`.
    Int64,
    /// `float4[]`.
    Float32,
    /// `float8[]`.
    Float64,
    /// `text[]`, `varchar[]`, `bpchar[]`, `"char"[]`.
    Text,
    /// `uuid[]`.
    Uuid,
    /// `json[]`, `jsonb[]`.
    Json,
    /// `bytea[]`.
    Bytes,
    /// `numeric(p,s)[]`.
    Decimal {
        /// Declared precision.
        precision: u16,
        /// Declared scale.
        scale: u16,
    },
    /// `numeric[]`.
    VariableDecimal,
    /// `date[]`.
    Date,
    /// `timestamp(p ≤ 3)[]`.
    TimestampMillis,
    /// `timestamp[]`.
    TimestampMicros,
    /// `timestamptz[]`.
    ZonedTimestamp,
    /// `time(p ≤ 3)[]`.
    TimeMillis,
    /// `time[]`.
    TimeMicros,
}

/// The element type's OID of the array type `oid`, if this map reads that array.
/// `name[]` is left out: Debezium 3.6 leaves such a column out of its records.
pub(super) fn element_oid(oid: u32) -> Option<u32> {
    Some(match oid {
        1000 => 16,
        1005 => 21,
        1007 => 23,
        1016 => 20,
        1021 => 700,
        1022 => 701,
        1002 | 1009 | 1014 | 1015 => 25,
        2951 => 2950,
        199 => 114,
        3807 => 3802,
        1001 => 17,
        1231 => 1700,
        1182 => 1082,
        1115 => 1114,
        1185 => 1184,
        1183 => 1083,
        _ => return None,
    })
}
