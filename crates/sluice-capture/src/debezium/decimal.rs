//! `numeric` values as Debezium 3.6.1 holds them: PostgreSQL's text read as Java's
//! `BigDecimal` (pgoutput's text through `new BigDecimal(text)`), the trailing zeros of an
//! unconstrained `numeric` stripped, and `BigDecimal.toString()`'s layout for the key
//! headers (docs/capture.md#values).

use num_bigint::{BigInt, Sign};

/// Whether `text` is one of the values `numeric` has beyond decimals (`NaN`, and since
/// PostgreSQL 14 `Infinity` and `-Infinity`): Debezium reads them as its
/// `SpecialValueDecimal`, which has no `Decimal` form (docs/capture.md#numeric-nan-and-infinity).
pub(super) fn is_special(text: &str) -> bool {
    matches!(text, "NaN" | "Infinity" | "-Infinity")
}

/// A numeric's text (`-42.50`) as its unscaled integer (-4250) and the digits written after
/// the point (2), as `new BigDecimal("-42.50")` holds it. `NaN` and the infinities have no
/// such form.
pub(super) fn unscaled(text: &str) -> Result<(BigInt, u32), &'static str> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    parts(whole, fraction)
}

/// An unconstrained `numeric`'s text as Debezium's `VariableScaleDecimal` holds it: the
/// trailing zeros of the fraction stripped (`153.0` → 153 at scale 0, `1.50` → 15 at scale 1,
/// `0.000` → 0 at scale 0) while those of the integer stay (`100` → 100 at scale 0). This is
/// PostgresValueConverter.convertDecimal's `stripTrailingZeros()` followed by `setScale(0)`
/// when the scale went negative.
pub(super) fn stripped(text: &str) -> Result<(BigInt, u32), &'static str> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    parts(whole, fraction.trim_end_matches('0'))
}

fn parts(whole: &str, fraction: &str) -> Result<(BigInt, u32), &'static str> {
    // `BigInt` takes a leading sign; one in the fraction, or an empty number, is no decimal.
    if fraction.starts_with(['-', '+']) || whole.trim_start_matches(['-', '+']).is_empty() {
        return Err("not a finite decimal (NaN and infinities have no Decimal form)");
    }
    let value = format!("{whole}{fraction}")
        .parse::<BigInt>()
        .map_err(|_| "not a finite decimal (NaN and infinities have no Decimal form)")?;
    let scale = u32::try_from(fraction.len()).map_err(|_| "too many digits")?;
    Ok((value, scale))
}

/// Appends `unscaled` × 10^-`scale` as Java's `BigDecimal.toString()` lays it out (what
/// Kafka Connect's `Values.convertToString` writes for a `Decimal`): plain (`2001.5714285714`,
/// `0.05`, `-42`) unless the scale is negative or the adjusted exponent is below -6, then
/// scientific (`0E-10` for zero at scale 10, `1.5E-7`).
pub(super) fn push_java(out: &mut String, unscaled: &BigInt, scale: u32) {
    if unscaled.sign() == Sign::Minus {
        out.push('-');
    }
    let coefficient = unscaled.magnitude().to_string();
    let length = i64::try_from(coefficient.len()).unwrap_or(i64::MAX);
    let scale = i64::from(scale);
    let adjusted = -scale + (length - 1);
    if scale == 0 {
        out.push_str(&coefficient);
    } else if adjusted >= -6 {
        let pad = scale - length;
        if pad >= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', usize::try_from(pad).unwrap_or(0)));
            out.push_str(&coefficient);
        } else {
            let point = usize::try_from(-pad).unwrap_or(0);
            out.push_str(&coefficient[..point]);
            out.push('.');
            out.push_str(&coefficient[point..]);
        }
    } else {
        out.push_str(&coefficient[..1]);
        if coefficient.len() > 1 {
            out.push('.');
            out.push_str(&coefficient[1..]);
        }
        out.push('E');
        out.push_str(&adjusted.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(text: &str) -> String {
        let (unscaled, scale) = unscaled(text).unwrap_or_else(|why| panic!("{text}: {why}"));
        let mut out = String::new();
        push_java(&mut out, &unscaled, scale);
        out
    }

    #[test]
    fn special_values_are_only_nan_and_the_infinities() {
        assert!(is_special("NaN"));
        assert!(is_special("Infinity"));
        assert!(is_special("-Infinity"));
        assert!(!is_special("nan"));
        assert!(!is_special("1.5"));
        assert!(unscaled("NaN").is_err());
        assert!(unscaled("-Infinity").is_err());
        assert!(stripped("Infinity").is_err());
        assert!(unscaled("").is_err());
        assert!(unscaled("-").is_err());
        assert!(unscaled("1.-5").is_err());
    }

    /// `stripTrailingZeros()` then `setScale(0)` for a negative scale, as Debezium's
    /// PostgresValueConverter.convertDecimal does for an unconstrained numeric.
    #[test]
    fn an_unconstrained_numeric_loses_its_trailing_fraction_zeros() {
        let case = |text: &str| {
            let (value, scale) = stripped(text).unwrap_or_else(|why| panic!("{text}: {why}"));
            (value.to_string(), scale)
        };
        assert_eq!(case("153.0"), ("153".into(), 0));
        assert_eq!(case("0.0"), ("0".into(), 0));
        assert_eq!(case("0.000"), ("0".into(), 0));
        assert_eq!(case("0"), ("0".into(), 0));
        assert_eq!(case("100"), ("100".into(), 0));
        assert_eq!(case("100000"), ("100000".into(), 0));
        assert_eq!(case("100.00"), ("100".into(), 0));
        assert_eq!(case("1.50"), ("15".into(), 1));
        assert_eq!(case("-1.500"), ("-15".into(), 1));
        assert_eq!(case("0.010"), ("1".into(), 2));
        assert_eq!(case("150"), ("150".into(), 0));
        assert_eq!(case("-2"), ("-2".into(), 0));
    }

    /// Java's `BigDecimal.toString()`: `new BigDecimal(text).toString()` in a JShell gives
    /// each right-hand side.
    #[test]
    fn decimals_are_laid_out_as_java_prints_them() {
        assert_eq!(java("2001.5714285714"), "2001.5714285714");
        assert_eq!(java("-42.50"), "-42.50");
        assert_eq!(java("0.05"), "0.05");
        assert_eq!(java("0.00"), "0.00");
        assert_eq!(java("150"), "150");
        assert_eq!(java("-7"), "-7");
        assert_eq!(java("0.000001"), "0.000001");
        assert_eq!(java("0.0000001"), "1E-7");
        assert_eq!(java("0.00000015"), "1.5E-7");
        assert_eq!(java("-0.00000015"), "-1.5E-7");
        assert_eq!(java("0.0000000000"), "0E-10");
        assert_eq!(java("0.000000"), "0.000000");
        assert_eq!(java("0.0000000"), "0E-7");
        assert_eq!(java("12345678901234567890.123"), "12345678901234567890.123");
    }
}
