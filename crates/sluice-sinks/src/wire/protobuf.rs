//! Protobuf records transcoded to JSON text: the writer's .proto file (and the files it
//! imports, from the references and protox's well-known types) compiled once into a
//! descriptor pool; each body decoded as the message its message-index path names and written
//! with the field names of the .proto (not proto3 JSON's camelCase `json_name`).
//!
//! A field with implicit presence (a proto3 scalar, enum, string or bytes outside a oneof)
//! that is not set is written as its default (`0`, `""`, `false`, the first enum value); a
//! field with explicit presence (a message, a oneof member, proto3 `optional`, a proto2
//! optional without a default) that is not set is left out, so its column gets NULL.

use std::collections::HashMap;

use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, ReflectMessage,
};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use super::error::{Fault, SchemaError, WireError};
use super::json_text as text;
use super::protobuf_scalar::{push_key, push_scalar};
use super::protobuf_wkt as wkt;

/// The name the writer's own .proto file is compiled under (its imports use theirs).
const WRITER_FILE: &str = "sluice/writer-schema.proto";

/// A compiled Protobuf writer's schema.
#[derive(Debug)]
pub(super) struct ProtoSchema {
    /// The file's top-level messages, in declaration order.
    messages: Vec<MessageDescriptor>,
}

/// The .proto sources the caller gave, by import path.
struct Sources(HashMap<String, String>);

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(source) => match serialized(source) {
                Some(mut proto) => {
                    // Imports name it by the reference's name, whatever it called itself.
                    proto.name = Some(name.to_owned());
                    Ok(File::from_file_descriptor_proto(proto))
                }
                None => File::from_source(name, source),
            },
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// A schema registered as a serialized `FileDescriptorProto` in base64 (what the Confluent
/// serializers register) rather than as .proto text. .proto text is never valid base64 (its
/// `;`, spaces and braces are not in the alphabet).
fn serialized(source: &str) -> Option<prost_reflect::prost_types::FileDescriptorProto> {
    use base64::Engine as _;
    use prost::Message as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(source.trim())
        .ok()?;
    prost_reflect::prost_types::FileDescriptorProto::decode(bytes.as_slice()).ok()
}

impl ProtoSchema {
    /// Compiles the .proto text with its references (import path, source).
    pub(super) fn compile(
        text: &str,
        references: &[(String, String)],
    ) -> Result<Self, SchemaError> {
        let failed = |e: protox::Error| SchemaError::Protobuf {
            reason: e.to_string(),
        };
        let mut sources: HashMap<String, String> = references.iter().cloned().collect();
        sources.insert(WRITER_FILE.to_owned(), text.to_owned());
        let mut resolver = ChainFileResolver::new();
        resolver.add(Sources(sources));
        resolver.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler.include_imports(true);
        compiler.open_file(WRITER_FILE).map_err(failed)?;
        let pool: DescriptorPool = compiler.descriptor_pool();
        let file = pool
            .get_file_by_name(WRITER_FILE)
            .ok_or_else(|| SchemaError::Protobuf {
                reason: "the compiled file is missing from its pool".to_owned(),
            })?;
        let messages: Vec<_> = file.messages().collect();
        if messages.is_empty() {
            return Err(SchemaError::Protobuf {
                reason: "the file defines no message".to_owned(),
            });
        }
        Ok(Self { messages })
    }

    /// The message a message-index path names: `[i, j, …]` is top-level message `i`, its
    /// nested message `j`, …; empty means `[0]`.
    pub(super) fn message(&self, indexes: &[i32]) -> Option<MessageDescriptor> {
        let position = |index: &i32| usize::try_from(*index).ok();
        let (first, nested) = indexes.split_first().unwrap_or((&0, &[]));
        let top = self.messages.get(position(first)?)?.clone();
        nested.iter().try_fold(top, |message, index| {
            message.child_messages().nth(position(index)?)
        })
    }

    /// The body, a message of the type `indexes` names, as JSON text.
    pub(super) fn to_json(&self, indexes: &[i32], body: &[u8]) -> Result<String, WireError> {
        let descriptor = self
            .message(indexes)
            .ok_or_else(|| WireError::NoSuchMessage {
                indexes: indexes.to_vec(),
            })?;
        let message = DynamicMessage::decode(descriptor, body)
            .map_err(|e| Fault::new(e.to_string()).into_error())?;
        let mut out = String::with_capacity(body.len() * 2 + 16);
        push_message(&mut out, &message);
        Ok(out)
    }

    /// Whether `path` leads to a value of the message `indexes` names: through message fields
    /// (a oneof's members are fields of the message), anything below a map or a `Struct`.
    pub(super) fn has_path(&self, indexes: &[i32], path: &[&str]) -> bool {
        self.message(indexes)
            .is_some_and(|message| leads(&message, path))
    }
}

impl ProtoSchema {
    /// Whether any message of the file, top-level or nested, leads to `path`: a subject's
    /// records may be any of them (each record's message-index list names which), and a
    /// file often declares shared messages before the one its records use.
    pub(super) fn any_has_path(&self, path: &[&str]) -> bool {
        fn any(message: &MessageDescriptor, path: &[&str]) -> bool {
            leads(message, path)
                || message
                    .child_messages()
                    .filter(|child| !child.is_map_entry())
                    .any(|child| any(&child, path))
        }
        self.messages.iter().any(|message| any(message, path))
    }
}

fn leads(message: &MessageDescriptor, path: &[&str]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return true;
    };
    let Some(field) = message.get_field_by_name(first) else {
        return false;
    };
    if rest.is_empty() || field.is_map() || wkt::is_open(&field.kind()) {
        return true;
    }
    match field.kind() {
        Kind::Message(inner) if !field.is_list() && wkt::known(&inner).is_none() => {
            leads(&inner, rest)
        }
        _ => false,
    }
}

/// Whether a field is written: set, or without presence (then its default), or a proto2
/// field with a declared default.
fn shown(message: &DynamicMessage, field: &FieldDescriptor) -> bool {
    message.has_field(field)
        || field.is_list()
        || field.is_map()
        || !field.supports_presence()
        || (field.containing_oneof().is_none()
            && field.field_descriptor_proto().default_value.is_some())
}

/// Appends a message as a JSON object, fields in declaration order (a well-known type its own
/// way).
fn push_message(out: &mut String, message: &DynamicMessage) {
    if wkt::push_known(out, message) {
        return;
    }
    out.push('{');
    let mut first = true;
    for field in message.descriptor().fields() {
        if !shown(message, &field) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        text::push_string(out, field.name());
        out.push(':');
        push_field(out, &message.get_field(&field), &field);
    }
    out.push('}');
}

/// Appends a field's value: a list as an array, a map as an object (keys in order).
fn push_field(out: &mut String, value: &prost_reflect::Value, field: &FieldDescriptor) {
    use prost_reflect::Value;
    let kind = field.kind();
    match value {
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_value(out, item, &kind);
            }
            out.push(']');
        }
        Value::Map(map) => {
            let value_kind = kind
                .as_message()
                .map(|entry| entry.map_entry_value_field().kind());
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_key(out, key);
                out.push(':');
                push_value(out, item, value_kind.as_ref().unwrap_or(&kind));
            }
            out.push('}');
        }
        single => push_value(out, single, &kind),
    }
}

/// Appends one value of a field's kind (a list's or map's element).
fn push_value(out: &mut String, value: &prost_reflect::Value, kind: &Kind) {
    match value {
        prost_reflect::Value::Message(message) => push_message(out, message),
        other => {
            if !push_scalar(out, other, kind) {
                out.push_str("null");
            }
        }
    }
}
