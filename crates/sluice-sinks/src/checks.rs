//! Each column's checks, derived from its type in the catalog, NOT NULL and the declared
//! rules: what a decoder must verify so that the table never rejects a decoded value.

use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

use super::table::SqlType;

/// A number bound of a value rule.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(
    untagged,
    expecting = "`min` and `max` are numbers (an integer or a float)"
)]
pub enum Bound {
    /// An integer bound.
    Int(i64),
    /// A float bound.
    Float(f64),
}

impl Bound {
    /// The bound as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            #[allow(
                clippy::cast_precision_loss,
                reason = "a bound is compared, not stored"
            )]
            Self::Int(int) => int as f64,
            Self::Float(float) => float,
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(int) => write!(f, "{int}"),
            Self::Float(float) => write!(f, "{float}"),
        }
    }
}

/// Rules declared on a column on top of its own limits (for an array: per element, except
/// the counts).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ValueRules {
    /// Smallest number allowed.
    pub min: Option<Bound>,
    /// Largest number allowed.
    pub max: Option<Bound>,
    /// Fewest characters.
    pub min_length: Option<usize>,
    /// Most characters.
    pub max_length: Option<usize>,
    /// Exact element count of an array.
    pub items: Option<usize>,
    /// Most elements of an array.
    pub max_items: Option<usize>,
}

/// Most characters of a Kafka topic name.
pub const MAX_TOPIC_CHARS: usize = 249;

/// One check a value must pass before it is written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Check {
    /// The field must be present and not null (NOT NULL without a default, or `required`).
    Required,
    /// An absent or null field is written as NULL.
    NullWhenAbsent,
    /// A string without U+0000 of `min..=max` characters (`max = None`: no limit).
    Text {
        /// Fewest characters.
        min: usize,
        /// Most characters.
        max: Option<usize>,
    },
    /// A JSON integer in `lo..=hi` (the type's range, narrowed by declared rules).
    Integer {
        /// The SQL type named in reasons (`SMALLINT`).
        sql_type: &'static str,
        /// Smallest value.
        lo: i64,
        /// Largest value.
        hi: i64,
    },
    /// A finite JSON number, within the declared bounds.
    Number {
        /// Smallest value.
        min: Option<Bound>,
        /// Largest value.
        max: Option<Bound>,
    },
    /// At most `precision - scale` digits before the point; rounded to `scale` after it.
    NumericDigits {
        /// Total digits.
        precision: u32,
        /// Digits after the point.
        scale: u32,
    },
    /// A number a `real` holds: finite and not below its smallest value once rounded to
    /// single precision (`1e39` overflows, `1e-50` underflows to zero).
    Single,
    /// A UUID string.
    Uuid,
    /// An RFC 3339 timestamp; no offset means UTC; kept to the microsecond.
    Timestamp {
        /// Stored without a zone (`timestamp`): the UTC wall time.
        naive: bool,
    },
    /// A JSON boolean.
    Boolean,
    /// A date string `YYYY-MM-DD`.
    Date,
    /// A time-of-day string `HH:MM:SS[.ffffff]`.
    Time,
    /// An ISO 8601 duration string (`P1DT2H`).
    Interval,
    /// Bytes as a base64 string.
    Bytes,
    /// A string without U+0000 for a `char(n)`: at most `n` characters besides trailing
    /// spaces (`None`: no limit); it is stored padded with spaces to `n`.
    Padded(Option<usize>),
    /// A network address string; for a `cidr` (`network`), without host bits.
    Address {
        /// A `cidr` column.
        network: bool,
    },
    /// A label of an enum type, as `pg_enum` lists them.
    Label {
        /// The enum type.
        type_name: String,
        /// Its labels.
        labels: Vec<String>,
    },
    /// Any JSON value (without U+0000 in strings).
    Json,
    /// A JSON array of exactly this many elements.
    Items(usize),
    /// A JSON array of at most this many elements.
    MaxItems(usize),
    /// A JSON array (of any length).
    Array,
    /// Applies to each element of the array.
    Each(Box<Check>),
    /// The array may hold NULL elements, as a PostgreSQL array may: its column sets no rule
    /// on its elements (`min`, `max`, `min_length`, `max_length`), which a NULL could not
    /// meet.
    NullItems,
    /// The value must be a key of `table.column`; otherwise a dead letter of `kind`.
    Known {
        /// `table.column`.
        key: String,
        /// The dead-letter kind.
        kind: String,
    },
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Required => f.write_str("required"),
            Check::NullWhenAbsent => f.write_str("NULL when absent"),
            Check::Text {
                min,
                max: Some(max),
            } => write!(f, "text of {min}..{max} characters"),
            Check::Text { min: 0, max: None } => f.write_str("text without U+0000"),
            Check::Text { min, max: None } => write!(f, "text of at least {min} characters"),
            Check::Integer { sql_type, lo, hi } => write!(f, "{sql_type} integer {lo}..{hi}"),
            Check::Number { min, max } => {
                f.write_str("finite number")?;
                match (min, max) {
                    (Some(lo), Some(hi)) => write!(f, " {lo}..{hi}"),
                    (Some(lo), None) => write!(f, " >= {lo}"),
                    (None, Some(hi)) => write!(f, " <= {hi}"),
                    (None, None) => Ok(()),
                }
            }
            Check::NumericDigits { precision, scale } => write!(
                f,
                "at most {} digits before the point, rounded to {scale} after",
                precision - scale
            ),
            Check::Single => f.write_str("within single precision"),
            Check::Uuid => f.write_str("UUID"),
            Check::Timestamp { naive: false } => f.write_str("RFC 3339 timestamp (naive = UTC)"),
            Check::Timestamp { naive: true } => {
                f.write_str("RFC 3339 timestamp (naive = UTC), stored as UTC wall time")
            }
            Check::Boolean => f.write_str("boolean"),
            Check::Date => f.write_str("date YYYY-MM-DD"),
            Check::Time => f.write_str("time HH:MM:SS[.ffffff]"),
            Check::Interval => f.write_str("ISO 8601 duration"),
            Check::Bytes => f.write_str("base64 bytes"),
            Check::Padded(Some(n)) => {
                write!(
                    f,
                    "text of at most {n} characters, padded with spaces to {n}"
                )
            }
            Check::Padded(None) => f.write_str("text without U+0000, trailing spaces dropped"),
            Check::Address { network: false } => f.write_str("IP address with optional /prefix"),
            Check::Address { network: true } => f.write_str("IP network without host bits"),
            Check::Label { type_name, labels } => {
                write!(f, "a label of enum {type_name} ({})", labels.join(", "))
            }
            Check::Json => f.write_str("any JSON value without U+0000"),
            Check::Items(n) => write!(f, "array of exactly {n} elements"),
            Check::MaxItems(n) => write!(f, "array of at most {n} elements"),
            Check::Array => f.write_str("array"),
            Check::Each(inner) => write!(f, "each element: {inner}"),
            Check::NullItems => f.write_str("NULL elements allowed"),
            Check::Known { key, kind } => write!(f, "known in {key} (else dead letter {kind})"),
        }
    }
}

