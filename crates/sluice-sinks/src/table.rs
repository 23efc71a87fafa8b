//! A table as the database catalog describes it, and the SQL types a sink can write.
//!
//! The PostgreSQL adapter reads the catalog into a [`TableShape`]; everything decided from it
//! (which source fits which column, each column's checks, the statement) is decided here,
//! without I/O.

use std::fmt;

/// One table: its columns and its unique constraints and indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// The name as the sink wrote it.
    pub name: String,
    /// Its columns in table order.
    pub columns: Vec<ColumnShape>,
    /// The column sets of its unique constraints and unique indexes (without a predicate or
    /// an expression), each as written in the index.
    pub unique_keys: Vec<Vec<String>>,
    /// Those of `unique_keys` whose index is `NULLS NOT DISTINCT` (PostgreSQL 15+): a NULL
    /// in them conflicts with another NULL.
    pub nulls_not_distinct_keys: Vec<Vec<String>>,
    /// The primary key's columns, in the key's order (`None`: the table has none): the key of
    /// a sink with `columns = "auto"` that does not name one.
    pub primary_key: Option<Vec<String>>,
    /// A partitioned table (declarative partitioning): written through its parent, which
    /// cannot return a row's `xmax` (see `upsert_statement`).
    pub partitioned: bool,
}

impl TableShape {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&ColumnShape> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Whether a unique constraint or index covers exactly `columns` (in any order), which
    /// is what `ON CONFLICT (columns)` needs.
    pub fn has_unique_key(&self, columns: &[String]) -> bool {
        self.unique_keys
            .iter()
            .any(|key| same_columns(key, columns))
    }

    /// Whether a `NULLS NOT DISTINCT` unique index covers exactly `columns`: `ON CONFLICT`
    /// then fires for a NULL key too.
    pub fn nulls_not_distinct(&self, columns: &[String]) -> bool {
        self.nulls_not_distinct_keys
            .iter()
            .any(|key| same_columns(key, columns))
    }
}

/// The same set of columns, in any order.
fn same_columns(key: &[String], columns: &[String]) -> bool {
    key.len() == columns.len() && key.iter().all(|k| columns.iter().any(|c| c == k))
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnShape {
    /// The column name.
    pub name: String,
    /// Its type.
    pub sql_type: SqlType,
    /// `NOT NULL`.
    pub not_null: bool,
    /// Whether it has a default (or is an identity or generated column).
    pub has_default: bool,
    /// Whether an INSERT may give it a value (not a generated column, not an identity
    /// `GENERATED ALWAYS`).
    pub writable: bool,
    /// A `timestamp(p)`/`timestamptz(p)` column's fractional digits `p` (0–5; `None`: to the
    /// microsecond).
    pub time_precision: Option<u32>,
}

/// The SQL types a declared sink can write, with their limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlType {
    /// `smallint`.
    SmallInt,
    /// `integer`.
    Integer,
    /// `bigint`.
    BigInt,
    /// `real`.
    Real,
    /// `double precision`.
    Double,
    /// `numeric(precision, scale)`; no precision: unconstrained.
    Numeric {
        /// Total digits, if constrained.
        precision: Option<u32>,
        /// Digits after the point.
        scale: u32,
    },
    /// `money`: a decimal of two places (as `numeric(19,2)` reads it), sent as numeric and cast.
    Money,
    /// `boolean`.
    Boolean,
    /// `text`.
    Text,
    /// `varchar(n)`; `None`: no limit.
    Varchar(Option<usize>),
    /// `uuid`.
    Uuid,
    /// `timestamptz`.
    TimestampTz,
    /// `timestamp` (without time zone): stored as the UTC wall time.
    Timestamp,
    /// `jsonb`.
    Jsonb,
    /// `json`.
    Json,
    /// `date`.
    Date,
    /// `time` (without time zone).
    Time,
    /// `interval` without a fields or precision restriction.
    Interval,
    /// `bytea`.
    Bytea,
    /// `char(n)`/`bpchar`: padded with spaces to `n` characters; `None`: no limit.
    Char(Option<usize>),
    /// `inet`.
    Inet,
    /// `cidr`.
    Cidr,
    /// `citext` (the extension's case-insensitive text): its name as `format_type` writes it
    /// (qualified when its schema is not on the search path), which the statement casts its
    /// values to, so that keys compare as the column does (case-insensitively, by its index).
    Citext(String),
    /// An enum type: its name as `format_type` writes it (quoted and qualified as needed) and
    /// its labels in sort order.
    Enum {
        /// The type's name.
        name: String,
        /// Its labels.
        labels: Vec<String>,
    },
    /// A type PostgreSQL reads from its text form and sluice does not check (`PARSED_TYPES`:
    /// `timetz`, `macaddr`, `xml`, `tsvector`, the built-in ranges, …): written as a string,
    /// parsed by the server (a value it refuses is a dead letter with the server's reason).
    Parsed(String),
    /// An array of a scalar type (`bigint[]`, `text[]`).
    Array(Box<SqlType>),
    /// Any other type (named as the catalog names it): not writable by a declared sink.
    Other(String),
}

