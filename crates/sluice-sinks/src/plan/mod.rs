//! A sink checked against the live schema: every table and column exists, the key has a
//! unique constraint, every source fits its column, every NOT NULL column gets a value.
//! The result is the sink's plan: its statement and each column's source and checks.
//!
//! By concern: `auto.rs` a sink's columns from its table (`columns = "auto"`); `sink.rs` the sink's plan ([`plan_sink`], [`SinkPlan`]) and its statements;
//! `keys.rs` the checks of its key, newest-wins column and tombstones; `column.rs` a written
//! column's plan ([`ColumnPlan`]) by its source; `fits.rs` whether a source's values fit a
//! column's type; `error.rs` why a sink cannot run ([`SinkError`]).

mod auto;
mod column;
mod error;
mod fits;
mod keys;
mod sink;

pub use auto::with_table_columns;
pub use column::ColumnPlan;
pub use error::SinkError;
pub use sink::{SinkPlan, plan_sink, plan_template};
