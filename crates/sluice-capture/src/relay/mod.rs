//! The relay from the capture stream to Kafka (issue 46; docs/capture.md#durability):
//! [`run::Relay`] turns each change into its Debezium records and confirms a position to the
//! slot only behind Kafka's acknowledgements, which [`acks::Acks`] keeps.

pub mod acks;
pub mod disposition;
pub mod run;
pub mod sessions;
pub mod state;

pub use run::{Relay, RelayError, RelayReport};
pub use sessions::capture;