/// The built-in types (`pg_type.typname`) a sink writes as a string that PostgreSQL parses
/// ([`SqlType::Parsed`]): each has a text form of its own, which a Debezium connector (or
/// `sluice capture`) sends as a string.
pub const PARSED_TYPES: &[&str] = &[
    "timetz",
    "macaddr",
    "macaddr8",
    "xml",
    "tsvector",
    "tsquery",
    "int4range",
    "int8range",
    "numrange",
    "tsrange",
    "tstzrange",
    "daterange",
    "int4multirange",
    "int8multirange",
    "nummultirange",
    "tsmultirange",
    "tstzmultirange",
    "datemultirange",
    "pg_lsn",
];

impl SqlType {
    /// The type from the catalog: `pg_type.typname` of the column (or of the array's
    /// element, `element`) and `atttypmod`.
    pub fn from_catalog(typname: &str, element: Option<&str>, typmod: i32) -> SqlType {
        if let Some(element) = element {
            let inner = SqlType::from_catalog(element, None, typmod);
            return match inner {
                SqlType::Array(_) | SqlType::Other(_) | SqlType::Json | SqlType::Jsonb => {
                    SqlType::Other(format!("{element}[]"))
                }
                inner => SqlType::Array(Box::new(inner)),
            };
        }
        // VARCHAR, CHAR and NUMERIC keep their modifier offset by VARHDRSZ (4).
        let modifier = (typmod >= 4).then(|| typmod - 4);
        match typname {
            "int2" => SqlType::SmallInt,
            "int4" => SqlType::Integer,
            "int8" => SqlType::BigInt,
            "float4" => SqlType::Real,
            "float8" => SqlType::Double,
            "numeric" => {
                let precision = modifier.map(|m| ((m >> 16) & 0xffff).unsigned_abs());
                // The scale is 11 bits, signed (PostgreSQL 15 allows `numeric(3,-2)`).
                let scale = modifier.map_or(0, |m| {
                    let bits = m & 0x7ff;
                    if bits & 0x400 == 0 {
                        bits
                    } else {
                        bits - 0x800
                    }
                });
                match (precision, u32::try_from(scale)) {
                    (Some(p), Ok(s)) if s <= p => SqlType::Numeric {
                        precision: Some(p),
                        scale: s,
                    },
                    (None, _) => SqlType::Numeric {
                        precision: None,
                        scale: 0,
                    },
                    _ => SqlType::Other(format!(
                        "numeric({},{scale}) (a negative scale or one above the precision)",
                        precision.unwrap_or(0)
                    )),
                }
            }
            "money" => SqlType::Money,
            "bool" => SqlType::Boolean,
            "text" => SqlType::Text,
            "varchar" => SqlType::Varchar(modifier.and_then(|m| usize::try_from(m).ok())),
            "uuid" => SqlType::Uuid,
            "timestamptz" => SqlType::TimestampTz,
            "timestamp" => SqlType::Timestamp,
            "jsonb" => SqlType::Jsonb,
            "json" => SqlType::Json,
            "date" => SqlType::Date,
            "time" => SqlType::Time,
            // A fields restriction (`interval day to second`) or a precision would store a
            // value other than the record's.
            "interval" if typmod < 0 => SqlType::Interval,
            "interval" => SqlType::Other("interval with a fields or precision restriction".into()),
            "bytea" => SqlType::Bytea,
            "bpchar" => SqlType::Char(modifier.and_then(|m| usize::try_from(m).ok())),
            "inet" => SqlType::Inet,
            "cidr" => SqlType::Cidr,
            "citext" => SqlType::Citext("citext".to_owned()),
            parsed if PARSED_TYPES.contains(&parsed) => SqlType::Parsed(parsed.to_owned()),
            other => SqlType::Other(other.to_owned()),
        }
    }

