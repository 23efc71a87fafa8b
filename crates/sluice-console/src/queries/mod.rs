//! The console's SQL: the dead-letter browser's one query builder, the outbox lists and the
//! replication slots.

pub mod dead_letters;
pub mod outbox;
pub mod slots;
