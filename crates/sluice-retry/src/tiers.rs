//! Retry tiers: the delays a failed record waits before its next attempt, parsed from a
//! setting such as `30s,2m,5m`.

use std::time::Duration;

/// The tiers when none are configured.
pub const DEFAULT_TIERS: &str = "30s,2m,5m";

/// The most tiers a setting may list (each is a topic and a consumer).
const MAX_TIERS: usize = 10;

/// One delay tier: its label (as written, e.g. `30s`; it names the topic and group) and its
/// delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    label: String,
    delay: Duration,
}

impl Tier {
    /// The label, e.g. `30s`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// How long a record waits in this tier before its next attempt.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

/// The tiers in order: a record that fails goes from one to the next, then to the
/// dead-letter topic. Never empty; delays strictly increasing, labels distinct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tiers(Vec<Tier>);

/// Why a tier setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TierError {
    /// Nothing listed.
    #[error("no retry tier listed; expected delays like \"30s,2m,5m\"")]
    Empty,
    /// More tiers than allowed.
    #[error("{0} retry tiers listed; at most {MAX_TIERS}")]
    TooMany(usize),
    /// A tier that is not `<number><unit>`.
    #[error(
        "retry tier `{0}` is not a delay: expected a positive whole number and a unit \
         ms, s, m or h (e.g. 30s, 2m)"
    )]
    Invalid(String),
    /// A delay not longer than the tier before it.
    #[error("retry tier `{tier}` is not longer than the tier before it (`{previous}`)")]
    NotIncreasing {
        /// The tier.
        tier: String,
        /// The tier before it.
        previous: String,
    },
}

impl Tiers {
    /// Parses a comma-separated list of delays, e.g. `30s,2m,5m` (units `ms`, `s`, `m`,
    /// `h`; spaces around entries are ignored).
    pub fn parse(setting: &str) -> Result<Tiers, TierError> {
        let entries: Vec<&str> = setting
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.is_empty() {
            return Err(TierError::Empty);
        }
        if entries.len() > MAX_TIERS {
            return Err(TierError::TooMany(entries.len()));
        }
        let mut tiers: Vec<Tier> = Vec::with_capacity(entries.len());
        for entry in entries {
            let tier = parse_tier(entry)?;
            if let Some(previous) = tiers.last()
                && tier.delay <= previous.delay
            {
                return Err(TierError::NotIncreasing {
                    tier: tier.label,
                    previous: previous.label.clone(),
                });
            }
            tiers.push(tier);
        }
        Ok(Tiers(tiers))
    }

    /// The tiers in order.
    pub fn as_slice(&self) -> &[Tier] {
        &self.0
    }

    /// Tier `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&Tier> {
        self.0.get(index)
    }

    /// How many tiers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a `Tiers` holds at least one tier.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Default for Tiers {
    /// 30 s, 2 min, 5 min.
    fn default() -> Self {
        Tiers(vec![
            Tier {
                label: "30s".into(),
                delay: Duration::from_secs(30),
            },
            Tier {
                label: "2m".into(),
                delay: Duration::from_secs(120),
            },
            Tier {
                label: "5m".into(),
                delay: Duration::from_secs(300),
            },
        ])
    }
}

fn parse_tier(entry: &str) -> Result<Tier, TierError> {
    let invalid = || TierError::Invalid(entry.to_owned());
    let split = entry
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(invalid)?;
    let (number, unit) = entry.split_at(split);
    let number: u64 = number.parse().map_err(|_| invalid())?;
    let delay = match unit {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.checked_mul(60).ok_or_else(invalid)?),
        "h" => Duration::from_secs(number.checked_mul(3600).ok_or_else(invalid)?),
        _ => return Err(invalid()),
    };
    if delay.is_zero() {
        return Err(invalid());
    }
    Ok(Tier {
        label: entry.to_owned(),
        delay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delays(setting: &str) -> Vec<(String, Duration)> {
        Tiers::parse(setting)
            .unwrap_or_else(|e| panic!("{setting}: {e}"))
            .as_slice()
            .iter()
            .map(|t| (t.label().to_owned(), t.delay()))
            .collect()
    }

    #[test]
    fn parses_the_default_and_short_test_tiers() {
        assert_eq!(
            Tiers::parse(DEFAULT_TIERS).unwrap_or_else(|e| panic!("{e}")),
            Tiers::default()
        );
        assert_eq!(
            delays(" 1s, 2s ,3s"),
            vec![
                ("1s".into(), Duration::from_secs(1)),
                ("2s".into(), Duration::from_secs(2)),
                ("3s".into(), Duration::from_secs(3)),
            ]
        );
        assert_eq!(
            delays("500ms,1h"),
            vec![
                ("500ms".into(), Duration::from_millis(500)),
                ("1h".into(), Duration::from_secs(3600)),
            ]
        );
    }

    #[test]
    fn refuses_bad_settings_with_a_clear_error() {
        let cases: [(&str, TierError); 8] = [
            ("", TierError::Empty),
            (" , ", TierError::Empty),
            ("30", TierError::Invalid("30".into())),
            ("s", TierError::Invalid("s".into())),
            ("0s", TierError::Invalid("0s".into())),
            ("-5s", TierError::Invalid("-5s".into())),
            ("2 m", TierError::Invalid("2 m".into())),
            (
                "2m,30s",
                TierError::NotIncreasing {
                    tier: "30s".into(),
                    previous: "2m".into(),
                },
            ),
        ];
        for (setting, expected) in cases {
            assert_eq!(Tiers::parse(setting), Err(expected), "{setting:?}");
        }
        assert_eq!(
            Tiers::parse("60s,1m"),
            Err(TierError::NotIncreasing {
                tier: "1m".into(),
                previous: "60s".into()
            })
        );
        assert_eq!(
            Tiers::parse("1s,2s,3s,4s,5s,6s,7s,8s,9s,10s,11s"),
            Err(TierError::TooMany(11))
        );
        let message = Tiers::parse("5x").map(|_| ()).unwrap_err().to_string();
        assert!(
            message.contains("`5x`") && message.contains("30s"),
            "{message}"
        );
    }
}