    /// The element type of the `UNNEST($n::<type>[])` parameter. Arrays travel as one
    /// `jsonb` per row (`UNNEST` cannot carry a ragged array of arrays) and are rebuilt. A
    /// `citext` travels as `text`, cast to the column's type by [`SqlType::param_array`].
    pub fn param_type(&self) -> Option<&str> {
        Some(match self {
            SqlType::SmallInt => "smallint",
            SqlType::Integer => "int",
            SqlType::BigInt => "bigint",
            SqlType::Real => "float4",
            SqlType::Double => "float8",
            // A money travels as numeric, cast by [`SqlType::param_array`]: money's own input
            // reads the decimal point from `lc_monetary`, numeric's does not.
            SqlType::Numeric { .. } | SqlType::Money => "numeric",
            SqlType::Boolean => "bool",
            SqlType::Text => "text",
            SqlType::Varchar(_) => "varchar",
            SqlType::Uuid => "uuid",
            SqlType::TimestampTz => "timestamptz",
            SqlType::Timestamp => "timestamp",
            SqlType::Jsonb | SqlType::Array(_) => "jsonb",
            SqlType::Json => "json",
            SqlType::Date => "date",
            SqlType::Time => "time",
            SqlType::Interval => "interval",
            SqlType::Bytea => "bytea",
            SqlType::Char(_) => "bpchar",
            SqlType::Inet => "inet",
            SqlType::Cidr => "cidr",
            SqlType::Citext(_) => "text",
            SqlType::Enum { name, .. } | SqlType::Parsed(name) => name,
            SqlType::Other(_) => return None,
        })
    }

    /// The type a statement casts its `UNNEST` parameter of this column to: the array of
    /// [`SqlType::param_type`] (`text` for a type without one), a money's numbers cast on to
    /// `money[]` and a citext's texts to `citext[]` (as the column's own type, for `CASE`s
    /// and comparisons with stored values: a citext key compares case-insensitively, by the
    /// column's index).
    pub fn param_array(&self) -> String {
        match self {
            SqlType::Money => "numeric[]::money[]".to_owned(),
            SqlType::Citext(name) => format!("text[]::{name}[]"),
            other => format!("{}[]", other.item_cast()),
        }
    }

    /// The equality operator a statement compares two keys of this type by: `=`, or for a
    /// `citext` whose schema is not on the search path the extension's own, qualified
    /// (`OPERATOR(ext.=)`): an unqualified `=` would find only text's, case-sensitive and not
    /// the one the column's index serves.
    pub fn equality(&self) -> String {
        match self {
            SqlType::Citext(name) => match name.rsplit_once('.') {
                Some((schema, _)) => format!("OPERATOR({schema}.=)"),
                None => "=".to_owned(),
            },
            _ => "=".to_owned(),
        }
    }

    /// The type an array item of this type is cast to from its JSON text: a money through
    /// numeric (money's input reads the decimal point from `lc_monetary`), a type the server
    /// parses by its `pg_catalog` name (no type of another schema on the `search_path` takes
    /// its place).
    pub fn item_cast(&self) -> String {
        match self {
            SqlType::Money => "numeric::money".to_owned(),
            SqlType::Parsed(name) => format!("pg_catalog.{name}"),
            other => other.param_type().unwrap_or("text").to_owned(),
        }
    }

