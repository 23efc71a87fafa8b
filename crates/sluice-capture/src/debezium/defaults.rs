//! A column's `DEFAULT` as the `default` of its Connect schema. Debezium evaluates constant
//! defaults (`'x'::text`, `0`, `true`, `'2026-01-01'::date`) into the column's value and
//! writes them in the schema; this does the same for constants and leaves every other
//! expression (`nextval(…)`, `now()`, arithmetic) without a `default`.

use super::types::Kind;

/// The JSON value of the constant default `expression` (as `pg_get_expr` prints it) for a
/// column of `kind`, or `None` when it is not a constant this map reads.
pub fn constant_default(kind: Kind, column: &str, expression: &str) -> Option<String> {
    // Debezium 3.6 writes no `default` for an array column (`'{}'::integer[]` has none), nor
    // for a column whose value is a Connect struct (an unconstrained `numeric`'s
    // VariableScaleDecimal, a `point`): "Struct can't be used as default value for column
    // …, will use null instead", recorded from Debezium 3.6.1.
    if matches!(kind, Kind::Array(_) | Kind::VariableDecimal | Kind::Point) {
        return None;
    }
    let mut text = constant_text(expression.trim())?;
    // `numeric(5,2) DEFAULT 1.5` holds 1.50: the literal is written at the column's scale
    // (a value from the WAL always has it).
    if let Kind::Decimal { scale, .. } = kind {
        text = at_scale(&text, usize::from(scale))?;
    }
    let mut out = String::new();
    kind.push_value(&mut out, column, &text).ok()?;
    Some(out)
}

/// A decimal literal with `scale` fraction digits, zeros appended (`1.5` → `1.50`, `2` →
/// `2.00`); `None` when it has more (the column rounds it; left without a `default`).
fn at_scale(text: &str, scale: usize) -> Option<String> {
    let digits = text
        .split_once('.')
        .map_or(0, |(_, fraction)| fraction.len());
    if digits > scale || text.contains(['e', 'E']) {
        return None;
    }
    let mut padded = text.to_owned();
    if digits == 0 && scale > 0 && !text.contains('.') {
        padded.push('.');
    }
    padded.extend(std::iter::repeat_n('0', scale - digits));
    Some(padded)
}

/// The text of a constant: `'it''s'::text` → `it's`, `'5'::numeric` → `5`, `42`, `-1.5`,
/// `true` → `t`, `(-1)` → `-1`. `None` for anything that is not a plain literal.
fn constant_text(expression: &str) -> Option<String> {
    let mut expression = expression;
    while let Some(inner) = expression
        .strip_prefix('(')
        .and_then(|rest| rest.strip_suffix(')'))
    {
        expression = inner.trim();
    }
    if let Some(quoted) = expression.strip_prefix('\'') {
        let end = quoted.rfind('\'')?;
        let (body, cast) = quoted.split_at(end);
        let cast = &cast[1..];
        if !(cast.is_empty() || cast.starts_with("::")) {
            return None;
        }
        if body.replace("''", "").contains('\'') {
            return None;
        }
        return Some(body.replace("''", "'"));
    }
    let bare = expression.split("::").next().unwrap_or(expression).trim();
    let bare = bare.trim_start_matches('(').trim_end_matches(')');
    match bare {
        "true" => Some("t".to_owned()),
        "false" => Some("f".to_owned()),
        _ if !bare.is_empty()
            && bare
                .trim_start_matches('-')
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
            && bare.chars().any(|c| c.is_ascii_digit()) =>
        {
            Some(bare.to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_become_values_and_expressions_none() {
        assert_eq!(
            constant_default(Kind::Text, "c", "'it''s'::text").as_deref(),
            Some("\"it's\"")
        );
        assert_eq!(
            constant_default(Kind::Int32, "c", "42").as_deref(),
            Some("42")
        );
        assert_eq!(
            constant_default(Kind::Int64, "c", "'-7'::integer").as_deref(),
            Some("-7")
        );
        assert_eq!(
            constant_default(Kind::Int32, "c", "(-1)").as_deref(),
            Some("-1")
        );
        assert_eq!(
            constant_default(Kind::Boolean, "c", "true").as_deref(),
            Some("true")
        );
        assert_eq!(
            constant_default(
                Kind::Decimal {
                    precision: 12,
                    scale: 2
                },
                "c",
                "0.05"
            )
            .as_deref(),
            Some("\"BQ==\"")
        );
        // Fewer digits than the scale: the value the column holds (1.50 is 150 = AJY=).
        let cents = Kind::Decimal {
            precision: 5,
            scale: 2,
        };
        for literal in ["1.5", "1.50", "'1.5'::numeric"] {
            assert_eq!(
                constant_default(cents, "c", literal).as_deref(),
                Some("\"AJY=\""),
                "{literal}"
            );
        }
        assert_eq!(
            constant_default(cents, "c", "0").as_deref(),
            Some("\"AA==\"")
        );
        assert_eq!(constant_default(cents, "c", "1.555"), None);
        // A struct's default is none in Debezium's schema.
        assert_eq!(constant_default(Kind::VariableDecimal, "c", "5"), None);
        assert_eq!(constant_default(Kind::Point, "c", "'(1,2)'::point"), None);
        assert_eq!(
            constant_default(Kind::Date, "c", "'1970-01-02'::date").as_deref(),
            Some("1")
        );
        assert_eq!(
            constant_default(Kind::Int64, "c", "nextval('items_id_seq'::regclass)"),
            None
        );
        assert_eq!(constant_default(Kind::ZonedTimestamp, "c", "now()"), None);
        assert_eq!(constant_default(Kind::Int32, "c", "(1 + 2)"), None);
        assert_eq!(constant_default(Kind::Int32, "c", "'x'::text"), None);
        // An enum's default (its column reads as text); an array's has none in Debezium's.
        assert_eq!(
            constant_default(Kind::Text, "m", "'ok'::dbzenum.mood").as_deref(),
            Some("\"ok\"")
        );
        assert_eq!(
            constant_default(Kind::of(1007, -1), "nums", "'{}'::integer[]"),
            None
        );
    }
}
