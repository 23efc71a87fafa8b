//! An Avro writer's schema, parsed by apache-avro (named types from the references resolved),
//! compiled into a flat list of nodes whose references are indexes (a recursive record refers
//! to its own), each record field's JSON key written out in advance.

use std::collections::HashMap;

use apache_avro::Schema;
use apache_avro::schema::{InnerDecimalSchema, UuidSchema};

use super::avro_logical::{Logical, Unit, UuidForm};
use super::error::SchemaError;
use super::json_text::{self as text, Zone};

/// A field of a record: its name, its JSON key (`"name":`) and its type.
#[derive(Debug)]
pub(super) struct Field {
    /// The name, for a path and for the reason a value does not decode.
    pub(super) name: String,
    /// `"name":`, escaped.
    pub(super) key: String,
    /// The node of its type.
    pub(super) node: usize,
}

/// One type of the schema; the root is node 0.
#[derive(Debug)]
pub(super) enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Array(usize),
    Map(usize),
    Union(Vec<usize>),
    Record(Vec<Field>),
    /// The symbols, each as its JSON string.
    Enum(Vec<String>),
    Fixed(usize),
    Logical(Logical),
}

/// Parses the schema and its references (named types it may use) and compiles it into nodes,
/// the root first.
pub(super) fn compile(
    text: &str,
    references: &[(String, String)],
) -> Result<Vec<Node>, SchemaError> {
    let failed = |e: apache_avro::Error| SchemaError::Avro {
        reason: e.to_string(),
    };
    // Names the specification refuses but converters register (a topic's `-`), made valid.
    let text = super::avro_names::valid_names(text).unwrap_or_else(|| text.to_owned());
    let references: Vec<String> = references
        .iter()
        .map(|(_, text)| super::avro_names::valid_names(text).unwrap_or_else(|| text.clone()))
        .collect();
    let (root, others) = if references.is_empty() {
        (Schema::parse_str(&text).map_err(failed)?, Vec::new())
    } else {
        Schema::parse_str_with_list(&text, references.iter()).map_err(failed)?
    };
    let mut named = HashMap::new();
    for schema in others.iter().chain(std::iter::once(&root)) {
        collect_names(schema, &mut named);
    }
    let mut builder = Builder {
        named,
        compiled: HashMap::new(),
        nodes: Vec::new(),
    };
    builder.node(&root)?;
    Ok(builder.nodes)
}

/// Every named type (record, enum, fixed and the logical types on a fixed) by full name.
fn collect_names<'s>(schema: &'s Schema, named: &mut HashMap<String, &'s Schema>) {
    let name = match schema {
        Schema::Record(record) => {
            for field in &record.fields {
                collect_names(&field.schema, named);
            }
            Some(&record.name)
        }
        Schema::Enum(e) => Some(&e.name),
        Schema::Fixed(fixed) | Schema::Duration(fixed) | Schema::Uuid(UuidSchema::Fixed(fixed)) => {
            Some(&fixed.name)
        }
        Schema::Decimal(decimal) => match &decimal.inner {
            InnerDecimalSchema::Fixed(fixed) => Some(&fixed.name),
            InnerDecimalSchema::Bytes => None,
        },
        Schema::Array(array) => {
            collect_names(&array.items, named);
            None
        }
        Schema::Map(map) => {
            collect_names(&map.types, named);
            None
        }
        Schema::Union(union) => {
            for variant in union.variants() {
                collect_names(variant, named);
            }
            None
        }
        _ => None,
    };
    if let Some(name) = name {
        named.entry(name.fullname(None)).or_insert(schema);
    }
}

/// Compiles apache-avro's schema into nodes, each named type once (a recursive record refers
/// to its own index).
struct Builder<'s> {
    named: HashMap<String, &'s Schema>,
    compiled: HashMap<String, usize>,
    nodes: Vec<Node>,
}