    /// The integer range of an integer type.
    pub fn int_range(&self) -> Option<(i64, i64)> {
        match self {
            SqlType::SmallInt => Some((i16::MIN.into(), i16::MAX.into())),
            SqlType::Integer => Some((i32::MIN.into(), i32::MAX.into())),
            SqlType::BigInt => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }

    /// Whether numbers go in it.
    pub fn is_numeric(&self) -> bool {
        self.int_range().is_some()
            || matches!(self, SqlType::Real | SqlType::Double)
            || self.is_decimal()
    }

    /// Whether its values are decimals read digit for digit (`numeric`, `money`).
    pub fn is_decimal(&self) -> bool {
        matches!(self, SqlType::Numeric { .. } | SqlType::Money)
    }

    /// Whether text goes in it.
    pub fn is_text(&self) -> bool {
        matches!(
            self,
            SqlType::Text | SqlType::Varchar(_) | SqlType::Citext(_)
        )
    }

    /// Whether sluice orders its values as PostgreSQL does, so that a newest-wins column of
    /// this type picks the same newest version in a batch as the statement does (text orders
    /// by a collation, an enum by its sort order, JSON and arrays by rules of their own).
    pub fn ordered_as_postgres(&self) -> bool {
        self.is_numeric()
            || matches!(
                self,
                SqlType::Boolean
                    | SqlType::Uuid
                    | SqlType::TimestampTz
                    | SqlType::Timestamp
                    | SqlType::Date
                    | SqlType::Time
                    | SqlType::Interval
            )
    }
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlType::SmallInt => f.write_str("smallint"),
            SqlType::Integer => f.write_str("integer"),
            SqlType::BigInt => f.write_str("bigint"),
            SqlType::Real => f.write_str("real"),
            SqlType::Double => f.write_str("double precision"),
            SqlType::Numeric {
                precision: Some(p),
                scale,
            } => write!(f, "numeric({p},{scale})"),
            SqlType::Numeric {
                precision: None, ..
            } => f.write_str("numeric"),
            SqlType::Money => f.write_str("money"),
            SqlType::Boolean => f.write_str("boolean"),
            SqlType::Text => f.write_str("text"),
            SqlType::Varchar(Some(n)) => write!(f, "varchar({n})"),
            SqlType::Varchar(None) => f.write_str("varchar"),
            SqlType::Uuid => f.write_str("uuid"),
            SqlType::TimestampTz => f.write_str("timestamptz"),
            SqlType::Timestamp => f.write_str("timestamp"),
            SqlType::Jsonb => f.write_str("jsonb"),
            SqlType::Json => f.write_str("json"),
            SqlType::Date => f.write_str("date"),
            SqlType::Time => f.write_str("time"),
            SqlType::Interval => f.write_str("interval"),
            SqlType::Bytea => f.write_str("bytea"),
            SqlType::Char(Some(n)) => write!(f, "character({n})"),
            SqlType::Char(None) => f.write_str("bpchar"),
            SqlType::Inet => f.write_str("inet"),
            SqlType::Cidr => f.write_str("cidr"),
            SqlType::Citext(_) => f.write_str("citext"),
            SqlType::Enum { name, .. } | SqlType::Parsed(name) => f.write_str(name),
            SqlType::Array(inner) => write!(f, "{inner}[]"),
            SqlType::Other(name) => f.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SqlType;

    #[test]
    fn catalog_types_and_modifiers() {
        assert_eq!(
            SqlType::from_catalog("varchar", None, 259),
            SqlType::Varchar(Some(255))
        );
        assert_eq!(
            SqlType::from_catalog("varchar", None, -1),
            SqlType::Varchar(None)
        );
        // numeric(10,2): ((10 << 16) | 2) + 4
        assert_eq!(
            SqlType::from_catalog("numeric", None, (10 << 16 | 2) + 4),
            SqlType::Numeric {
                precision: Some(10),
                scale: 2
            }
        );
        assert_eq!(
            SqlType::from_catalog("_int8", Some("int8"), -1),
            SqlType::Array(Box::new(SqlType::BigInt))
        );
        // numeric(3,-2) and numeric(3,5): PostgreSQL 15 allows both; sluice refuses them.
        assert_eq!(
            SqlType::from_catalog("numeric", None, ((3 << 16) | 0x7fe) + 4).param_type(),
            None
        );
        assert_eq!(
            SqlType::from_catalog("numeric", None, ((3 << 16) | 5) + 4).param_type(),
            None
        );
        assert_eq!(
            SqlType::from_catalog("bpchar", None, 8),
            SqlType::Char(Some(4))
        );
        assert_eq!(
            SqlType::from_catalog("interval", None, -1),
            SqlType::Interval
        );
        // `interval day to second`: refused, it would drop the record's months.
        assert_eq!(
            SqlType::from_catalog("interval", None, 0x7fff_0000).param_type(),
            None
        );
        assert_eq!(SqlType::from_catalog("point", None, -1).param_type(), None);
        // The server parses them from a string; a money is a decimal cast from its text.
        for parsed in ["timetz", "macaddr", "xml", "tstzrange", "pg_lsn"] {
            let kind = SqlType::from_catalog(parsed, None, -1);
            assert_eq!(kind, SqlType::Parsed(parsed.to_owned()));
            assert_eq!(kind.param_type(), Some(parsed));
            assert!(!kind.ordered_as_postgres() && !kind.is_text(), "{parsed}");
        }
        let money = SqlType::from_catalog("money", None, -1);
        assert_eq!(
            (money.param_type(), money.is_decimal(), money.param_array()),
            (Some("numeric"), true, "numeric[]::money[]".to_owned())
        );
        assert_eq!(SqlType::Inet.param_array(), "inet[]");
        assert_eq!(
            SqlType::Parsed("macaddr".into()).param_array(),
            "pg_catalog.macaddr[]"
        );
        assert_eq!(
            SqlType::from_catalog("_macaddr", Some("macaddr"), -1).to_string(),
            "macaddr[]"
        );
        assert_eq!(
            SqlType::Array(Box::new(SqlType::Text)).to_string(),
            "text[]"
        );
        // A citext travels as text, cast to the column's type (by its name as the catalog
        // writes it); keys compare by the extension's `=`, qualified when its schema is not
        // on the search path.
        let visible = SqlType::Citext("citext".into());
        assert_eq!(
            (
                visible.param_type(),
                visible.param_array(),
                visible.equality()
            ),
            (Some("text"), "text[]::citext[]".to_owned(), "=".to_owned())
        );
        let elsewhere = SqlType::Citext("\"ext s\".citext".into());
        assert_eq!(
            (elsewhere.param_array(), elsewhere.equality()),
            (
                "text[]::\"ext s\".citext[]".to_owned(),
                "OPERATOR(\"ext s\".=)".to_owned()
            )
        );
        assert_eq!(SqlType::Text.equality(), "=");
    }
}
