//! The source schema of `tests/replicate_schema.rs` (which includes this file by path): 20
//! tables, each a different mix of the types a `debezium` sink reads, keys of one and of two
//! columns, one partitioned by hash, one named `order`; a 21st created mid-run; and how the
//! workload makes each type's values and writes a row.

use Ty::*;
use rand::Rng;
use rand::rngs::StdRng;
use sqlx::PgConnection;

/// A column type, with how the workload makes its values.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    BigInt,
    Int,
    SmallInt,
    Text,
    Varchar(usize),
    Numeric(u32, u32),
    Bool,
    Jsonb,
    Date,
    Time,
    Timestamp,
    Timestamptz,
    Uuid,
    Bytea,
    Double,
    /// An array (the generated values hold no NULL elements).
    IntArray,
    TextArray,
    /// A text of 2.5-4 kB that PostgreSQL stores out of line (TOAST).
    Big,
}

impl Ty {
    pub fn sql(self) -> String {
        match self {
            Ty::BigInt => "bigint".into(),
            Ty::Int => "integer".into(),
            Ty::SmallInt => "smallint".into(),
            Ty::Text | Ty::Big => "text".into(),
            Ty::Varchar(n) => format!("varchar({n})"),
            Ty::Numeric(p, s) => format!("numeric({p},{s})"),
            Ty::Bool => "boolean".into(),
            Ty::Jsonb => "jsonb".into(),
            Ty::Date => "date".into(),
            Ty::Time => "time".into(),
            Ty::Timestamp => "timestamp".into(),
            Ty::Timestamptz => "timestamptz".into(),
            Ty::Uuid => "uuid".into(),
            Ty::Bytea => "bytea".into(),
            Ty::Double => "double precision".into(),
            Ty::IntArray => "integer[]".into(),
            Ty::TextArray => "text[]".into(),
        }
    }

    /// A key part made from `m` (distinct `m`, distinct values).
    pub fn key(self, m: i64) -> String {
        match self {
            Ty::BigInt | Ty::Int | Ty::SmallInt => m.to_string(),
            Ty::Text => format!("k-{m}"),
            Ty::Varchar(_) => format!("v{m}"),
            Ty::Uuid => format!("00000000-0000-4000-8000-{m:012x}"),
            Ty::Date => (chrono::NaiveDate::from_ymd_opt(2000, 1, 1).unwrap()
                + chrono::TimeDelta::days(m))
            .to_string(),
            other => panic!("{other:?} is no key type here"),
        }
    }

    /// A random value as text PostgreSQL casts to the type; `None` is NULL (10 %).
    pub fn value(self, rng: &mut StdRng) -> Option<String> {
        if rng.random_bool(0.1) {
            return None;
        }
        Some(match self {
            Ty::BigInt => match rng.random_range(0..3) {
                0 => rng.random::<i64>().to_string(),
                _ => rng.random_range(-1000..1000).to_string(),
            },
            Ty::Int => rng.random::<i32>().to_string(),
            Ty::SmallInt => rng.random::<i16>().to_string(),
            Ty::Text => words(rng),
            Ty::Varchar(n) => {
                let len = rng.random_range(0..=n);
                let alphabet: Vec<char> = "abcxyz 019'\"\\|,✓é€".chars().collect();
                (0..len)
                    .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                    .collect()
            }
            Ty::Numeric(p, s) => {
                let int_digits = rng.random_range(1..=p - s);
                let int: String = (0..int_digits)
                    .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                    .collect();
                let frac: String = (0..s)
                    .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                    .collect();
                let sign = if rng.random_bool(0.3) { "-" } else { "" };
                if s == 0 {
                    format!("{sign}{int}")
                } else {
                    format!("{sign}{int}.{frac}")
                }
            }
            Ty::Bool => rng.random_bool(0.5).to_string(),
            Ty::Jsonb => json(rng),
            Ty::Date => {
                let at = chrono::DateTime::from_timestamp_micros(micros(rng)).unwrap();
                at.format("%Y-%m-%d").to_string()
            }
            Ty::Time => {
                let micros = rng.random_range(0..86_400_000_000i64);
                format!(
                    "{:02}:{:02}:{:02}.{:06}",
                    micros / 3_600_000_000,
                    micros / 60_000_000 % 60,
                    micros / 1_000_000 % 60,
                    micros % 1_000_000
                )
            }
            Ty::Timestamp => {
                let at = chrono::DateTime::from_timestamp_micros(micros(rng)).unwrap();
                at.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
            }
            Ty::Timestamptz => {
                let at = chrono::DateTime::from_timestamp_micros(micros(rng)).unwrap();
                at.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string()
            }
            Ty::Uuid => uuid::Uuid::from_u128(rng.random()).to_string(),
            Ty::Bytea => {
                let len = rng.random_range(0..48);
                let hex: String = (0..len)
                    .map(|_| format!("{:02x}", rng.random::<u8>()))
                    .collect();
                format!("\\x{hex}")
            }
            Ty::Double => match rng.random_range(0..4) {
                0 => format!("{:?}", rng.random_range(-1e6..1e6f64)),
                1 => "0.1".into(),
                _ => loop {
                    let x = f64::from_bits(rng.random());
                    if x.is_finite() {
                        break format!("{x:?}");
                    }
                },
            },
            Ty::IntArray => {
                let items: Vec<String> = (0..rng.random_range(0..5))
                    .map(|_| rng.random::<i32>().to_string())
                    .collect();
                format!("{{{}}}", items.join(","))
            }
            Ty::TextArray => {
                let items: Vec<String> = (0..rng.random_range(0..4))
                    .map(|_| {
                        let t = words(rng).replace('\\', "\\\\").replace('"', "\\\"");
                        format!("\"{t}\"")
                    })
                    .collect();
                format!("{{{}}}", items.join(","))
            }
            Ty::Big => (0..rng.random_range(160..=250))
                .map(|_| format!("{:016x}", rng.random::<u64>()))
                .collect(),
        })
    }
}

