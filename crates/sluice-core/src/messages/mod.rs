//! Typed messages of the storage topics and their decoders (docs/ARCHITECTURE.md#messages).
//! Each topic's message lives in its module under [`crate::topics`]; they are re-exported
//! here with the field rules they share.
//!
//! Invariant: a value of any type in this module already satisfies every limit of the
//! database column it is written to (integer ranges, VARCHAR lengths in characters, UUID
//! syntax, finite floats, no U+0000). A message that would break one of them is rejected at
//! decode time with a [`DecodeError`] naming the field, so it alone is dead-lettered and the
//! good messages of its batch are kept.

mod error;
pub(crate) mod fields;

pub use crate::topics::app_stats::{AppStats, decode_app_stats};
pub use crate::topics::network_metrics::{NetworkMetrics, decode_network_metrics};
pub use crate::topics::reviews::{Review, decode_review};
pub use error::DecodeError;

#[cfg(test)]
mod tests;
