//! What can stop a capture, and what to do about it (docs/ARCHITECTURE.md#guarantees: every
//! error has a disposition).

use crate::pgoutput::DecodeError;
use sluice_core::disposition::Disposition;

/// A capture stream's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The connection setting is not a usable `postgres://` URL or names a bad slot or
    /// publication.
    #[error("capture settings: {0}")]
    Settings(String),
    /// The replication connection failed or broke (network, authentication, TLS, a server
    /// error such as a missing publication or a slot in use).
    #[error("replication connection: {0}")]
    Replication(#[from] pgwire_replication::PgWireError),
    /// A replication command answered in a shape we do not understand.
    #[error("unexpected reply to {command}: {detail}")]
    UnexpectedReply {
        /// The command (`CREATE_REPLICATION_SLOT`).
        command: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A pgoutput message could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

impl CaptureError {
    /// Retry (on a new session, from the slot's confirmed LSN) for a broken connection;
    /// fatal for everything a restart would meet again. Nothing is ever a dead letter: a
    /// change cannot be skipped without breaking the order of its key.
    pub fn disposition(&self) -> Disposition {
        match self {
            CaptureError::Replication(e) if e.is_transient() => Disposition::Retry,
            // The slot is still held by the walsender of a session that just died: it is
            // released within wal_sender_timeout (SQLSTATE 55006 object_in_use).
            CaptureError::Replication(e) if sqlstate(&e.to_string()) == Some("55006") => {
                Disposition::Retry
            }
            // The server ended the session or refuses one for a while: a walsender
            // terminated (pg_terminate_backend, a failover tool, max_slot_wal_keep_size), the
            // server shutting down or starting, too many connections.
            CaptureError::Replication(e)
                if sqlstate(&e.to_string()).is_some_and(passes_by_class) =>
            {
                Disposition::Retry
            }
            _ => Disposition::Fatal,
        }
    }
}

/// A SQLSTATE whose class says the cause may pass: 08 (connection exception), 53
/// (insufficient resources: too many connections), 57 (operator intervention: a terminated
/// backend, the server shutting down or starting) — but not a protocol violation (08P01, a
/// client's bug), a configured limit reached (53400: every replication slot in use) or the
/// database dropped (57P04), which the next session would meet again.
pub fn passes_by_class(code: &str) -> bool {
    ["08", "53", "57"]
        .iter()
        .any(|class| code.starts_with(class))
        && !["08P01", "53400", "57P04"].contains(&code)
}

/// The SQLSTATE of a server error as pgwire-replication prints it (`… (SQLSTATE 55006)`):
/// it keeps the code only in the text (docs/capture.md#the-client).
pub fn sqlstate(message: &str) -> Option<&str> {
    let start = message.rfind("(SQLSTATE ")? + "(SQLSTATE ".len();
    message.get(start..start + 5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgwire_replication::PgWireError;

    #[test]
    fn dispositions() {
        let io = PgWireError::from(std::io::Error::other("reset"));
        let busy = PgWireError::Server(
            "replication slot \"s\" is active for PID 7 (SQLSTATE 55006)".into(),
        );
        let missing =
            PgWireError::Server("publication \"p\" does not exist (SQLSTATE 42704)".into());
        let terminated = PgWireError::Server(
            "terminating connection due to administrator command (SQLSTATE 57P01)".into(),
        );
        let too_many =
            PgWireError::Server("sorry, too many clients already (SQLSTATE 53300)".into());
        let dropped =
            PgWireError::Server("database \"src\" does not exist (SQLSTATE 57P04)".into());
        let table = [
            (CaptureError::Replication(dropped), Disposition::Fatal),
            (CaptureError::Replication(io), Disposition::Retry),
            (CaptureError::Replication(busy), Disposition::Retry),
            (CaptureError::Replication(terminated), Disposition::Retry),
            (CaptureError::Replication(too_many), Disposition::Retry),
            (CaptureError::Replication(missing), Disposition::Fatal),
            (
                CaptureError::Decode(DecodeError::UnknownRelation(1)),
                Disposition::Fatal,
            ),
            (CaptureError::Settings("x".into()), Disposition::Fatal),
        ];
        for (error, expected) in table {
            assert_eq!(error.disposition(), expected, "{error}");
        }
    }

    #[test]
    fn reads_the_sqlstate_from_the_text() {
        assert_eq!(sqlstate("x (SQLSTATE 42710)"), Some("42710"));
        assert_eq!(sqlstate("no code"), None);
    }
}
