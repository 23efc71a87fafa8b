//! Tests of the registry transcoding: per format against the reference decoders, the wire
//! header, JSON Schema paths, and property tests that no body panics.

mod avro;
mod avro_fields;
mod avro_logical;
mod header;
mod json_schema;
mod measure;
mod no_panic;
mod protobuf;

#[test]
fn writer_schemas_are_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<super::WriterSchema>();
}
