//! A captured table as its Debezium records describe it: the topic, the key columns, each
//! column's kind, and the key and envelope schemas rendered once (JsonConverter's member
//! order: `type`, `fields`, `optional`, `name`, `version`, `doc`, `parameters`, `default`,
//! `field`), so a change costs only its values.

use super::json::push_string;
use super::types::Kind;
use crate::model::{Relation, ReplicaIdentity};

/// What a column needs beyond the Relation message, read from the catalog
/// (`pg_attribute`, `pg_attrdef`, the primary key): the Relation message carries neither
/// `NOT NULL` nor defaults, and under `REPLICA IDENTITY FULL` it flags every column as key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnCatalog {
    /// `NOT attnotnull`.
    pub optional: bool,
    /// The column's default as its JSON value in the schema (`"x"`, `0`), when Debezium
    /// would write one; `None` leaves `default` out.
    pub default: Option<String>,
    /// Part of the table's primary key (the record key).
    pub primary_key: bool,
    /// An enum column's labels in their order, comma-joined (`sad,ok,happy`): its schema is
    /// then `io.debezium.data.Enum` with them as `allowed`. `None` for any other type.
    pub enum_allowed: Option<String>,
    /// A domain column's base type (under domains over domains, the last) and the type
    /// modifier a domain gives it: its records are the base type's, as Debezium's are.
    /// `None` for any other type.
    pub domain_base: Option<(u32, i32)>,
}

impl ColumnCatalog {
    /// The Debezium type of a column whose Relation message gives `type_oid` and
    /// `type_modifier`: its base type's for a domain.
    pub fn kind(&self, type_oid: u32, type_modifier: i32) -> Kind {
        match self.domain_base {
            Some((base, modifier)) => Kind::of(base, modifier),
            None => Kind::of(type_oid, type_modifier),
        }
    }
}

/// One column of a [`TableShape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeColumn {
    /// Its name.
    pub name: String,
    /// Its Debezium type.
    pub kind: Kind,
    /// What a NULL in a required (`NOT NULL`) column is written as: the column's default, or
    /// its type's zero (a delete's before-image has only the key's values; Debezium fills
    /// the others so a schema-checking reader accepts the record). `None`: optional.
    pub required_fill: Option<String>,
    /// The `default` of the column's schema (its JSON value), `None` when it has none.
    pub default: Option<String>,
}

/// A table's records: topic, key columns and schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// `<prefix>.<schema>.<table>`.
    pub topic: String,
    /// The table's schema.
    pub schema: String,
    /// The table's name.
    pub table: String,
    /// Every column of the Relation message, in its order.
    pub columns: Vec<ShapeColumn>,
    /// The primary key's columns, as positions in `columns`; empty: records have no key.
    pub key: Vec<usize>,
    /// `{"type":"struct",…,"name":"<topic>.Key"}`.
    pub key_schema: String,
    /// `{"type":"struct",…,"name":"<topic>.Envelope","version":2}`.
    pub envelope_schema: String,
}

/// The `source` block's Connect schema for PostgreSQL, as Debezium 3.6 writes it.
const SOURCE_SCHEMA: &str = concat!(
    "{\"type\":\"struct\",\"fields\":[",
    "{\"type\":\"string\",\"optional\":false,\"field\":\"version\"},",
    "{\"type\":\"string\",\"optional\":false,\"field\":\"connector\"},",
    "{\"type\":\"string\",\"optional\":false,\"field\":\"name\"},",
    "{\"type\":\"int64\",\"optional\":false,\"field\":\"ts_ms\"},",
    "{\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Enum\",\"version\":1,",
    "\"parameters\":{\"allowed\":\"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental\"},",
    "\"default\":\"false\",\"field\":\"snapshot\"},",
    "{\"type\":\"string\",\"optional\":false,\"field\":\"db\"},",
    "{\"type\":\"string\",\"optional\":true,\"field\":\"sequence\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_us\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ns\"},",
    "{\"type\":\"string\",\"optional\":false,\"field\":\"schema\"},",
    "{\"type\":\"string\",\"optional\":false,\"field\":\"table\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"txId\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"lsn\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"xmin\"},",
    "{\"type\":\"string\",\"optional\":true,\"field\":\"origin\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"origin_lsn\"}],",
    "\"optional\":false,\"name\":\"io.debezium.connector.postgresql.Source\",\"version\":1,\"field\":\"source\"}",
);