/// Text that needs quoting, empty, with a newline, or plain.
fn words(rng: &mut StdRng) -> String {
    let n: u32 = rng.random();
    match rng.random_range(0..4) {
        0 => String::new(),
        1 => format!("quote ' \" back \\ pipe | brace {{}} comma , ✓ {n}\nsecond line"),
        _ => format!("item {n}"),
    }
}

/// JSON whose text a parse would change, nested, scalar.
fn json(rng: &mut StdRng) -> String {
    let n: i32 = rng.random();
    match rng.random_range(0..6) {
        0 => "{}".to_owned(),
        1 => format!(r#"{{"n": {n}, "price": 1.50, "big": 12345678901234567890, "neg": -0.0}}"#),
        2 => format!(r#"[1, "two", null, true, {{"x": [{n}]}}]"#),
        3 => format!(r#"{{"text": "quote \" back \\ newline \n ✓ {n}"}}"#),
        4 => n.to_string(),
        _ => r#""a string""#.to_owned(),
    }
}

/// Microseconds between 1900-01-01 and 2100-01-01.
fn micros(rng: &mut StdRng) -> i64 {
    rng.random_range(-2_208_988_800_000_000..4_102_444_800_000_000)
}

/// A table of the source schema.
pub struct Table {
    pub name: &'static str,
    /// One or two key columns: a one-column key is made from the row's number `n`; a
    /// two-column key from `n / 8` and `n % 8`.
    pub key: &'static [(&'static str, Ty)],
    pub columns: &'static [(&'static str, Ty)],
    /// Partitioned by hash of its (one-column) key.
    pub partitioned: bool,
}

