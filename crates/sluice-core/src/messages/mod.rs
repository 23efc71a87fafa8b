//! Typed messages of the three storage topics and their decoders (docs/ARCHITECTURE.md#messages).
//!
//! Invariant: a value of any type in this module already satisfies every limit of the
//! database column it is written to (integer ranges, VARCHAR lengths in characters, UUID
//! syntax, finite floats, no U+0000). A message that would break one of them is rejected at
//! decode time with a [`DecodeError`] naming the field, so it alone is dead-lettered and the
//! good messages of its batch are kept.

mod app_stats;
mod error;
mod fields;
mod network_metrics;
mod reviews;

pub use app_stats::{AppStats, decode_app_stats};
pub use error::DecodeError;
pub use network_metrics::{NetworkMetrics, decode_network_metrics};
pub use reviews::{Review, decode_review};

#[cfg(test)]
mod tests;