impl Serialize for Check {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The checks of a value of `sql_type` under `rules` (without the presence check).
pub fn value_checks(sql_type: &SqlType, rules: &ValueRules) -> Vec<Check> {
    match sql_type {
        SqlType::Array(inner) => array_checks(inner, rules),
        SqlType::Text | SqlType::Varchar(_) | SqlType::Citext(_) => {
            vec![text_check(sql_type, rules)]
        }
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt => {
            vec![integer_check(sql_type, rules)]
        }
        SqlType::Real => vec![
            Check::Number {
                min: rules.min,
                max: rules.max,
            },
            Check::Single,
        ],
        SqlType::Double => vec![Check::Number {
            min: rules.min,
            max: rules.max,
        }],
        SqlType::Numeric { precision, scale } => {
            let mut checks = vec![Check::Number {
                min: rules.min,
                max: rules.max,
            }];
            if let Some(precision) = precision {
                checks.push(Check::NumericDigits {
                    precision: *precision,
                    scale: *scale,
                });
            }
            checks
        }
        // Two places; the server refuses what is past its 64-bit range.
        SqlType::Money => vec![
            Check::Number {
                min: rules.min,
                max: rules.max,
            },
            Check::NumericDigits {
                precision: 19,
                scale: 2,
            },
        ],
        SqlType::Boolean => vec![Check::Boolean],
        SqlType::Uuid => vec![Check::Uuid],
        SqlType::TimestampTz => vec![Check::Timestamp { naive: false }],
        SqlType::Timestamp => vec![Check::Timestamp { naive: true }],
        SqlType::Json | SqlType::Jsonb => vec![Check::Json],
        SqlType::Date => vec![Check::Date],
        SqlType::Time => vec![Check::Time],
        SqlType::Interval => vec![Check::Interval],
        SqlType::Bytea => vec![Check::Bytes],
        SqlType::Char(limit) => vec![Check::Padded(*limit)],
        SqlType::Inet => vec![Check::Address { network: false }],
        SqlType::Cidr => vec![Check::Address { network: true }],
        SqlType::Enum { name, labels } => vec![Check::Label {
            type_name: name.clone(),
            labels: labels.clone(),
        }],
        // The server parses it: only its length is checked here, as a text's.
        SqlType::Parsed(_) => vec![text_check(sql_type, rules)],
        SqlType::Other(_) => Vec::new(),
    }
}

/// The checks of an array of `inner`: its element count by `rules`, then each element's
/// checks under the rules that are not about the count.
fn array_checks(inner: &SqlType, rules: &ValueRules) -> Vec<Check> {
    let mut checks = vec![match (rules.items, rules.max_items) {
        (Some(n), _) => Check::Items(n),
        (None, Some(n)) => Check::MaxItems(n),
        (None, None) => Check::Array,
    }];
    let element = ValueRules {
        items: None,
        max_items: None,
        ..*rules
    };
    checks.extend(
        value_checks(inner, &element)
            .into_iter()
            .map(|c| Check::Each(Box::new(c))),
    );
    let element_rules = [rules.min.is_some(), rules.max.is_some()]
        .into_iter()
        .chain([rules.min_length.is_some(), rules.max_length.is_some()]);
    if !element_rules.into_iter().any(|set| set) {
        checks.push(Check::NullItems);
    }
    checks
}

/// The check of a text type: its length within `rules` and a `varchar(n)`'s limit.
fn text_check(sql_type: &SqlType, rules: &ValueRules) -> Check {
    let limit = match sql_type {
        SqlType::Varchar(limit) => *limit,
        _ => None,
    };
    let max = match (limit, rules.max_length) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Check::Text {
        min: rules.min_length.unwrap_or(0),
        max,
    }
}

/// The check of an integer type: `rules`' bounds intersected with the type's range.
fn integer_check(sql_type: &SqlType, rules: &ValueRules) -> Check {
    let (type_lo, type_hi) = sql_type.int_range().unwrap_or((i64::MIN, i64::MAX));
    let sql = match sql_type {
        SqlType::SmallInt => "SMALLINT",
        SqlType::Integer => "INTEGER",
        _ => "BIGINT",
    };
    Check::Integer {
        sql_type: sql,
        lo: int_bound(rules.min, true).map_or(type_lo, |b| b.max(type_lo)),
        hi: int_bound(rules.max, false).map_or(type_hi, |b| b.min(type_hi)),
    }
}

/// A declared bound as an integer bound: a fraction rounds inwards.
fn int_bound(bound: Option<Bound>, lower: bool) -> Option<i64> {
    bound.map(|b| match b {
        Bound::Int(int) => int,
        #[allow(clippy::cast_possible_truncation, reason = "saturating float to int")]
        Bound::Float(float) if lower => float.ceil() as i64,
        #[allow(clippy::cast_possible_truncation, reason = "saturating float to int")]
        Bound::Float(float) => float.floor() as i64,
    })
}

/// Which declared rules make no sense for `sql_type` (a length on a number, …).
pub fn misplaced_rules(sql_type: &SqlType, rules: &ValueRules) -> Vec<&'static str> {
    let (is_array, element) = match sql_type {
        SqlType::Array(inner) => (true, inner.as_ref()),
        other => (false, other),
    };
    let mut misplaced = Vec::new();
    if !element.is_numeric() {
        if rules.min.is_some() {
            misplaced.push("min");
        }
        if rules.max.is_some() {
            misplaced.push("max");
        }
    }
    if !element.is_text() {
        if rules.min_length.is_some() {
            misplaced.push("min_length");
        }
        if rules.max_length.is_some() {
            misplaced.push("max_length");
        }
    }
    if !is_array {
        if rules.items.is_some() {
            misplaced.push("items");
        }
        if rules.max_items.is_some() {
            misplaced.push("max_items");
        }
    }
    misplaced
}
