//! A column's `DEFAULT` as the `default` of its Connect schema. Debezium evaluates constant
//! defaults (`'x'::text`, `0`, `true`, `'2026-01-01'::date`) into the column's value and
//! writes them in the schema; this does the same for constants and leaves every other
//! expression (`nextval(…)`, `now()`, arithmetic) without a `default`.

use super::types::Kind;

/// The JSON value of the constant default `expression` (as `pg_get_expr` prints it) for a
/// column of `kind`, or `None` when it is not a constant this map reads.
pub fn constant_default(kind: Kind, column: &str, expression: &str) -> Option<String> {
    // Debezium 3.6 writes no `default` for an array column (`'{}'::integer[]` has none).
    if matches!(kind, Kind::Array(_)) {
        return None;
    }
    let text = constant_text(expression.trim())?;
    let mut out = String::new();
    kind.push_value(&mut out, column, &text).ok()?;
    Some(out)
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
