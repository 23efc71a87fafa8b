//! Why a payload could not be decoded: one reason per message, naming the field at fault.

/// The reason a payload was rejected; its `Display` is the dead-letter `reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The payload is absent (a tombstone).
    #[error("record has no value (tombstone)")]
    NullPayload,
    /// The payload is not UTF-8; `offset` is the index of the first invalid byte.
    #[error("payload is not valid UTF-8 (first invalid byte at offset {offset})")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// The payload is not JSON (this includes `NaN` and `Infinity` tokens).
    #[error("payload is not valid JSON: {detail}")]
    InvalidJson {
        /// Parser message with line and column and, when it can be found, the nearest field.
        detail: String,
    },
    /// The payload is valid JSON but not an object.
    #[error("payload is a JSON {found}, not an object")]
    NotAnObject {
        /// The JSON type found instead (`array`, `string`, `number`, `boolean`, `null`).
        found: &'static str,
    },
    /// The payload's envelope is not what the sink's format says (a schema registry wire
    /// header with another magic byte, a Debezium event without `op`, …).
    #[error("payload envelope: {detail}")]
    Envelope {
        /// What is wrong with it.
        detail: String,
    },
    /// A schema registry record that cannot be decoded: its wire header, its schema (not in
    /// the registry, not compiling) or its bytes against that schema.
    #[error("{detail}")]
    Registry {
        /// What is wrong, naming the schema id where one was read.
        detail: String,
    },
    /// A registry record whose writer's schema has not been fetched yet: never a dead letter
    /// (the batch waits for the registry and is decoded again).
    #[error("schema id {schema_id} not fetched yet")]
    SchemaPending {
        /// The id.
        schema_id: i32,
    },
    /// A required field is absent or `null`.
    #[error("field `{field}`: required field is missing{hint}")]
    Missing {
        /// The missing field (a path into the record).
        field: std::borrow::Cow<'static, str>,
        /// Empty, or a parenthesised hint such as a legacy camelCase twin that was present.
        hint: String,
    },
    /// A field is present but has the wrong type or breaks a rule (range, length, syntax).
    #[error("field `{field}`: {rule}")]
    Invalid {
        /// The field, with an index for array elements (`histogram[3]`, `domains[12]`).
        field: String,
        /// The rule that was broken, with its limits and the value found.
        rule: String,
    },
}

impl DecodeError {
    /// The field this error is about, when it is about one field.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Missing { field, .. } => Some(field.as_ref()),
            Self::Invalid { field, .. } => Some(field),
            Self::NullPayload
            | Self::InvalidUtf8 { .. }
            | Self::InvalidJson { .. }
            | Self::Envelope { .. }
            | Self::Registry { .. }
            | Self::SchemaPending { .. }
            | Self::NotAnObject { .. } => None,
        }
    }

    /// Builds an [`DecodeError::Invalid`] for `field` breaking `rule`.
    pub(crate) fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            rule: rule.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DecodeError;

    #[test]
    fn display_names_the_field() {
        let missing = DecodeError::Missing {
            field: "package_name".into(),
            hint: " (found legacy camelCase field `packageName`)".into(),
        };
        assert_eq!(
            missing.to_string(),
            "field `package_name`: required field is missing \
             (found legacy camelCase field `packageName`)"
        );
        assert_eq!(missing.field(), Some("package_name"));

        let invalid = DecodeError::invalid("histogram[3]", "must be an integer, got 1.5");
        assert_eq!(
            invalid.to_string(),
            "field `histogram[3]`: must be an integer, got 1.5"
        );
        assert_eq!(invalid.field(), Some("histogram[3]"));
    }

    #[test]
    fn payload_level_errors_have_no_field() {
        let errors = [
            DecodeError::NullPayload,
            DecodeError::InvalidUtf8 { offset: 3 },
            DecodeError::InvalidJson { detail: "x".into() },
            DecodeError::NotAnObject { found: "array" },
        ];
        for error in errors {
            assert_eq!(error.field(), None, "{error}");
        }
        assert_eq!(
            DecodeError::NullPayload.to_string(),
            "record has no value (tombstone)"
        );
        assert_eq!(
            DecodeError::NotAnObject { found: "array" }.to_string(),
            "payload is a JSON array, not an object"
        );
    }
}
