//! A NUMERIC value as PostgreSQL compares it: `1`, `1.0` and `1e0` are one value, and a
//! `numeric(p, s)` column rounds to `s` digits after the point (half away from zero) before
//! it compares. In-batch de-duplication and the newest-wins order use this form, so that two
//! keys the column holds as one are one key in Rust too.

use std::cmp::Ordering;

/// A decimal in canonical form: `0.d₁d₂…dₙ × 10^point`, no leading or trailing zero digit;
/// zero has no digits and is never negative.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    point: i64,
}

impl Decimal {
    /// Parses a JSON number's text (`-12.50`, `1e-3`), rounded to `scale` digits after the
    /// point when the column has one; `None` when it is not a number.
    pub(crate) fn parse(text: &str, scale: Option<u32>) -> Option<Self> {
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
            None => (rest, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let mut digits = Vec::with_capacity(whole.len() + fraction.len());
        for byte in whole.bytes().chain(fraction.bytes()) {
            if !byte.is_ascii_digit() {
                return None;
            }
            digits.push(byte - b'0');
        }
        let point = i64::try_from(whole.len()).ok()?.checked_add(exponent)?;
        let mut decimal = Self {
            negative,
            digits,
            point,
        };
        if let Some(scale) = scale {
            decimal.round(i64::from(scale));
        }
        decimal.normalise();
        Some(decimal)
    }

    /// Digits before the point (`0.5` has none, `100` three).
    pub(crate) fn whole_digits(&self) -> i64 {
        if self.digits.is_empty() {
            0
        } else {
            self.point.max(0)
        }
    }

    /// Rounds to `scale` digits after the point, half away from zero.
    fn round(&mut self, scale: i64) {
        let Some(keep) = self.point.checked_add(scale) else {
            return;
        };
        let Ok(keep) = usize::try_from(keep) else {
            // Every digit is below half a unit of the last place kept.
            self.digits.clear();
            return;
        };
        if keep >= self.digits.len() {
            return;
        }
        let up = self.digits[keep] >= 5;
        self.digits.truncate(keep);
        if up {
            let mut at = keep;
            loop {
                if at == 0 {
                    self.digits.insert(0, 1);
                    self.point += 1;
                    break;
                }
                at -= 1;
                if self.digits[at] == 9 {
                    self.digits[at] = 0;
                } else {
                    self.digits[at] += 1;
                    break;
                }
            }
        }
    }

    fn normalise(&mut self) {
        let leading = self.digits.iter().take_while(|d| **d == 0).count();
        self.digits.drain(..leading);
        self.point -= i64::try_from(leading).unwrap_or(0);
        while self.digits.last() == Some(&0) {
            self.digits.pop();
        }
        if self.digits.is_empty() {
            self.negative = false;
            self.point = 0;
        }
    }

    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => self
                .point
                .cmp(&other.point)
                .then_with(|| self.digits.cmp(&other.digits)),
        }
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::Decimal;
    use std::cmp::Ordering;

    fn d(text: &str, scale: Option<u32>) -> Decimal {
        Decimal::parse(text, scale).unwrap()
    }

    #[test]
    fn one_value_whatever_its_text() {
        for text in ["1", "1.0", "1.000", "1e0", "0.1e1", "10E-1", "+1", "01"] {
            assert_eq!(d(text, None), d("1", None), "{text}");
        }
        for text in ["0", "-0", "0.000", "-0.0e5"] {
            assert_eq!(d(text, None), d("0", None), "{text}");
        }
        assert_ne!(d("1.001", None), d("1", None));
        assert!(Decimal::parse("", None).is_none());
        assert!(Decimal::parse("1.2.3", None).is_none());
        assert!(Decimal::parse("-", None).is_none());
    }

    #[test]
    fn rounds_to_the_scale_half_away_from_zero() {
        assert_eq!(d("1.001", Some(2)), d("1.004", Some(2)));
        assert_eq!(d("1.005", Some(2)), d("1.01", None));
        assert_eq!(d("-1.005", Some(2)), d("-1.01", None));
        assert_eq!(d("9.995", Some(2)), d("10", None));
        assert_eq!(d("0.004", Some(2)), d("0", None));
        assert_eq!(d("0.0001", Some(0)), d("0", None));
        assert_eq!(d("0.5", Some(0)), d("1", None));
        assert_eq!(d("-0.001", Some(2)), d("0", None));
        assert_eq!(
            d("12345678901234567890.123", Some(0)),
            d("12345678901234567890", None)
        );
    }

    #[test]
    fn orders_as_numbers() {
        let sorted = [
            "-10", "-1.5", "-1", "0", "0.001", "0.1", "1", "1.05", "2", "10", "1e3",
        ];
        for pair in sorted.windows(2) {
            assert_eq!(
                d(pair[0], None).cmp(&d(pair[1], None)),
                Ordering::Less,
                "{pair:?}"
            );
        }
    }
}
