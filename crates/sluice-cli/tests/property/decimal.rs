//! Decimal texts for NUMERIC columns, and the rule of `numeric(p, s)` as PostgreSQL applies
//! it: round to `s` digits after the point (half away from zero; `s` may be negative or
//! exceed `p`), then the unscaled integer must have at most `p` digits.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

/// A JSON number's text as (negative, digits, exponent): the value is digits × 10^exponent.
fn parse(text: &str) -> (bool, Vec<u8>, i64) {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().expect("an exponent")),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = whole
        .bytes()
        .chain(fraction.bytes())
        .map(|b| b - b'0')
        .collect();
    (negative, digits, exponent - fraction.len() as i64)
}

/// `text` rounded to `scale` digits after the point, as its unscaled integer: (negative,
/// digits without leading zeros; none for zero).
fn unscaled(text: &str, scale: i32) -> (bool, Vec<u8>) {
    let (negative, mut digits, exponent) = parse(text);
    let shift = exponent + i64::from(scale);
    if shift >= 0 {
        digits.extend(std::iter::repeat_n(0, shift as usize));
    } else {
        let keep = digits.len() as i64 + shift;
        if keep < 0 {
            digits.clear();
        } else {
            let up = digits.get(keep as usize).is_some_and(|d| *d >= 5);
            digits.truncate(keep as usize);
            if up {
                let mut at = digits.len();
                loop {
                    if at == 0 {
                        digits.insert(0, 1);
                        break;
                    }
                    at -= 1;
                    if digits[at] == 9 {
                        digits[at] = 0;
                    } else {
                        digits[at] += 1;
                        break;
                    }
                }
            }
        }
    }
    let first = digits.iter().position(|d| *d != 0).unwrap_or(digits.len());
    digits.drain(..first);
    (negative && !digits.is_empty(), digits)
}

/// The significant digits of a number's text (`0.00120` has two).
pub fn significant_digits(text: &str) -> usize {
    let (_, digits, _) = parse(text);
    let first = digits.iter().position(|d| *d != 0);
    let last = digits.iter().rposition(|d| *d != 0);
    match (first, last) {
        (Some(first), Some(last)) => last - first + 1,
        _ => 0,
    }
}

/// Whether `text` fits `numeric(p, s)`.
pub fn fits(text: &str, precision: u32, scale: i32) -> bool {
    unscaled(text, scale).1.len() <= precision as usize
}

/// The value of `text` in a `numeric(_, s)` column, as a key compares it.
pub fn rounded_ident(text: &str, scale: i32) -> String {
    let (negative, digits) = unscaled(text, scale);
    if digits.is_empty() {
        return "0".into();
    }
    let body: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    format!("{}{body}", if negative { "-" } else { "" })
}

/// digits × 10^exponent as a plain decimal text.
fn plain(negative: bool, digits: &[u8], exponent: i64) -> String {
    let mut body: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    if body.is_empty() {
        body.push('0');
    }
    let body = if digits.is_empty() && exponent >= 0 {
        body
    } else if exponent >= 0 {
        format!("{body}{}", "0".repeat(exponent as usize))
    } else {
        let point = (-exponent) as usize;
        if body.len() <= point {
            body = format!("{}{body}", "0".repeat(point + 1 - body.len()));
        }
        let (whole, fraction) = body.split_at(body.len() - point);
        format!("{whole}.{fraction}")
    };
    format!("{}{body}", if negative { "-" } else { "" })
}

fn random_digits(rng: &mut StdRng, count: usize) -> Vec<u8> {
    (0..count)
        .map(|i| {
            if i == 0 {
                rng.random_range(1..=9)
            } else {
                rng.random_range(0..=9)
            }
        })
        .collect()
}

