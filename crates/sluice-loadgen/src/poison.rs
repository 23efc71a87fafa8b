//! Poison messages: every way a record can be impossible to store.

use crate::{Expect, Generated};
use rand::Rng;
use sluice_core::PipelineKind;

/// A kind of poison message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoisonKind {
    /// Not JSON.
    InvalidJson,
    /// Not UTF-8.
    InvalidUtf8,
    /// JSON, but not an object.
    NotAnObject,
    /// A required field is missing.
    MissingField,
    /// A field has the wrong JSON type.
    WrongType,
    /// An integer out of the column's range.
    OutOfRange,
    /// A NaN token.
    NanToken,
    /// U+0000 in a text field.
    NulCharacter,
    /// The legacy camelCase shape.
    LegacyCamelCase,
    /// A package name nobody registered.
    UnknownPackage,
    /// Over 64 KiB and invalid.
    Oversized,
    /// A tombstone (null value).
    Tombstone,
}

impl PoisonKind {
    /// Every kind.
    pub const ALL: [PoisonKind; 12] = [
        Self::InvalidJson,
        Self::InvalidUtf8,
        Self::NotAnObject,
        Self::MissingField,
        Self::WrongType,
        Self::OutOfRange,
        Self::NanToken,
        Self::NulCharacter,
        Self::LegacyCamelCase,
        Self::UnknownPackage,
        Self::Oversized,
        Self::Tombstone,
    ];

    /// The dead-letter `error_kind` the consumer should record.
    pub fn error_kind(self) -> &'static str {
        match self {
            Self::UnknownPackage => "unknown_application",
            _ => "decode_error",
        }
    }
}

/// A poison record for a reviews topic (other pipelines share the generic kinds).
pub fn poison<R: Rng>(
    pipeline: PipelineKind,
    kind: PoisonKind,
    app: &str,
    rng: &mut R,
) -> Generated {
    let id = rng.random_range(0..u32::MAX);
    let good = |extra: &str| {
        format!(
            r#"{{"review_id":"poison-{id}","package_name":"{app}","score":4,"thumbs_up_count":1,"at":"2026-01-01T00:00:00Z","last_synced_at":"2026-01-01T00:00:00Z"{extra}}}"#
        )
    };
    let payload: Option<Vec<u8>> = match kind {
        PoisonKind::InvalidJson => Some(br#"{"review_id": "x", "score": 4,"#.to_vec()),
        PoisonKind::InvalidUtf8 => Some(b"{\"review_id\":\"\xff\xfe\"}".to_vec()),
        PoisonKind::NotAnObject => Some(b"[1,2,3]".to_vec()),
        PoisonKind::MissingField => Some(
            format!(r#"{{"review_id":"poison-{id}","package_name":"{app}","score":4}}"#)
                .into_bytes(),
        ),
        PoisonKind::WrongType => Some(
            good("")
                .replace(r#""score":4"#, r#""score":"4""#)
                .into_bytes(),
        ),
        PoisonKind::OutOfRange => Some(
            good("")
                .replace(r#""thumbs_up_count":1"#, r#""thumbs_up_count":2147483648"#)
                .into_bytes(),
        ),
        PoisonKind::NanToken => Some(
            good("")
                .replace(r#""score":4"#, r#""score":NaN"#)
                .into_bytes(),
        ),
        PoisonKind::NulCharacter => Some(good(r#","content":"bad \u0000 byte""#).into_bytes()),
        PoisonKind::LegacyCamelCase => Some(
            format!(
                r#"{{"reviewId":"poison-{id}","packageName":"{app}","score":4,"thumbsUpCount":1}}"#
            )
            .into_bytes(),
        ),
        PoisonKind::UnknownPackage => Some(
            good("")
                .replace(
                    &format!(r#""package_name":"{app}""#),
                    r#""package_name":"com.unknown.app""#,
                )
                .into_bytes(),
        ),
        PoisonKind::Oversized => {
            Some(good(&format!(r#","content":"{}","score":9"#, "x".repeat(70_000))).into_bytes())
        }
        PoisonKind::Tombstone => None,
    };
    Generated {
        pipeline,
        key: app.as_bytes().to_vec(),
        payload,
        expect: Expect::DeadLetter(kind),
    }
}
