//! PostgreSQL's binary `COPY` format for a batch given as [`Column`]s: the same values the
//! `UNNEST` arrays carry, row by row.

use chrono::{DateTime, Utc};
use sluice_core::Column;

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00:00 UTC).
const PG_EPOCH_US: i64 = 946_684_800_000_000;
/// The only binary `jsonb` version.
const JSONB_VERSION: u8 = 1;

/// Encodes `rows` rows of `columns` (each column holds one value per row) as one binary
/// `COPY` stream: header, one tuple per row, trailer.
pub fn encode_rows(rows: usize, columns: &[Column<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(19 + rows * (2 + columns.len() * 16));
    out.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
    out.extend_from_slice(&0i32.to_be_bytes()); // flags
    out.extend_from_slice(&0i32.to_be_bytes()); // header extension length
    let fields = i16::try_from(columns.len()).unwrap_or(i16::MAX);
    for row in 0..rows {
        out.extend_from_slice(&fields.to_be_bytes());
        for column in columns {
            field(&mut out, column, row);
        }
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

fn bytes(out: &mut Vec<u8>, value: &[u8]) {
    out.extend_from_slice(&i32::try_from(value.len()).unwrap_or(i32::MAX).to_be_bytes());
    out.extend_from_slice(value);
}

fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(&(-1i32).to_be_bytes());
}

fn opt<T>(out: &mut Vec<u8>, value: Option<T>, write: impl FnOnce(&mut Vec<u8>, T)) {
    match value {
        Some(v) => write(out, v),
        None => null(out),
    }
}

fn timestamp(out: &mut Vec<u8>, t: DateTime<Utc>) {
    bytes(out, &(t.timestamp_micros() - PG_EPOCH_US).to_be_bytes());
}

fn json(out: &mut Vec<u8>, value: &serde_json::Value) {
    let text = value.to_string();
    out.extend_from_slice(
        &i32::try_from(text.len() + 1)
            .unwrap_or(i32::MAX)
            .to_be_bytes(),
    );
    out.push(JSONB_VERSION);
    out.extend_from_slice(text.as_bytes());
}

/// Row `row` of `column`. A column shorter than the batch is a bug in the topic's
/// `columns`; it is written as NULL and the statement's NOT NULL constraints refuse it.
fn field(out: &mut Vec<u8>, column: &Column<'_>, row: usize) {
    match column {
        Column::Text(v) => opt(out, v.get(row), |o, s| bytes(o, s.as_bytes())),
        Column::OptText(v) => opt(out, v.get(row).copied().flatten(), |o, s| {
            bytes(o, s.as_bytes())
        }),
        Column::SmallInt(v) => opt(out, v.get(row), |o, n| bytes(o, &n.to_be_bytes())),
        Column::Int(v) => opt(out, v.get(row), |o, n| bytes(o, &n.to_be_bytes())),
        Column::OptInt(v) => opt(out, v.get(row).copied().flatten(), |o, n| {
            bytes(o, &n.to_be_bytes())
        }),
        Column::BigInt(v) => opt(out, v.get(row), |o, n| bytes(o, &n.to_be_bytes())),
        Column::OptBigInt(v) => opt(out, v.get(row).copied().flatten(), |o, n| {
            bytes(o, &n.to_be_bytes())
        }),
        Column::Double(v) => opt(out, v.get(row), |o, n| bytes(o, &n.to_be_bytes())),
        Column::OptDouble(v) => opt(out, v.get(row).copied().flatten(), |o, n| {
            bytes(o, &n.to_be_bytes())
        }),
        Column::OptBool(v) => opt(out, v.get(row).copied().flatten(), |o, b| {
            bytes(o, &[u8::from(b)])
        }),
        Column::Timestamp(v) => opt(out, v.get(row).copied(), timestamp),
        Column::OptTimestamp(v) => opt(out, v.get(row).copied().flatten(), timestamp),
        Column::Uuid(v) => opt(out, v.get(row), |o, u| bytes(o, u.as_bytes())),
        Column::OptJson(v) => opt(out, v.get(row).and_then(Option::as_ref), json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_row_is_encoded_field_by_field() {
        let at = Utc
            .with_ymd_and_hms(2000, 1, 1, 0, 0, 1)
            .single()
            .expect("a valid time");
        let columns = [
            Column::Text(vec!["ab"]),
            Column::OptText(vec![None]),
            Column::SmallInt(vec![3]),
            Column::Timestamp(vec![at]),
            Column::OptJson(vec![Some(serde_json::json!([1]))]),
        ];
        let out = encode_rows(1, &columns);
        let mut expected = b"PGCOPY\n\xff\r\n\0".to_vec();
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        expected.extend_from_slice(&5i16.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 2, b'a', b'b']);
        expected.extend_from_slice(&(-1i32).to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 2, 0, 3]);
        expected.extend_from_slice(&[0, 0, 0, 8]);
        expected.extend_from_slice(&1_000_000i64.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 4, 1, b'[', b'1', b']']);
        expected.extend_from_slice(&(-1i16).to_be_bytes());
        assert_eq!(out, expected);
    }
}