pub const TABLES: [Table; 20] = [
    Table {
        name: "orders",
        key: &[("id", BigInt)],
        columns: &[
            ("title", Text),
            ("amount", Numeric(12, 2)),
            ("doc", Jsonb),
            ("at", Timestamptz),
        ],
        partitioned: false,
    },
    Table {
        name: "order",
        key: &[("id", BigInt)],
        columns: &[
            ("user", Text),
            ("select", Int),
            ("group", Jsonb),
            ("desc", Bool),
        ],
        partitioned: false,
    },
    Table {
        name: "parted",
        key: &[("id", BigInt)],
        columns: &[
            ("region", SmallInt),
            ("total", Numeric(10, 3)),
            ("at", Timestamp),
            ("note", Varchar(40)),
        ],
        partitioned: true,
    },
    Table {
        name: "accounts",
        key: &[("tenant", Int), ("code", Text)],
        columns: &[
            ("balance", Numeric(18, 4)),
            ("active", Bool),
            ("opened", Date),
        ],
        partitioned: false,
    },
    Table {
        name: "events",
        key: &[("id", Uuid)],
        columns: &[
            ("kind", Varchar(20)),
            ("payload", Jsonb),
            ("at", Timestamptz),
            ("raw", Bytea),
        ],
        partitioned: false,
    },
    Table {
        name: "samples",
        key: &[("id", Int)],
        columns: &[("x", Double), ("y", Double), ("label", Text)],
        partitioned: false,
    },
    Table {
        name: "tagged",
        key: &[("name", Text)],
        columns: &[
            ("tags", TextArray),
            ("counts", IntArray),
            ("updated", Timestamptz),
        ],
        partitioned: false,
    },
    Table {
        name: "docs",
        key: &[("id", BigInt)],
        columns: &[("big", Big), ("title", Text), ("rev", Int)],
        partitioned: false,
    },
    Table {
        name: "ledger",
        key: &[("account", BigInt), ("line", SmallInt)],
        columns: &[("amount", Numeric(20, 6)), ("memo", Text), ("posted", Date)],
        partitioned: false,
    },
    Table {
        name: "blobs",
        key: &[("id", BigInt)],
        columns: &[("data", Bytea), ("checksum", Uuid), ("size", Int)],
        partitioned: false,
    },
    Table {
        name: "shifts",
        key: &[("worker", Uuid), ("day", Date)],
        columns: &[("starts", Time), ("ends", Time), ("hours", Numeric(5, 2))],
        partitioned: false,
    },
    Table {
        name: "flags",
        key: &[("code", Varchar(40))],
        columns: &[("enabled", Bool), ("since", Timestamp), ("rank", SmallInt)],
        partitioned: false,
    },
    Table {
        name: "metrics",
        key: &[("host", Text), ("seq", BigInt)],
        columns: &[("value", Double), ("tags", Jsonb), ("at", Timestamptz)],
        partitioned: false,
    },
    Table {
        name: "prices",
        key: &[("sku", Varchar(40))],
        columns: &[
            ("price", Numeric(12, 2)),
            ("currency", Varchar(3)),
            ("valid_from", Date),
            ("scores", IntArray),
        ],
        partitioned: false,
    },
    Table {
        name: "people",
        key: &[("id", BigInt)],
        columns: &[
            ("email", Varchar(100)),
            ("name", Text),
            ("born", Date),
            ("admin", Bool),
            ("prefs", Jsonb),
        ],
        partitioned: false,
    },
    Table {
        name: "readings",
        key: &[("sensor", Int), ("slot", SmallInt)],
        columns: &[("temp", Double), ("ok", Bool), ("at", Timestamp)],
        partitioned: false,
    },
    Table {
        name: "notes",
        key: &[("id", Uuid)],
        columns: &[
            ("body", Big),
            ("lines", TextArray),
            ("created", Timestamptz),
        ],
        partitioned: false,
    },
    Table {
        name: "counters",
        key: &[("id", Int)],
        columns: &[("a", BigInt), ("b", Int), ("c", SmallInt)],
        partitioned: false,
    },
    Table {
        name: "wide",
        key: &[("id", BigInt)],
        columns: &[
            ("t", Text),
            ("v", Varchar(10)),
            ("n", Numeric(30, 10)),
            ("b", Bool),
            ("j", Jsonb),
            ("d", Date),
            ("tm", Time),
            ("ts", Timestamp),
            ("tz", Timestamptz),
            ("u", Uuid),
            ("by", Bytea),
            ("f", Double),
            ("ia", IntArray),
            ("ta", TextArray),
            ("s", SmallInt),
            ("i", Int),
            ("l", BigInt),
        ],
        partitioned: false,
    },
    Table {
        name: "mixed",
        key: &[("region", Text), ("id", BigInt)],
        columns: &[("a", Jsonb), ("b", Bytea), ("c", Numeric(8, 0))],
        partitioned: false,
    },
];

/// The 21st table, created mid-run.
pub const LATE_TABLE: Table = Table {
    name: "late",
    key: &[("id", BigInt)],
    columns: &[
        ("note", Text),
        ("amount", Numeric(10, 2)),
        ("at", Timestamptz),
        ("flags", IntArray),
    ],
    partitioned: false,
};

pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Table {
    pub fn qualified(&self, schema: &str) -> String {
        format!("{}.{}", quote(schema), quote(self.name))
    }

    /// The table's DDL in `schema`; a partitioned table's partitions in `parts`.
    pub fn ddl(&self, schema: &str, parts: &str) -> String {
        let columns: Vec<String> = self
            .key
            .iter()
            .map(|(c, t)| format!("{} {} NOT NULL", quote(c), t.sql()))
            .chain(
                self.columns
                    .iter()
                    .map(|(c, t)| format!("{} {}", quote(c), t.sql())),
            )
            .collect();
        let key: Vec<String> = self.key.iter().map(|(c, _)| quote(c)).collect();
        let table = self.qualified(schema);
        let mut ddl = format!(
            "CREATE TABLE {table} ({}, PRIMARY KEY ({}))",
            columns.join(", "),
            key.join(", ")
        );
        if self.partitioned {
            ddl.push_str(&format!(" PARTITION BY HASH ({});\n", key[0]));
            for r in 0..3 {
                ddl.push_str(&format!(
                    "CREATE TABLE {}.{} PARTITION OF {table} \
                     FOR VALUES WITH (MODULUS 3, REMAINDER {r});\n",
                    quote(parts),
                    quote(&format!("{}_p{r}", self.name))
                ));
            }
        } else {
            ddl.push_str(";\n");
        }
        ddl
    }

    /// The key's values for row number `n`.
    fn key_values(&self, n: i64) -> Vec<String> {
        match self.key {
            [(_, t)] => vec![t.key(n)],
            [(_, a), (_, b)] => vec![a.key(n / 8), b.key(n % 8)],
            _ => unreachable!("keys of one or two columns"),
        }
    }

    /// `"k1" = $1::type AND …` from parameter `first`.
    fn key_match(&self, first: usize) -> String {
        self.key
            .iter()
            .enumerate()
            .map(|(i, (c, t))| format!("{} = ${}::text::{}", quote(c), first + i, t.sql()))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    pub async fn insert(&self, conn: &mut PgConnection, schema: &str, n: i64, rng: &mut StdRng) {
        let all: Vec<(&str, Ty)> = self.key.iter().chain(self.columns).copied().collect();
        let names: Vec<String> = all.iter().map(|(c, _)| quote(c)).collect();
        let params: Vec<String> = all
            .iter()
            .enumerate()
            .map(|(i, (_, t))| format!("${}::text::{}", i + 1, t.sql()))
            .collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            self.qualified(schema),
            names.join(", "),
            params.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for key in self.key_values(n) {
            query = query.bind(Some(key));
        }
        for (_, t) in self.columns {
            query = query.bind(t.value(rng));
        }
        let done = query
            .execute(conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(done.rows_affected(), 1, "{sql}");
    }

    /// Updates a random non-empty subset of the columns (a TOASTed one only now and then:
    /// left alone, Debezium sends its placeholder).
    pub async fn update(&self, conn: &mut PgConnection, schema: &str, n: i64, rng: &mut StdRng) {
        let mut chosen: Vec<(&str, Ty)> = self
            .columns
            .iter()
            .copied()
            .filter(|(_, t)| {
                let p = if matches!(t, Big) { 0.2 } else { 0.6 };
                rng.random_bool(p)
            })
            .collect();
        if chosen.is_empty() {
            let (c, t) = self.columns[rng.random_range(0..self.columns.len())];
            chosen.push((c, t));
        }
        let sets: Vec<String> = chosen
            .iter()
            .enumerate()
            .map(|(i, (c, t))| format!("{} = ${}::text::{}", quote(c), i + 1, t.sql()))
            .collect();
        let sql = format!(
            "UPDATE {} SET {} WHERE {}",
            self.qualified(schema),
            sets.join(", "),
            self.key_match(chosen.len() + 1)
        );
        let mut query = sqlx::query(&sql);
        for (_, t) in &chosen {
            query = query.bind(t.value(rng));
        }
        for key in self.key_values(n) {
            query = query.bind(Some(key));
        }
        let done = query
            .execute(conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(done.rows_affected(), 1, "{sql}");
    }

    pub async fn delete(&self, conn: &mut PgConnection, schema: &str, n: i64) {
        let sql = format!(
            "DELETE FROM {} WHERE {}",
            self.qualified(schema),
            self.key_match(1)
        );
        let mut query = sqlx::query(&sql);
        for key in self.key_values(n) {
            query = query.bind(Some(key));
        }
        let done = query
            .execute(conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(done.rows_affected(), 1, "{sql}");
    }
}
