//! A WAL position (log sequence number), as PostgreSQL prints it: `16/B374D848`.

use std::fmt;
use std::str::FromStr;

/// A position in the write-ahead log. Ordered: a later change has a greater LSN.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

/// `Lsn(16/B374D848)`: the form PostgreSQL's views and logs print.
impl fmt::Debug for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lsn({self})")
    }
}

impl Lsn {
    /// `0/0`: no position (START_REPLICATION from it resumes at the slot's confirmed LSN).
    pub const ZERO: Lsn = Lsn(0);
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// The text is not `HIGH/LOW` in hexadecimal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an LSN (HIGH/LOW in hexadecimal): {0:?}")]
pub struct LsnParseError(String);

impl FromStr for Lsn {
    type Err = LsnParseError;

    fn from_str(text: &str) -> Result<Lsn, LsnParseError> {
        let bad = || LsnParseError(text.to_owned());
        let (high, low) = text.split_once('/').ok_or_else(bad)?;
        let high = u32::from_str_radix(high, 16).map_err(|_| bad())?;
        let low = u32::from_str_radix(low, 16).map_err(|_| bad())?;
        Ok(Lsn((u64::from(high) << 32) | u64::from(low)))
    }
}

impl From<pgwire_replication::Lsn> for Lsn {
    fn from(lsn: pgwire_replication::Lsn) -> Lsn {
        Lsn(lsn.as_u64())
    }
}

impl From<Lsn> for pgwire_replication::Lsn {
    fn from(lsn: Lsn) -> pgwire_replication::Lsn {
        pgwire_replication::Lsn::from_u64(lsn.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prints_and_parses_like_postgresql() {
        let lsn: Lsn = "16/B374D848".parse().unwrap();
        assert_eq!(lsn, Lsn(0x16_B374_D848));
        assert_eq!(lsn.to_string(), "16/B374D848");
        assert_eq!(Lsn::ZERO.to_string(), "0/0");
        assert_eq!(format!("{lsn:?}"), "Lsn(16/B374D848)");
        assert!("16B374D848".parse::<Lsn>().is_err());
        assert!("1/G".parse::<Lsn>().is_err());
    }

    proptest! {
        #[test]
        fn round_trips(n in any::<u64>()) {
            prop_assert_eq!(Lsn(n).to_string().parse::<Lsn>(), Ok(Lsn(n)));
        }
    }
}
