//! The generators and the model of `sink_property.rs`: random tables (types, nullability,
//! keys, policies), random records of their topics, and what the tables must end with.

pub mod decimal;
pub mod model;
pub mod table;
pub mod text;
pub mod types;
