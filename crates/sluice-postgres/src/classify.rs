//! The disposition of a database error (docs/ARCHITECTURE.md#errors), from its SQLSTATE when it has one.

use sluice_core::Disposition;
use sluice_core::disposition::classify_sqlstate;

/// The SQLSTATE of a database error, if the server sent one.
pub fn sqlstate(error: &sqlx::Error) -> Option<String> {
    match error {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// Retry, dead-letter or fatal for a database error.
///
/// Errors without a SQLSTATE are classified by what they mean for the connection: an I/O
/// failure, a TLS failure, a pool time-out or a crashed worker is transient (the server
/// restarting looks exactly like this: the handshake of a fresh connection is cut or
/// refused while it comes back); a configuration or decoding error is a bug or a bad
/// setting and is fatal. A TLS setting that can never work (a wrong CA) is retried too,
/// until the retries run out, and then stops the pipeline with the TLS error.
pub fn disposition(error: &sqlx::Error) -> Disposition {
    match error {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => classify_sqlstate(&code),
            None => Disposition::Fatal,
        },
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => Disposition::Retry,
        _ => Disposition::Fatal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_transient_and_config_errors_fatal() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(disposition(&io), Disposition::Retry);
        assert_eq!(disposition(&sqlx::Error::PoolTimedOut), Disposition::Retry);
        assert_eq!(
            disposition(&sqlx::Error::Protocol("eof".into())),
            Disposition::Retry
        );
        let tls = sqlx::Error::Tls("handshake interrupted: server closed the connection".into());
        assert_eq!(disposition(&tls), Disposition::Retry);
        assert_eq!(disposition(&sqlx::Error::RowNotFound), Disposition::Fatal);
        let config = sqlx::Error::Configuration("bad url".into());
        assert_eq!(disposition(&config), Disposition::Fatal);
        assert_eq!(sqlstate(&io), None);
    }
}