/// The `transaction` block's schema (always null in the payload: Debezium's
/// `provide.transaction.metadata=false`).
const TRANSACTION_SCHEMA: &str = concat!(
    "{\"type\":\"struct\",\"fields\":[",
    "{\"type\":\"string\",\"optional\":false,\"field\":\"id\"},",
    "{\"type\":\"int64\",\"optional\":false,\"field\":\"total_order\"},",
    "{\"type\":\"int64\",\"optional\":false,\"field\":\"data_collection_order\"}],",
    "\"optional\":true,\"name\":\"event.block\",\"version\":1,\"field\":\"transaction\"}",
);

/// The envelope's last members: `op` and the processing time.
const ENVELOPE_TAIL: &str = concat!(
    "{\"type\":\"string\",\"optional\":false,\"field\":\"op\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ms\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_us\"},",
    "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ns\"}",
);

impl TableShape {
    /// The shape of `relation` under topic prefix `prefix`, with `catalog[i]` describing
    /// `relation.columns[i]` (the caller reads it when a Relation message arrives).
    pub fn new(prefix: &str, relation: &Relation, catalog: &[ColumnCatalog]) -> TableShape {
        let topic = topic_name(prefix, &relation.schema, &relation.table);
        let fallback = ColumnCatalog {
            optional: true,
            default: None,
            primary_key: false,
            enum_allowed: None,
            domain_base: None,
        };
        let info = |at: usize| catalog.get(at).unwrap_or(&fallback);
        let columns: Vec<ShapeColumn> = relation
            .columns
            .iter()
            .enumerate()
            .map(|(at, c)| {
                let kind = info(at).kind(c.type_oid, c.type_modifier);
                let required_fill = (!info(at).optional).then(|| {
                    info(at)
                        .default
                        .clone()
                        .unwrap_or_else(|| kind.zero().to_owned())
                });
                ShapeColumn {
                    name: c.name.clone(),
                    kind,
                    required_fill,
                    default: info(at).default.clone(),
                }
            })
            .collect();
        // Under identity DEFAULT the Relation message flags the primary key as of the
        // change's WAL position (the catalog is read later and may have changed since);
        // otherwise (FULL flags every column, INDEX another index) the catalog's.
        let key: Vec<usize> = match relation.replica_identity {
            ReplicaIdentity::Default if relation.columns.iter().any(|c| c.is_key) => relation
                .columns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_key)
                .map(|(at, _)| at)
                .collect(),
            _ => (0..columns.len())
                .filter(|&at| info(at).primary_key)
                .collect(),
        };
        let field = |at: usize| column_schema(&columns[at], info(at));
        let key_fields: Vec<String> = key.iter().map(|&at| field(at)).collect();
        let key_schema = format!(
            "{{\"type\":\"struct\",\"fields\":[{}],\"optional\":false,\"name\":{}}}",
            key_fields.join(","),
            quoted(&format!("{topic}.Key"))
        );
        let row_fields: Vec<String> = (0..columns.len()).map(field).collect();
        let row = |member: &str| {
            format!(
                "{{\"type\":\"struct\",\"fields\":[{}],\"optional\":true,\"name\":{},\"field\":\"{member}\"}}",
                row_fields.join(","),
                quoted(&format!("{topic}.Value"))
            )
        };
        let envelope_schema = format!(
            "{{\"type\":\"struct\",\"fields\":[{},{},{SOURCE_SCHEMA},{TRANSACTION_SCHEMA},{ENVELOPE_TAIL}],\"optional\":false,\"name\":{},\"version\":2}}",
            row("before"),
            row("after"),
            quoted(&format!("{topic}.Envelope"))
        );
        TableShape {
            topic,
            schema: relation.schema.clone(),
            table: relation.table.clone(),
            columns,
            key,
            key_schema,
            envelope_schema,
        }
    }
}

