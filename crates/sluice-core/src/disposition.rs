//! What to do with an error: retry, dead-letter, or stop (docs/ARCHITECTURE.md#errors).
//!
//! The adapters keep their errors' original types (the database driver's, librdkafka's);
//! they only ask this module which class a failure belongs to, from the SQLSTATE or
//! librdkafka's own `is_retriable`/`is_fatal` flags, never from message strings.

/// The disposition of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Transient: retry the same batch after a back-off, on a fresh connection. Never a
    /// dead letter.
    Retry,
    /// Permanent for this one message (or row): dead-letter it, move the offset on.
    DeadLetter,
    /// Stop every pipeline and exit non-zero; the next start resumes from the last commit.
    Fatal,
}

/// Classifies a PostgreSQL SQLSTATE (five characters, e.g. `"23505"`).
///
/// | class / code | meaning | disposition |
/// |---|---|---|
/// | `08…` | connection exception | retry |
/// | `53…` | insufficient resources | retry |
/// | `57P01`–`57P03` | admin/crash shutdown, cannot connect now | retry |
/// | `57014` | statement timeout (`statement_timeout`) or a cancelled query | retry |
/// | `55P03` | lock not available (`lock_timeout`, `NOWAIT`) | retry |
/// | `25P03` | idle-in-transaction session timeout | retry |
/// | `40001`, `40P01` | serialization failure, deadlock | retry |
/// | `22…`, `23…` | data exception, integrity constraint violation | dead-letter the row |
/// | `P0…` | raised by PL/pgSQL: a user's trigger or rule refusing the row | dead-letter the row |
/// | `21000` | one `ON CONFLICT DO UPDATE` met a row twice | isolate: rows one at a time |
/// | `54000` | a row beyond a server limit (an index row over the btree maximum: a key too long to index) | dead-letter the row |
/// | anything else | e.g. `42501` insufficient privilege, `42P01` undefined table | fatal |
///
/// A trigger on a user's table that raises (`RAISE EXCEPTION`: `P0001`; an `ASSERT`: `P0004`)
/// judges the row it fires for, like a CHECK constraint: the row is isolated and
/// dead-lettered with the trigger's message, and the others are written.
///
/// `21000` means two rows of one statement have keys the table holds as equal although the
/// in-batch de-duplication saw them as different: never fatal, the batch goes through the
/// isolation path, which writes such rows one statement each, in record order.
///
/// The server-side limits (`57014`, `55P03`, `25P03`) are transient: they say the server
/// was busy (a long lock holder, a slow moment), not that the batch is wrong. The batch is
/// retried on a fresh connection with the back-off; if the limit keeps firing, the retries
/// run out and the pipeline stops (never a crash loop onto the same batch at full speed).
pub fn classify_sqlstate(code: &str) -> Disposition {
    match code {
        sqlstate::ADMIN_SHUTDOWN
        | sqlstate::CRASH_SHUTDOWN
        | sqlstate::CANNOT_CONNECT_NOW
        | sqlstate::QUERY_CANCELED
        | sqlstate::LOCK_NOT_AVAILABLE
        | sqlstate::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
        | sqlstate::SERIALIZATION_FAILURE
        | sqlstate::DEADLOCK_DETECTED => return Disposition::Retry,
        sqlstate::PROGRAM_LIMIT_EXCEEDED => return Disposition::DeadLetter,
        _ => {}
    }
    match code.get(..2) {
        Some("08" | "53") => Disposition::Retry,
        Some("21" | "22" | "23" | "P0") => Disposition::DeadLetter,
        _ => Disposition::Fatal,
    }
}

