//! The replication connection: settings, the session that makes the slot, the stream.

mod config;
mod session;
mod stream;

pub use config::SourceConfig;
pub use session::{CreatedSlot, Session, SlotSnapshot};
pub use stream::CaptureStream;
