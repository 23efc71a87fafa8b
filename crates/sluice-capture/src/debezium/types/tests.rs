use super::*;

fn value(kind: Kind, text: &str) -> String {
    let mut out = String::new();
    kind.push_value(&mut out, "c", text)
        .unwrap_or_else(|error| panic!("{error}"));
    out
}

const NUMERIC_12_2: i32 = ((12 << 16) | 2) + 4;

#[test]
fn kinds_follow_the_type_and_its_modifier() {
    assert_eq!(
        Kind::of(1700, NUMERIC_12_2),
        Kind::Decimal {
            precision: 12,
            scale: 2
        }
    );
    assert_eq!(Kind::of(1700, -1), Kind::VariableDecimal);
    assert_eq!(Kind::of(1114, -1), Kind::TimestampMicros);
    assert_eq!(Kind::of(1114, 6), Kind::TimestampMicros);
    assert_eq!(Kind::of(1114, 3), Kind::TimestampMillis);
    assert_eq!(Kind::of(1083, 0), Kind::TimeMillis);
    assert_eq!(Kind::of(25, -1), Kind::Text);
    assert_eq!(Kind::of(3802, -1), Kind::Json);
}

/// The values of the Debezium 3.6.1 fixtures (crates/sluice-cli/tests/data/debezium/README.md).
#[test]
fn values_equal_the_fixtures() {
    let amount = Kind::of(1700, NUMERIC_12_2);
    assert_eq!(value(amount, "1234567890.12"), "\"HL6ZGhQ=\"");
    assert_eq!(value(amount, "-42.50"), "\"72Y=\"");
    assert_eq!(value(amount, "0.05"), "\"BQ==\"");
    assert_eq!(value(amount, "99.99"), "\"Jw8=\"");
    assert_eq!(value(Kind::Date, "2026-03-04"), "20516");
    assert_eq!(value(Kind::Date, "1969-12-31"), "-1");
    assert_eq!(
        value(Kind::TimestampMicros, "2026-03-04 05:06:07.123456"),
        "1772600767123456"
    );
    assert_eq!(
        value(Kind::TimestampMicros, "1969-12-31 23:59:59.999999"),
        "-1"
    );
    assert_eq!(
        value(Kind::ZonedTimestamp, "2026-03-04 03:06:07.123456+00"),
        "\"2026-03-04T03:06:07.123456Z\""
    );
    assert_eq!(
        value(Kind::ZonedTimestamp, "2026-12-31 18:29:59+00"),
        "\"2026-12-31T18:29:59.000000Z\""
    );
    assert_eq!(
        value(
            Kind::Json,
            "{\"big\": 12345678901234567890, \"list\": [1, 2.5, \"três\"]}"
        ),
        "\"{\\\"big\\\": 12345678901234567890, \\\"list\\\": [1, 2.5, \\\"três\\\"]}\""
    );
}

/// PostgreSQL's last years (a date to 5874897, a timestamp to 294276) are values, not a stop.
#[test]
fn the_last_years_postgresql_holds_are_sent() {
    assert_eq!(value(Kind::Date, "262143-01-01"), "95026237");
    assert_eq!(value(Kind::Date, "5874897-12-31"), "2145042905");
    assert_eq!(
        value(Kind::TimestampMicros, "262143-06-01 00:00:00"),
        "8210279923200000000"
    );
    assert_eq!(
        value(Kind::TimestampMicros, "294276-12-31 23:59:59.999999"),
        "9223372036854775807"
    );
    assert_eq!(
        value(Kind::TimestampMillis, "262143-06-01 00:00:00"),
        "8210279923200000"
    );
    // Milliseconds fit where microseconds do not: exact, as Debezium's Timestamp is.
    assert_eq!(
        value(Kind::TimestampMillis, "294276-12-31 23:59:59.999"),
        "9224318015999999"
    );
    assert_eq!(
        value(Kind::ZonedTimestamp, "262143-06-01 00:00:00+00"),
        "\"+262143-06-01T00:00:00.000000Z\""
    );
}

