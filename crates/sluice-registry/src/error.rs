//! What can go wrong asking the registry, and what each means for the records that wait.

use sluice_core::Disposition;

/// A failed request to the registry, or a schema it gave that does not compile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No answer: connection refused, a TLS failure, a timeout.
    #[error("schema registry {url}: no answer: {reason}")]
    Unreachable {
        /// The request's URL (no credentials in it).
        url: String,
        /// Why.
        reason: String,
    },
    /// An answer the client cannot use: a server error, a rate limit, refused credentials.
    #[error("schema registry {url}: HTTP {status}: {body}")]
    Status {
        /// The request's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// The registry does not know this schema id (or subject): the records that name it can
    /// never be decoded against this registry.
    #[error("schema id {id} is not in the schema registry ({reason})")]
    UnknownId {
        /// The id.
        id: i32,
        /// The registry's words.
        reason: String,
    },
    /// The registry said it does not know this schema id (or a schema it references), and
    /// not yet long enough to be believed: a registry that has just started, or a follower
    /// that has not read a schema just registered on its leader, can say so of an id that
    /// exists. The records wait and the id is asked again; it is refused
    /// ([`Self::UnknownId`], or [`Self::MissingReference`] for a reference) when the
    /// registry still says so a while after the first time.
    #[error(
        "schema id {id} is not in the schema registry yet ({reason}): asking again before its records are dead-lettered"
    )]
    NotFoundYet {
        /// The id.
        id: i32,
        /// The registry's words.
        reason: String,
    },
    /// The subject has no version (`sluice sinks validate` before anything was produced).
    #[error("schema registry subject `{subject}` has no version")]
    UnknownSubject {
        /// The subject.
        subject: String,
    },
    /// The registry's answer is not what its API describes.
    #[error("schema registry {url}: unexpected answer: {reason}")]
    Malformed {
        /// The request's URL.
        url: String,
        /// What was wrong.
        reason: String,
    },
    /// A schema the schema of an id references is not in the registry (its subject or
    /// version): the records that name the id can never be decoded against this registry.
    #[error("schema id {id}: {reason}")]
    MissingReference {
        /// The id.
        id: i32,
        /// Which reference.
        reason: String,
    },
    /// The schema of an id does not compile (or its references do not resolve).
    #[error("schema id {id}: {reason}")]
    Schema {
        /// The id.
        id: i32,
        /// Why.
        reason: String,
    },
    /// A TLS file could not be read or parsed.
    #[error("schema registry TLS: {0}")]
    Tls(String),
}

impl RegistryError {
    /// Transient (the batch waits and tries again), a dead letter for the records naming the
    /// id, or fatal (the configuration is wrong).
    pub fn disposition(&self) -> Disposition {
        match self {
            Self::Unreachable { .. }
            | Self::Status { .. }
            | Self::Malformed { .. }
            | Self::NotFoundYet { .. } => Disposition::Retry,
            Self::UnknownId { .. }
            | Self::MissingReference { .. }
            | Self::Schema { .. }
            | Self::UnknownSubject { .. } => Disposition::DeadLetter,
            Self::Tls(_) => Disposition::Fatal,
        }
    }
}
