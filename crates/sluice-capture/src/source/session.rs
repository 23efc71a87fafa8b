//! A replication session before it streams: the slot is created (or found) here, while an
//! exported snapshot is still valid (docs/capture.md#snapshot).

use super::config::SourceConfig;
use super::stream::CaptureStream;
use crate::error::CaptureError;
use crate::lsn::Lsn;
use pgwire_replication::{QueryRow, ReplicationClient};

/// What `CREATE_REPLICATION_SLOT` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedSlot {
    /// The slot's name.
    pub name: String,
    /// The first LSN it streams: every change committed after it, none before.
    pub consistent_point: Lsn,
    /// The exported snapshot (`SNAPSHOT 'export'`): a `REPEATABLE READ` transaction that
    /// runs `SET TRANSACTION SNAPSHOT '<it>'` sees the database exactly at
    /// `consistent_point`. Valid only until this session's next command.
    pub snapshot: Option<String>,
}

/// Whether the new slot exports a snapshot for the initial copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotSnapshot {
    /// `SNAPSHOT 'export'`: `snapshot = "initial"`.
    Export,
    /// `SNAPSHOT 'nothing'`: `snapshot = "never"`.
    Nothing,
}

/// An authenticated replication connection (`replication=database`) that has not started
/// streaming. Dropping it ends the session (and drops a temporary slot it created).
pub struct Session {
    config: SourceConfig,
    client: ReplicationClient,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // ReplicationClient has no Debug: the session is its settings.
        f.debug_struct("Session")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

const CREATE_SLOT: &str = "CREATE_REPLICATION_SLOT";

impl Session {
    /// Connects and authenticates.
    pub async fn connect(config: &SourceConfig) -> Result<Session, CaptureError> {
        let client = ReplicationClient::connect_gated(config.replication()).await?;
        Ok(Session {
            config: config.clone(),
            client,
        })
    }

    /// Creates the configured slot with pgoutput; `temporary` ones go with the session.
    pub async fn create_slot(
        &mut self,
        temporary: bool,
        snapshot: SlotSnapshot,
    ) -> Result<CreatedSlot, CaptureError> {
        let command = format!(
            "CREATE_REPLICATION_SLOT {slot} {temporary}LOGICAL pgoutput (SNAPSHOT '{snapshot}')",
            slot = self.config.slot(),
            temporary = if temporary { "TEMPORARY " } else { "" },
            snapshot = match snapshot {
                SlotSnapshot::Export => "export",
                SlotSnapshot::Nothing => "nothing",
            },
        );
        let rows = self.client.simple_query(&command).await?;
        created_slot(&rows)
    }

    /// Starts streaming the publication from the slot's confirmed LSN. Ends an exported
    /// snapshot: import it first.
    pub async fn start(mut self) -> Result<CaptureStream, CaptureError> {
        self.client.start().await?;
        self.client.wait_started().await?;
        tracing::info!(
            slot = self.config.slot(),
            publication = self.config.publication(),
            "capture streaming"
        );
        Ok(CaptureStream::new(self.client))
    }
}

/// The one row `slot_name, consistent_point, snapshot_name, output_plugin`.
fn created_slot(rows: &[QueryRow]) -> Result<CreatedSlot, CaptureError> {
    let unexpected = |detail: String| CaptureError::UnexpectedReply {
        command: CREATE_SLOT,
        detail,
    };
    let [row] = rows else {
        return Err(unexpected(format!("{} rows", rows.len())));
    };
    let text = |i: usize| -> Option<String> {
        row.get(i)
            .and_then(|cell| cell.as_ref())
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
    };
    let name = text(0).ok_or_else(|| unexpected("no slot_name".into()))?;
    let point = text(1).ok_or_else(|| unexpected("no consistent_point".into()))?;
    Ok(CreatedSlot {
        name,
        consistent_point: point.parse().map_err(|e| unexpected(format!("{e}")))?,
        snapshot: text(2),
    })
}
