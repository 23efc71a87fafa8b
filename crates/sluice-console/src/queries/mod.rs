//! The console's SQL: the dead-letter browser's one query builder, and the outbox lists.

pub mod dead_letters;
pub mod outbox;