/// The SQLSTATEs named by the disposition table.
pub mod sqlstate {
    /// `54000`: a row beyond a server limit (`index row size … exceeds btree version 4
    /// maximum`: a key value too long to index) — a property of that row.
    pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
    /// `57P01`: the server is shutting down (fast shutdown, `pg_terminate_backend`).
    pub const ADMIN_SHUTDOWN: &str = "57P01";
    /// `23503`: a foreign key points at a row that does not exist (for sluice: an
    /// application deleted after its id was resolved).
    pub const FOREIGN_KEY_VIOLATION: &str = "23503";
    /// `21000`: cardinality violation (`ON CONFLICT DO UPDATE command cannot affect row a
    /// second time`).
    pub const CARDINALITY_VIOLATION: &str = "21000";
    /// `57P02`: another backend crashed; the server is resetting.
    pub const CRASH_SHUTDOWN: &str = "57P02";
    /// `57P03`: the server is starting up or in recovery.
    pub const CANNOT_CONNECT_NOW: &str = "57P03";
    /// `57014`: `statement_timeout` fired (or the query was cancelled).
    pub const QUERY_CANCELED: &str = "57014";
    /// `55P03`: `lock_timeout` fired (or `NOWAIT` found the lock taken).
    pub const LOCK_NOT_AVAILABLE: &str = "55P03";
    /// `25P03`: `idle_in_transaction_session_timeout` ended the session.
    pub const IDLE_IN_TRANSACTION_SESSION_TIMEOUT: &str = "25P03";
    /// `40001`: serialization failure.
    pub const SERIALIZATION_FAILURE: &str = "40001";
    /// `40P01`: deadlock detected.
    pub const DEADLOCK_DETECTED: &str = "40P01";
}

/// librdkafka's own flags for an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KafkaErrorFlags {
    /// `rd_kafka_error_is_fatal`: the client instance is unusable.
    pub fatal: bool,
    /// `rd_kafka_error_is_retriable`: the same call may succeed later.
    pub retriable: bool,
}

/// Classifies a Kafka client error from librdkafka's flags: fatal beats retriable, and an
/// error that is neither is fatal (we do not guess that an unknown failure will pass).
pub fn classify_kafka(flags: KafkaErrorFlags) -> Disposition {
    if flags.fatal {
        Disposition::Fatal
    } else if flags.retriable {
        Disposition::Retry
    } else {
        Disposition::Fatal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstate_table() {
        let cases = [
            ("08000", Disposition::Retry),
            ("08003", Disposition::Retry),
            ("08006", Disposition::Retry),
            ("08P01", Disposition::Retry),
            ("53000", Disposition::Retry),
            ("53100", Disposition::Retry),
            ("53200", Disposition::Retry),
            ("53300", Disposition::Retry),
            ("57P01", Disposition::Retry),
            ("57P02", Disposition::Retry),
            ("57P03", Disposition::Retry),
            ("57014", Disposition::Retry),
            ("55P03", Disposition::Retry),
            ("25P03", Disposition::Retry),
            ("40001", Disposition::Retry),
            ("40P01", Disposition::Retry),
            ("22001", Disposition::DeadLetter),
            ("22003", Disposition::DeadLetter),
            ("22P02", Disposition::DeadLetter),
            ("23503", Disposition::DeadLetter),
            ("23505", Disposition::DeadLetter),
            ("23514", Disposition::DeadLetter),
            ("P0001", Disposition::DeadLetter),
            ("21000", Disposition::DeadLetter),
            ("P0004", Disposition::DeadLetter),
            ("40000", Disposition::Fatal),
            ("42501", Disposition::Fatal),
            ("42P01", Disposition::Fatal),
            ("55000", Disposition::Fatal),
            ("55006", Disposition::Fatal),
            ("25P02", Disposition::Fatal),
            ("25006", Disposition::Fatal),
            ("57P04", Disposition::Fatal),
            ("XX000", Disposition::Fatal),
            ("", Disposition::Fatal),
            ("2", Disposition::Fatal),
        ];
        for (code, expected) in cases {
            assert_eq!(classify_sqlstate(code), expected, "SQLSTATE {code:?}");
        }
    }

    #[test]
    fn kafka_flags_table() {
        let flags = |fatal, retriable| KafkaErrorFlags { fatal, retriable };
        assert_eq!(classify_kafka(flags(false, true)), Disposition::Retry);
        assert_eq!(classify_kafka(flags(true, true)), Disposition::Fatal);
        assert_eq!(classify_kafka(flags(true, false)), Disposition::Fatal);
        assert_eq!(classify_kafka(flags(false, false)), Disposition::Fatal);
    }
}