/// One column's schema as a member of a struct's `fields`.
fn column_schema(column: &ShapeColumn, catalog: &ColumnCatalog) -> String {
    let (head, tail) = column.kind.schema_parts();
    let mut out = String::with_capacity(96);
    out.push('{');
    out.push_str(&head);
    out.push_str(if catalog.optional {
        ",\"optional\":true"
    } else {
        ",\"optional\":false"
    });
    match &catalog.enum_allowed {
        // Its values are its labels, as text; the schema names the type and lists them.
        Some(allowed) => {
            out.push_str(
                ",\"name\":\"io.debezium.data.Enum\",\"version\":1,\"parameters\":{\"allowed\":",
            );
            push_string(&mut out, allowed);
            out.push('}');
        }
        None => out.push_str(&tail),
    }
    if let Some(default) = &catalog.default {
        out.push_str(",\"default\":");
        out.push_str(default);
    }
    out.push_str(",\"field\":");
    push_string(&mut out, &column.name);
    out.push('}');
    out
}

fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    push_string(&mut out, text);
    out
}

/// The longest topic name Kafka takes.
const MAX_TOPIC_NAME: usize = 249;

/// The topic of `schema.table` under `prefix`, as Debezium names it: each character Kafka does
/// not allow in a topic name (anything but ASCII letters, digits, `.`, `_` and `-`) becomes
/// `_`, one per UTF-16 unit as Debezium's Java counts them (`"Order Items"` →
/// `Order_Items`), and a name longer than Kafka's 249 characters is cut there. Two tables
/// whose names differ only there share a topic, as with Debezium.
pub fn topic_name(prefix: &str, schema: &str, table: &str) -> String {
    let name = format!("{prefix}.{schema}.{table}");
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.len() <= MAX_TOPIC_NAME && name.chars().all(valid) {
        return name;
    }
    let mut topic = String::with_capacity(name.len());
    for c in name.chars() {
        if valid(c) {
            topic.push(c);
        } else {
            topic.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    // ASCII only now: one byte per character.
    topic.truncate(MAX_TOPIC_NAME);
    tracing::warn!(
        table = %format!("{schema}.{table}"),
        topic = %topic,
        "the table's name is not a valid topic name; its characters Kafka refuses became '_'"
    );
    topic
}

#[cfg(test)]
mod tests {
    use super::topic_name;

    #[test]
    fn a_table_name_kafka_refuses_becomes_debeziums_topic_name() {
        assert_eq!(topic_name("dbz", "public", "items"), "dbz.public.items");
        assert_eq!(
            topic_name("dbz", "public", "Order-Items_2.v1"),
            "dbz.public.Order-Items_2.v1"
        );
        assert_eq!(
            topic_name("dbz", "public", "Order Items"),
            "dbz.public.Order_Items"
        );
        assert_eq!(topic_name("dbz", "my schema", "a/b"), "dbz.my_schema.a_b");
        // One `_` per UTF-16 unit, as Debezium's Java counts them: é is one, 🦀 two.
        assert_eq!(topic_name("dbz", "public", "café"), "dbz.public.caf_");
        assert_eq!(topic_name("dbz", "public", "x🦀"), "dbz.public.x__");
        // Cut at Kafka's 249 characters, as Debezium does.
        let long = topic_name(&"p".repeat(200), "public", &"t".repeat(63));
        assert_eq!(long.len(), 249);
        assert!(long.starts_with(&format!("{}.public.tttt", "p".repeat(200))));
    }
}