impl<'s> Builder<'s> {
    fn node(&mut self, schema: &'s Schema) -> Result<usize, SchemaError> {
        if let Schema::Ref { name } = schema {
            let full = name.fullname(None);
            if let Some(index) = self.compiled.get(&full) {
                return Ok(*index);
            }
            let target = self.named.get(&full).copied().ok_or(SchemaError::Avro {
                reason: format!("type {full} is used but not defined"),
            })?;
            return self.node(target);
        }
        let index = self.nodes.len();
        self.nodes.push(Node::Null);
        if let Some(name) = type_name(schema) {
            self.compiled.insert(name, index);
        }
        let node = match schema {
            Schema::Array(array) => Node::Array(self.node(&array.items)?),
            Schema::Map(map) => Node::Map(self.node(&map.types)?),
            Schema::Union(union) => Node::Union(
                union
                    .variants()
                    .iter()
                    .map(|v| self.node(v))
                    .collect::<Result<_, _>>()?,
            ),
            Schema::Record(record) => Node::Record(
                record
                    .fields
                    .iter()
                    .map(|f| {
                        let mut key = String::new();
                        text::push_string(&mut key, &f.name);
                        key.push(':');
                        Ok(Field {
                            name: f.name.clone(),
                            key,
                            node: self.node(&f.schema)?,
                        })
                    })
                    .collect::<Result<_, SchemaError>>()?,
            ),
            other => leaf(other),
        };
        self.nodes[index] = node;
        Ok(index)
    }
}

/// The full name a schema defines, if it is a named type.
fn type_name(schema: &Schema) -> Option<String> {
    match schema {
        Schema::Record(record) => Some(record.name.fullname(None)),
        Schema::Enum(e) => Some(e.name.fullname(None)),
        Schema::Fixed(fixed) | Schema::Duration(fixed) | Schema::Uuid(UuidSchema::Fixed(fixed)) => {
            Some(fixed.name.fullname(None))
        }
        Schema::Decimal(decimal) => match &decimal.inner {
            InnerDecimalSchema::Fixed(fixed) => Some(fixed.name.fullname(None)),
            InnerDecimalSchema::Bytes => None,
        },
        _ => None,
    }
}

/// The node of a type with no types inside.
fn leaf(schema: &Schema) -> Node {
    let logical = |l| Node::Logical(l);
    match schema {
        Schema::Boolean => Node::Boolean,
        Schema::Int => Node::Int,
        Schema::Long => Node::Long,
        Schema::Float => Node::Float,
        Schema::Double => Node::Double,
        Schema::Bytes => Node::Bytes,
        Schema::String => Node::String,
        Schema::Enum(e) => Node::Enum(
            e.symbols
                .iter()
                .map(|s| {
                    let mut json = String::new();
                    text::push_string(&mut json, s);
                    json
                })
                .collect(),
        ),
        Schema::Fixed(fixed) => Node::Fixed(fixed.size),
        Schema::Decimal(decimal) => logical(Logical::Decimal {
            scale: decimal.scale,
            size: match &decimal.inner {
                InnerDecimalSchema::Fixed(fixed) => Some(fixed.size),
                InnerDecimalSchema::Bytes => None,
            },
        }),
        Schema::BigDecimal => logical(Logical::BigDecimal),
        Schema::Uuid(UuidSchema::String) => logical(Logical::Uuid(UuidForm::String)),
        Schema::Uuid(UuidSchema::Fixed(_)) => logical(Logical::Uuid(UuidForm::Fixed)),
        Schema::Uuid(UuidSchema::Bytes) => logical(Logical::Uuid(UuidForm::Bytes)),
        Schema::Date => logical(Logical::Date),
        Schema::TimeMillis => logical(Logical::Time(Unit::Millis)),
        Schema::TimeMicros => logical(Logical::Time(Unit::Micros)),
        Schema::TimestampMillis => logical(Logical::Timestamp(Unit::Millis, Zone::Utc)),
        Schema::TimestampMicros => logical(Logical::Timestamp(Unit::Micros, Zone::Utc)),
        Schema::TimestampNanos => logical(Logical::Timestamp(Unit::Nanos, Zone::Utc)),
        Schema::LocalTimestampMillis => logical(Logical::Timestamp(Unit::Millis, Zone::Local)),
        Schema::LocalTimestampMicros => logical(Logical::Timestamp(Unit::Micros, Zone::Local)),
        Schema::LocalTimestampNanos => logical(Logical::Timestamp(Unit::Nanos, Zone::Local)),
        Schema::Duration(_) => logical(Logical::Duration),
        // Null, and the types with types inside, which `Builder::node` compiles itself.
        _ => Node::Null,
    }
}
