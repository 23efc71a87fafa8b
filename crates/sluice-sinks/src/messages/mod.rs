//! The field rules every record decoder shares (docs/ARCHITECTURE.md#messages): JSON
//! parsing of a record value, strings, integers, floats, timestamps, arrays, and the
//! [`DecodeError`] that names the field.
//!
//! Invariant: a value these rules accept already satisfies every limit of the
//! database column it is written to (integer ranges, VARCHAR lengths in characters, UUID
//! syntax, finite floats, no U+0000). A message that would break one of them is rejected at
//! decode time with a [`DecodeError`] naming the field, so it alone is dead-lettered and the
//! good messages of its batch are kept.

mod error;
pub(crate) mod fields;

pub use error::DecodeError;
