//! A random table and its sink: columns of random types and nullability, a key of one or two
//! columns, a conflict policy; its DDL and its `[[sink]]` in the mapping file.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};

use super::types::{GUARD_TYPES, KEY_TYPES, Known, Ty, VALUE_TYPES, Val, draw, known_failing};

/// Where a column's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A field of the record, at this path (one or two segments).
    Field(Vec<String>),
    /// The record's offset (`{ kafka = "offset" }`).
    Offset,
}

/// One column of a generated table.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub ty: Ty,
    pub not_null: bool,
    /// `required = true` in the mapping (a nullable column that must be given).
    pub required: bool,
    pub insert_only: bool,
    pub source: Source,
}

impl Column {
    /// Whether a record must give this column a value.
    pub fn must_be_given(&self) -> bool {
        self.not_null || self.required
    }

    /// The field path as reasons name it (`a.b`).
    pub fn field(&self) -> Option<String> {
        match &self.source {
            Source::Field(path) => Some(path.join(".")),
            Source::Offset => None,
        }
    }
}

/// The conflict policy of a sink.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    InsertIgnore,
    AlwaysUpdate,
    /// Newest wins by this column.
    NewestWins(usize),
}

/// A generated table and its sink.
#[derive(Debug, Clone)]
pub struct Table {
    /// The sink's name (its topic is `<prefix>-<sink>`).
    pub sink: String,
    pub table: String,
    /// Key columns first.
    pub columns: Vec<Column>,
    /// The order of the columns in the mapping: the decoder checks them in it, so a record
    /// with several broken fields is refused naming the first.
    pub mapping_order: Vec<usize>,
    /// Positions of the key columns.
    pub key: Vec<usize>,
    pub policy: Policy,
    pub batch_size: usize,
    /// Per key column (in key order), the values its keys are drawn from: a small space, so
    /// keys repeat within and across batches.
    pub key_pools: Vec<Vec<Val>>,
    /// The guard's values (newest-wins): few, so ties happen.
    pub guard_pool: Vec<Val>,
    /// The key is a PRIMARY KEY (else a UNIQUE constraint).
    primary: bool,
}

/// Column names: plain, reserved words, capitals, spaces (every name is quoted).
const NAMES: &[&str] = &["c", "order", "Value", "user name", "select", "é", "end"];

impl Table {
    /// Table `index` of a run.
    pub fn generate(index: usize, rng: &mut StdRng) -> Table {
        let key_len = if rng.random_bool(0.3) { 2 } else { 1 };
        let values = rng.random_range(2..=7);
        let mut columns = Vec::new();
        for i in 0..key_len + values {
            let is_key = i < key_len;
            let ty = draw(if is_key { KEY_TYPES } else { VALUE_TYPES }, rng);
            let base = NAMES.choose(rng).expect("names");
            let field = format!("f{i}");
            // A NUMERIC keeps its digits only as a top-level field (docs/sinks.md, Exact values).
            let nested = !matches!(ty, Ty::Numeric(_) | Ty::Array(_)) && rng.random_bool(0.15);
            columns.push(Column {
                name: format!("{base}{i}"),
                not_null: is_key || rng.random_bool(0.4),
                required: false,
                insert_only: false,
                source: Source::Field(if nested {
                    vec![format!("n{i}"), field]
                } else {
                    vec![field]
                }),
                ty,
            });
        }
        let key: Vec<usize> = (0..key_len).collect();
        let primary = rng.random_bool(0.7);
        if !primary {
            // A nullable key column under UNIQUE: valid only because the mapping requires it.
            for &k in &key {
                if rng.random_bool(0.5) {
                    columns[k].not_null = false;
                    columns[k].required = true;
                }
            }
        }
        for column in &mut columns[key_len..] {
            if !column.not_null && rng.random_bool(0.15) {
                column.required = true;
            }
        }
        if rng.random_bool(0.25) {
            columns.push(Column {
                name: format!("offset{}", columns.len()),
                ty: Ty::BigInt,
                not_null: rng.random_bool(0.5),
                required: false,
                insert_only: false,
                source: Source::Offset,
            });
        }
        let policy = match rng.random_range(0..3) {
            0 => Policy::InsertIgnore,
            1 => Policy::AlwaysUpdate,
            _ => {
                let at = key_len;
                columns[at].ty = draw(GUARD_TYPES, rng);
                columns[at].required = false;
                Policy::NewestWins(at)
            }
        };
        if policy != Policy::InsertIgnore {
            for (i, column) in columns.iter_mut().enumerate().skip(key_len) {
                let guard = policy == Policy::NewestWins(i);
                column.insert_only = !guard && rng.random_bool(0.2);
            }
        }
        // An explicit always-update needs a column to update (sluice refuses the mapping
        // otherwise): the first non-key column stays updatable, and a table of key columns
        // alone ignores its repeats.
        let mut policy = policy;
        if policy == Policy::AlwaysUpdate && columns[key_len..].iter().all(|c| c.insert_only) {
            match columns.get_mut(key_len) {
                Some(column) => column.insert_only = false,
                None => policy = Policy::InsertIgnore,
            }
        }
        let pool_size = if key_len == 2 { 3 } else { 6 };
        let key_pools = key
            .iter()
            .map(|&k| distinct_values(&columns[k].ty, pool_size, rng))
            .collect();
        let guard_pool = match policy {
            Policy::NewestWins(g) => (0..rng.random_range(2..=5))
                .map(|_| columns[g].ty.pick(rng))
                .collect(),
            _ => Vec::new(),
        };
        let mut mapping_order: Vec<usize> = (0..columns.len()).collect();
        mapping_order.shuffle(rng);
        let mut batch_size = *[1, 2, 3, 7, 20, 500].choose(rng).expect("sizes");
        if columns.iter().any(|c| c.insert_only) && !known_failing(Known::InsertOnlyInBatch) {
            // Known failing: in one batch the surviving version's insert-only values are
            // inserted, not the first version's.
            batch_size = 1;
        }
        Table {
            sink: format!("p{index}"),
            table: format!("prop table {index}"),
            columns,
            mapping_order,
            key,
            policy,
            batch_size,
            key_pools,
            guard_pool,
            primary,
        }
    }

