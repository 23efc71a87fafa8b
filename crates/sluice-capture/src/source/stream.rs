//! A streaming session: WAL in, typed events out, acknowledgements back.
//!
//! **The durability rule** (docs/capture.md#durability): nothing is acknowledged on the
//! caller's behalf. The slot's confirmed LSN moves only when the caller passes a commit's
//! `end_lsn` to [`CaptureStream::acknowledge`], which it does once Kafka acknowledged every
//! event of that transaction and of all before it. Until then a restart streams them again.

use crate::error::CaptureError;
use crate::lsn::Lsn;
use crate::model::CaptureEvent;
use crate::pgoutput::{Decoder, Message};
use pgwire_replication::{ReplicationClient, ReplicationEvent};

/// Decoded events of one replication session, in WAL (commit) order.
pub struct CaptureStream {
    client: ReplicationClient,
    decoder: Decoder,
}

impl std::fmt::Debug for CaptureStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // ReplicationClient has no Debug.
        f.debug_struct("CaptureStream")
            .field("decoder", &self.decoder)
            .finish_non_exhaustive()
    }
}

impl CaptureStream {
    pub(super) fn new(client: ReplicationClient) -> CaptureStream {
        CaptureStream {
            client,
            decoder: Decoder::new(),
        }
    }

    /// The next event; `None` once the session ended cleanly (`shutdown`).
    pub async fn next(&mut self) -> Result<Option<CaptureEvent>, CaptureError> {
        loop {
            let Some(event) = self.client.recv().await? else {
                return Ok(None);
            };
            if let Some(event) = self.decode(event)? {
                return Ok(Some(event));
            }
        }
    }

    /// Reports everything before `lsn` durably handled: the server may recycle that WAL
    /// and a new session starts after it. Sent within the status interval.
    pub fn acknowledge(&self, lsn: Lsn) {
        self.client.update_applied_lsn(lsn.into());
    }

    /// Ends the session (CopyDone) and waits for the connection to close.
    pub async fn shutdown(mut self) -> Result<(), CaptureError> {
        self.client.shutdown().await?;
        Ok(())
    }

    /// The transport parses Begin, Commit and logical messages itself; everything else
    /// reaches the decoder as the raw pgoutput payload.
    fn decode(&mut self, event: ReplicationEvent) -> Result<Option<CaptureEvent>, CaptureError> {
        let (lsn, message) = match event {
            ReplicationEvent::XLogData {
                wal_start, data, ..
            } => return Ok(self.decoder.decode(wal_start.into(), &data)?),
            ReplicationEvent::KeepAlive { wal_end, .. } => {
                return Ok(Some(CaptureEvent::KeepAlive {
                    wal_end: wal_end.into(),
                }));
            }
            ReplicationEvent::StoppedAt { .. } => return Ok(None),
            ReplicationEvent::Begin {
                final_lsn,
                xid,
                commit_time_micros,
            } => (
                final_lsn.into(),
                Message::Begin {
                    final_lsn: final_lsn.into(),
                    commit_time: commit_time_micros,
                    xid,
                },
            ),
            ReplicationEvent::Commit {
                lsn,
                end_lsn,
                commit_time_micros,
            } => (
                lsn.into(),
                Message::Commit {
                    commit_lsn: lsn.into(),
                    end_lsn: end_lsn.into(),
                    commit_time: commit_time_micros,
                },
            ),
            ReplicationEvent::Message {
                transactional,
                lsn,
                prefix,
                content,
            } => (
                lsn.into(),
                Message::LogicalMessage {
                    transactional,
                    lsn: lsn.into(),
                    prefix,
                    content: content.to_vec(),
                },
            ),
            // ReplicationEvent is not exhaustive across versions: a new kind is a bug to
            // look at, not data to skip silently.
            #[allow(unreachable_patterns, reason = "future transport events")]
            other => {
                return Err(CaptureError::UnexpectedReply {
                    command: "START_REPLICATION",
                    detail: format!("{other:?}"),
                });
            }
        };
        Ok(self.decoder.event(lsn, message)?)
    }
}
