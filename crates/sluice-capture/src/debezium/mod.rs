//! Debezium-compatible change events (docs/capture.md#the-envelope): the records Debezium
//! 3.6's PostgreSQL connector writes with `JsonConverter`, built from the change model
//! without a JVM. [`TableShape`] renders a table's schemas once; [`Envelope`] turns each
//! change into its records; [`Kind`] maps a column type to its Connect schema and value.

mod array;
mod cell;
mod clock;
mod decimal;
mod defaults;
mod element;
mod encode_error;
mod envelope;
mod header;
mod interval;
mod json;
mod shape;
mod types;
mod values;

pub use defaults::constant_default;
pub use element::Element;
pub use envelope::{
    EncodeError, Envelope, EnvelopeSettings, Position, Record, Snapshot, UNAVAILABLE,
};
pub use shape::{ColumnCatalog, ShapeColumn, TableShape};
pub use types::{Kind, ValueError};
