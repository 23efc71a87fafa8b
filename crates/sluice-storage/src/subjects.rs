//! A sink reading a registry format, checked at start against its subject's latest version
//! (docs/ARCHITECTURE.md#registry-formats): every field a column reads must be in that
//! schema, or the process stops before consuming anything. The subject is the sink's
//! `subject`, or `<topic>-value` (the TopicNameStrategy). A Debezium sink's fields are read
//! from the row image, `after` in the change event's schema.

use sluice_registry::{Registry, RegistryError};
use sluice_sinks::{Format, Sink, Source};
use std::fmt;

/// What checking one subject came to.
#[derive(Debug)]
pub struct SubjectCheck {
    /// The sink.
    pub sink: String,
    /// The subject.
    pub subject: String,
    /// The outcome.
    pub outcome: Checked,
}

/// The outcome of one subject's check.
#[derive(Debug)]
pub enum Checked {
    /// Every field is in the latest version.
    Fits {
        /// The version checked.
        version: i64,
        /// Its schema id.
        id: i32,
    },
    /// Fields the latest version does not have: (column, field).
    Lacks {
        /// The version checked.
        version: i64,
        /// Its schema id.
        id: i32,
        /// The columns whose field it lacks, with the field.
        missing: Vec<(String, String)>,
    },
    /// Not checked: the registry cannot be asked now, or the subject has no version yet.
    NotChecked(String),
}

impl SubjectCheck {
    /// Whether the mapping is refused.
    pub fn refuses(&self) -> bool {
        matches!(self.outcome, Checked::Lacks { .. })
    }
}

impl fmt::Display for SubjectCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            sink,
            subject,
            outcome,
        } = self;
        match outcome {
            Checked::Fits { version, id } => write!(
                f,
                "sink `{sink}`: subject `{subject}` version {version} (schema id {id}) has every mapped field"
            ),
            Checked::Lacks {
                version,
                id,
                missing,
            } => {
                let fields: Vec<String> = missing
                    .iter()
                    .map(|(column, field)| format!("column `{column}` reads `{field}`"))
                    .collect();
                write!(
                    f,
                    "sink `{sink}`: subject `{subject}` version {version} (schema id {id}) has no such field: {}",
                    fields.join(", ")
                )
            }
            Checked::NotChecked(reason) => {
                write!(f, "sink `{sink}`: subject `{subject}` not checked: {reason}")
            }
        }
    }
}

/// The value subjects of the sinks that read a registry format, each checked.
pub fn check_subjects(sinks: &[&Sink], registry: &Registry) -> Vec<SubjectCheck> {
    let mut out = Vec::new();
    for sink in sinks.iter().filter(|s| s.value_encoding.is_registry()) {
        let subjects: Vec<String> = match (&sink.subject, sink.topics.is_pattern()) {
            (Some(subject), _) => vec![subject.clone()],
            (None, true) => {
                out.push(SubjectCheck {
                    sink: sink.name.clone(),
                    subject: "<topic>-value".into(),
                    outcome: Checked::NotChecked(
                        "a topic pattern's topics are not known at start".into(),
                    ),
                });
                continue;
            }
            (None, false) => sink
                .topics
                .named()
                .iter()
                .map(|t| format!("{t}-value"))
                .collect(),
        };
        for subject in subjects {
            out.push(check_one(sink, subject, registry));
        }
    }
    out
}

fn check_one(sink: &Sink, subject: String, registry: &Registry) -> SubjectCheck {
    let outcome = match registry.latest(&subject) {
        Ok((latest, schema)) => {
            let prefix: &[&str] = if sink.format == Format::Debezium {
                &["after"]
            } else {
                &[]
            };
            let missing: Vec<(String, String)> = sink
                .columns
                .iter()
                .filter_map(|column| match &column.source {
                    Source::Field(path) => {
                        let mut segments: Vec<&str> = prefix.to_vec();
                        segments.extend(path.segments().iter().map(String::as_str));
                        (!schema.has_path(&[], &segments))
                            .then(|| (column.column.clone(), path.to_string()))
                    }
                    _ => None,
                })
                .collect();
            if missing.is_empty() {
                Checked::Fits {
                    version: latest.version,
                    id: latest.id,
                }
            } else {
                Checked::Lacks {
                    version: latest.version,
                    id: latest.id,
                    missing,
                }
            }
        }
        Err(RegistryError::UnknownSubject { .. }) => {
            Checked::NotChecked("it has no version yet (nothing produced?)".into())
        }
        Err(error) => Checked::NotChecked(error.to_string()),
    };
    SubjectCheck {
        sink: sink.name.clone(),
        subject,
        outcome,
    }
}
