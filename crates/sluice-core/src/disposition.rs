//! What to do with an error: retry, dead-letter, or stop (SPEC S4.7).
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
/// | `40001`, `40P01` | serialization failure, deadlock | retry |
/// | `22…`, `23…` | data exception, integrity constraint violation | dead-letter the row |
/// | anything else | e.g. `42501` insufficient privilege, `42P01` undefined table | fatal |
pub fn classify_sqlstate(code: &str) -> Disposition {
    match code {
        "57P01" | "57P02" | "57P03" | "40001" | "40P01" => return Disposition::Retry,
        _ => {}
    }
    match code.get(..2) {
        Some("08" | "53") => Disposition::Retry,
        Some("22" | "23") => Disposition::DeadLetter,
        _ => Disposition::Fatal,
    }
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
            ("40001", Disposition::Retry),
            ("40P01", Disposition::Retry),
            ("22001", Disposition::DeadLetter),
            ("22003", Disposition::DeadLetter),
            ("22P02", Disposition::DeadLetter),
            ("23503", Disposition::DeadLetter),
            ("23505", Disposition::DeadLetter),
            ("23514", Disposition::DeadLetter),
            ("40000", Disposition::Fatal),
            ("42501", Disposition::Fatal),
            ("42P01", Disposition::Fatal),
            ("57014", Disposition::Fatal),
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
