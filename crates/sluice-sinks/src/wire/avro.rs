//! Avro records transcoded to JSON text by walking the writer's schema (compiled once,
//! `avro_schema.rs`) over the bytes, with no value tree per record.
//!
//! A union is its chosen branch's value itself (not Avro JSON's `{"type": value}`), an enum its
//! symbol, bytes and fixed base64, a map an object, a record an object with its fields in
//! schema order; logical types are in `avro_logical.rs`.

use super::avro_read as read;
use super::avro_schema::{self, Node};
use super::error::{Fault, SchemaError, WireError};
use super::json_text as text;

/// The deepest nesting of records, arrays, maps and unions read (a recursive schema could
/// otherwise nest as deep as the bytes allow).
const MAX_DEPTH: usize = 256;
/// Array and map items allowed beyond one per byte of the body (an item of a type encoded in
/// no bytes, `null` or an empty record, could otherwise be counted without end).
const FREE_ITEMS: usize = 4_096;

/// A compiled Avro writer's schema.
#[derive(Debug)]
pub(super) struct AvroSchema {
    pub(super) nodes: Vec<Node>,
}

impl AvroSchema {
    /// Parses the schema and its references (named types it may use) and compiles it.
    pub(super) fn compile(
        text: &str,
        references: &[(String, String)],
    ) -> Result<Self, SchemaError> {
        Ok(Self {
            nodes: avro_schema::compile(text, references)?,
        })
    }

    /// The body as JSON text.
    pub(super) fn to_json(&self, body: &[u8]) -> Result<String, WireError> {
        let mut reader = Reader::new(&self.nodes, body);
        let mut out = String::with_capacity(body.len() * 2 + 16);
        reader.value(0, &mut out).map_err(Fault::into_error)?;
        if !reader.input.is_empty() {
            let left = reader.input.len();
            return Err(Fault::new(format!("{left} bytes left after the record")).into_error());
        }
        Ok(out)
    }

    /// Whether `path` leads to a value: through record fields, any branch of a union, and
    /// anything below a map.
    pub(super) fn has_path(&self, path: &[&str]) -> bool {
        self.leads(0, path)
    }

    fn leads(&self, node: usize, path: &[&str]) -> bool {
        let Some((first, rest)) = path.split_first() else {
            return true;
        };
        match self.nodes.get(node) {
            Some(Node::Record(fields)) => fields
                .iter()
                .any(|f| f.name == *first && self.leads(f.node, rest)),
            Some(Node::Union(branches)) => branches.iter().any(|b| self.leads(*b, path)),
            Some(Node::Map(_)) => true,
            _ => false,
        }
    }
}

/// One record being read: the bytes left, and the budgets that keep hostile bytes bounded.
pub(super) struct Reader<'n, 'b> {
    pub(super) nodes: &'n [Node],
    pub(super) input: &'b [u8],
    items_left: usize,
    pub(super) depth: usize,
    /// The deepest `depth` reached.
    pub(super) deepest: usize,
}

impl<'n, 'b> Reader<'n, 'b> {
    /// A reader of `body` by the schema's `nodes`.
    pub(super) fn new(nodes: &'n [Node], body: &'b [u8]) -> Self {
        Self {
            nodes,
            input: body,
            items_left: body.len().saturating_add(FREE_ITEMS),
            depth: 0,
            deepest: 0,
        }
    }

    /// Appends the JSON text of a value of type `node`.
    pub(super) fn value(&mut self, node: usize, out: &mut String) -> Result<(), Fault> {
        let nodes = self.nodes;
        let input = &mut self.input;
        match &nodes[node] {
            Node::Null => out.push_str("null"),
            Node::Boolean => match read::array::<1>(input)? {
                [0] => out.push_str("false"),
                [1] => out.push_str("true"),
                [other] => return Err(Fault::new(format!("a boolean byte {other}"))),
            },
            Node::Int => text::push_int(out, read::int(input)?),
            Node::Long => text::push_int(out, read::long(input)?),
            Node::Float => text::push_f32(out, read::float(input)?),
            Node::Double => text::push_f64(out, read::double(input)?),
            Node::Bytes => text::push_base64(out, read::bytes(input)?),
            Node::String => text::push_string(out, read::string(input)?),
            Node::Fixed(size) => text::push_base64(out, read::take(input, *size)?),
            Node::Enum(symbols) => {
                let index = read::int(input)?;
                let symbol = usize::try_from(index).ok().and_then(|i| symbols.get(i));
                out.push_str(symbol.ok_or_else(|| {
                    Fault::new(format!("enum index {index} of {} symbols", symbols.len()))
                })?);
            }
            Node::Logical(logical) => logical.write(input, out)?,
            nested => {
                self.depth += 1;
                self.deepest = self.deepest.max(self.depth);
                if self.depth > MAX_DEPTH {
                    return Err(Fault::new(format!("nested deeper than {MAX_DEPTH}")));
                }
                self.nested(nested, out)?;
                self.depth -= 1;
            }
        }
        Ok(())
    }

    fn nested(&mut self, node: &Node, out: &mut String) -> Result<(), Fault> {
        match node {
            Node::Union(branches) => {
                let branch = self.branch(branches)?;
                self.value(branch, out)
            }
            Node::Record(fields) => {
                out.push('{');
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&field.key);
                    self.value(field.node, out)
                        .map_err(|f| f.within(|| field.name.clone()))?;
                }
                out.push('}');
                Ok(())
            }
            Node::Array(items) => self.blocks(out, '[', |reader, i, out| {
                reader
                    .value(*items, out)
                    .map_err(|f| f.within(|| format!("[{i}]")))
            }),
            Node::Map(values) => self.blocks(out, '{', |reader, _, out| {
                let key = read::string(&mut reader.input)?;
                text::push_string(out, key);
                out.push(':');
                reader
                    .value(*values, out)
                    .map_err(|f| f.within(|| key.to_owned()))
            }),
            _ => Ok(()),
        }
    }

    /// The node of the branch a union's value is in.
    pub(super) fn branch(&mut self, branches: &[usize]) -> Result<usize, Fault> {
        let index = read::long(&mut self.input)?;
        let branch = usize::try_from(index).ok().and_then(|i| branches.get(i));
        branch
            .copied()
            .ok_or_else(|| Fault::new(format!("union branch {index} of {}", branches.len())))
    }

    /// The blocks of an array or map: a count (negative: its absolute value, then the block's
    /// size in bytes), that many items, until a count of 0.
    fn blocks(
        &mut self,
        out: &mut String,
        open: char,
        mut item: impl FnMut(&mut Self, usize, &mut String) -> Result<(), Fault>,
    ) -> Result<(), Fault> {
        out.push(open);
        let mut index = 0;
        loop {
            let count = read::long(&mut self.input)?;
            if count == 0 {
                break;
            }
            if count < 0 {
                read::long(&mut self.input)?;
            }
            let count = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
            if count > self.items_left {
                return Err(Fault::new(format!(
                    "a block of {count} items, more than the bytes can hold"
                )));
            }
            self.items_left -= count;
            for _ in 0..count {
                if index > 0 {
                    out.push(',');
                }
                item(self, index, out)?;
                index += 1;
            }
        }
        out.push(if open == '[' { ']' } else { '}' });
        Ok(())
    }
}