    /// The `CREATE TABLE`.
    pub fn ddl(&self) -> String {
        let mut parts: Vec<String> = self
            .columns
            .iter()
            .map(|c| {
                format!(
                    "{} {}{}",
                    quote(&c.name),
                    c.ty.ddl(),
                    if c.not_null { " NOT NULL" } else { "" }
                )
            })
            .collect();
        let key: Vec<String> = self
            .key
            .iter()
            .map(|&k| quote(&self.columns[k].name))
            .collect();
        parts.push(format!(
            "{} ({})",
            if self.primary {
                "PRIMARY KEY"
            } else {
                "UNIQUE"
            },
            key.join(", ")
        ));
        format!(
            "CREATE TABLE {} (\n    {}\n);\n",
            quote(&self.table),
            parts.join(",\n    ")
        )
    }

    /// The sink's `[[sink]]` table (`{prefix}` left for the test to fill in).
    pub fn mapping(&self) -> String {
        let key: Vec<String> = self
            .key
            .iter()
            .map(|&k| format!("\"{}\"", self.columns[k].name))
            .collect();
        let conflict = match self.policy {
            Policy::InsertIgnore => "\"insert-ignore\"".to_owned(),
            Policy::AlwaysUpdate => "\"always-update\"".to_owned(),
            Policy::NewestWins(g) => format!("{{ newest-wins = \"{}\" }}", self.columns[g].name),
        };
        let insert_only: Vec<String> = self
            .columns
            .iter()
            .filter(|c| c.insert_only)
            .map(|c| format!("\"{}\"", c.name))
            .collect();
        let mut text = format!(
            "[[sink]]\nname = \"{sink}\"\ntopic = \"{{prefix}}-{sink}\"\ntable = \"{table}\"\n\
             key = [{key}]\nconflict = {conflict}\ninsert_only = [{insert_only}]\n\
             batch_size = {batch}\n\n[sink.columns]\n",
            sink = self.sink,
            table = self.table,
            key = key.join(", "),
            insert_only = insert_only.join(", "),
            batch = self.batch_size,
        );
        for column in self.mapping_order.iter().map(|&i| &self.columns[i]) {
            let source = match &column.source {
                Source::Field(path) => format!("field = \"{}\"", path.join(".")),
                Source::Offset => "kafka = \"offset\"".to_owned(),
            };
            let required = if column.required {
                ", required = true"
            } else {
                ""
            };
            text.push_str(&format!("\"{}\" = {{ {source}{required} }}\n", column.name));
        }
        text
    }
}

/// Bytes of a key beyond which no btree index holds it (2704, less the row's overhead).
pub const LONGEST_INDEXED_KEY: usize = 2600;

/// `count` values of `ty` that are distinct as keys; short enough for the key's index, but
/// for one beyond it among the known-failing cases.
fn distinct_values(ty: &Ty, count: usize, rng: &mut StdRng) -> Vec<Val> {
    let mut values: Vec<Val> = Vec::new();
    if *ty == Ty::Text && known_failing(Known::LongKey) {
        // Random CJK: three bytes a character, which no compression brings under the limit.
        values.push(Val::Text(
            (0..LONGEST_INDEXED_KEY / 2)
                .map(|_| char::from_u32(rng.random_range(0x4e00..0x9fff)).expect("CJK"))
                .collect(),
        ));
    }
    for _ in 0..count * 20 {
        if values.len() == count {
            break;
        }
        let val = ty.pick(rng);
        let indexed = ty.ident(&val).len() < LONGEST_INDEXED_KEY / 4;
        if indexed && values.iter().all(|v| ty.ident(v) != ty.ident(&val)) {
            values.push(val);
        }
    }
    values
}

/// A name as SQL writes it.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