/// A value that fits `numeric(p, s)`: up to `p` digits at scale `s`, the largest often,
/// sometimes with digits below the scale that round without overflowing.
pub fn fitting(rng: &mut StdRng, precision: u32, scale: i32) -> String {
    let negative = rng.random_bool(0.3);
    let mut digits = match rng.random_range(0..5) {
        0 => vec![9; precision as usize],
        1 => Vec::new(),
        _ => {
            let count = rng.random_range(1..=precision as usize);
            random_digits(rng, count)
        }
    };
    let mut exponent = -i64::from(scale);
    if rng.random_bool(0.3) {
        let extra = rng.random_range(1..=2);
        let mut longer = digits.clone();
        longer.extend(random_digits(rng, extra).iter().map(|d| d % 5));
        if fits(
            &plain(negative, &longer, exponent - extra as i64),
            precision,
            scale,
        ) {
            digits = longer;
            exponent -= extra as i64;
        }
    }
    let text = plain(negative, &digits, exponent);
    assert!(
        fits(&text, precision, scale),
        "{text} numeric({precision},{scale})"
    );
    text
}

/// A value too wide for `numeric(p, s)`: more digits, or `p` nines that round up.
pub fn overflowing(rng: &mut StdRng, precision: u32, scale: i32) -> String {
    let negative = rng.random_bool(0.3);
    let text = if rng.random_bool(0.5) {
        let count = precision as usize + rng.random_range(1..=3);
        let digits = random_digits(rng, count);
        plain(negative, &digits, -i64::from(scale))
    } else {
        let mut nines = vec![9; precision as usize];
        nines.push(5);
        plain(negative, &nines, -i64::from(scale) - 1)
    };
    assert!(
        !fits(&text, precision, scale),
        "{text} numeric({precision},{scale})"
    );
    text
}

/// An unconstrained NUMERIC's text: many digits, trailing zeros (the scale is kept), an
/// exponent, the edges.
pub fn unconstrained(rng: &mut StdRng) -> String {
    if rng.random_bool(0.2) {
        return (*[
            "0",
            "-0",
            "0.000",
            "1e-20",
            "1E+3",
            "123456789012345678901234567890.5",
            "0.1000000000000000055511151231257827",
            "-99999999999999999999.99999999999999999999",
        ]
        .choose(rng)
        .expect("edges"))
        .to_owned();
    }
    let negative = rng.random_bool(0.3);
    let count = rng.random_range(0..=30);
    let whole = random_digits(rng, count);
    let fraction: String = (0..rng.random_range(0..=30))
        .map(|_| char::from(b'0' + rng.random_range(0..=9)))
        .collect();
    let mut text = plain(negative, &whole, 0);
    if !fraction.is_empty() {
        text = format!("{text}.{fraction}");
    }
    if rng.random_bool(0.2) {
        text = format!("{text}e{}", rng.random_range(-40..=40));
    }
    text
}

/// Another JSON text of the same NUMERIC value: trailing zeros, or an exponent.
pub fn equivalent(text: &str, rng: &mut StdRng) -> String {
    match rng.random_range(0..4) {
        0 if !text.contains(['e', 'E']) => {
            let zeros = "0".repeat(rng.random_range(1..=3));
            if text.contains('.') {
                format!("{text}{zeros}")
            } else {
                format!("{text}.{zeros}")
            }
        }
        1 => {
            let (negative, digits, exponent) = parse(text);
            let body: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
            let body = body.trim_start_matches('0');
            let body = if body.is_empty() { "0" } else { body };
            format!("{}{body}e{exponent}", if negative { "-" } else { "" })
        }
        _ => text.to_owned(),
    }
}

#[test]
fn rounding_as_postgres_rounds() {
    assert!(fits("999.994", 5, 2));
    assert!(!fits("999.995", 5, 2));
    assert!(fits("0.00999", 3, 5));
    assert!(!fits("0.01", 3, 5));
    assert!(fits("99949", 3, -2));
    assert!(!fits("99950", 3, -2));
    assert_eq!(rounded_ident("12.50", 2), "1250");
    assert_eq!(rounded_ident("1.25e1", 2), "1250");
    assert_eq!(rounded_ident("-0.001", 2), "0");
    assert_eq!(significant_digits("0.00120"), 2);
    assert_eq!(significant_digits("-1200e5"), 2);
    assert_eq!(plain(false, &[5], -3), "0.005");
    assert_eq!(plain(true, &[1, 2, 3], -1), "-12.3");
    assert_eq!(plain(false, &[], 2), "0");
    assert_eq!(plain(true, &[], -2), "-0.00");
}