#[test]
fn other_values() {
    assert_eq!(value(Kind::Boolean, "t"), "true");
    assert_eq!(value(Kind::Int16, "-32768"), "-32768");
    assert_eq!(value(Kind::Float64, "2.5"), "2.5");
    assert_eq!(value(Kind::Float64, "1e+20"), "1.0E20");
    assert_eq!(value(Kind::Float32, "0.1"), "0.1");
    assert_eq!(value(Kind::Bytes, "\\x00ff10"), "\"AP8Q\"");
    // Debezium strips an unconstrained numeric's trailing zeros: -1.500 is -15 at scale 1.
    assert_eq!(
        value(Kind::VariableDecimal, "-1.500"),
        "{\"scale\":1,\"value\":\"8Q==\"}"
    );
    assert_eq!(
        value(Kind::TimestampMillis, "1969-12-31 23:59:59.9995"),
        "-1"
    );
    assert_eq!(value(Kind::TimeMicros, "05:06:07.123456"), "18367123456");
    assert_eq!(value(Kind::TimeMillis, "00:00:01.5"), "1500");
}

#[test]
fn unreadable_values_name_their_column() {
    let mut out = String::new();
    let error = Kind::Boolean
        .push_value(&mut out, "flag", "yes")
        .expect_err("not t or f");
    assert_eq!(error.column, "flag");
    assert!(error.to_string().contains("\"yes\""), "{error}");
    let error = Kind::of(1700, NUMERIC_12_2)
        .push_value(&mut out, "amount", "NaN")
        .expect_err("NaN has no Decimal form");
    assert!(error.to_string().contains("amount"), "{error}");
}

/// An unconstrained numeric as Debezium 3.6.1 writes it: PostgresValueConverter.convertDecimal
/// strips the trailing zeros (`stripTrailingZeros()`, then `setScale(0)` if the scale went
/// negative), so `153.0` is 153 at scale 0 where PostgreSQL's text has one fraction digit.
#[test]
fn an_unconstrained_numeric_has_debeziums_scale() {
    let variable = |text: &str| value(Kind::VariableDecimal, text);
    // 153 = 0x0099: a leading zero byte keeps it positive.
    assert_eq!(variable("153.0"), "{\"scale\":0,\"value\":\"AJk=\"}");
    assert_eq!(variable("153"), "{\"scale\":0,\"value\":\"AJk=\"}");
    assert_eq!(variable("0.0"), "{\"scale\":0,\"value\":\"AA==\"}");
    assert_eq!(variable("0"), "{\"scale\":0,\"value\":\"AA==\"}");
    // 100 = 0x64: the integer's zeros stay (Java's 1E+2 is set back to scale 0).
    assert_eq!(variable("100"), "{\"scale\":0,\"value\":\"ZA==\"}");
    assert_eq!(variable("100.000"), "{\"scale\":0,\"value\":\"ZA==\"}");
    // 100000 = 0x0186A0.
    assert_eq!(variable("100000"), "{\"scale\":0,\"value\":\"AYag\"}");
    assert_eq!(variable("1.50"), "{\"scale\":1,\"value\":\"Dw==\"}");
    assert_eq!(variable("-0.0100"), "{\"scale\":2,\"value\":\"/w==\"}");
    // The survey's numeric[] (survey-t-1, recorded from Debezium 3.6.1): 1.5, -2, 0.000.
    assert_eq!(
        value(Kind::of(1231, -1), "{1.5,-2,0.000}"),
        "[{\"scale\":1,\"value\":\"Dw==\"},{\"scale\":0,\"value\":\"/g==\"},{\"scale\":0,\"value\":\"AA==\"}]"
    );
    // A constrained numeric keeps the column's scale.
    assert_eq!(value(Kind::of(1700, NUMERIC_12_2), "100.00"), "\"JxA=\"");
}

/// NaN and the infinities of `numeric` (and arrays of `numeric` holding one) are what
/// Debezium cannot convert; floats have them as values.
#[test]
fn numeric_nan_and_infinities_lack_a_decimal_form() {
    let decimal = Kind::of(1700, NUMERIC_12_2);
    for text in ["NaN", "Infinity", "-Infinity"] {
        assert!(decimal.lacks_decimal_form(text), "{text}");
        assert!(Kind::VariableDecimal.lacks_decimal_form(text), "{text}");
        assert!(!Kind::Float64.lacks_decimal_form(text), "{text}");
        assert!(!Kind::Text.lacks_decimal_form(text), "{text}");
    }
    assert!(!decimal.lacks_decimal_form("1.50"));
    assert!(Kind::of(1231, -1).lacks_decimal_form("{1.5,NaN,NULL}"));
    assert!(Kind::of(1231, NUMERIC_12_2).lacks_decimal_form("{-Infinity}"));
    assert!(!Kind::of(1231, -1).lacks_decimal_form("{1.5,NULL}"));
    assert!(!Kind::of(1022, -1).lacks_decimal_form("{NaN}"));
    assert!(!Kind::of(1009, -1).lacks_decimal_form("{NaN}"));
}
