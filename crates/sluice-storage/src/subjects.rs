//! A sink reading a registry format, checked at start against its subject's latest version
//! (docs/ARCHITECTURE.md#registry-formats): every field a column reads must be in that
//! schema, or the process stops before consuming anything. The subject is the sink's
//! `subject`, or `<topic>-value` (the TopicNameStrategy). A Debezium sink's fields are read
//! from the row image, `after` in the change event's schema.

use sluice_core::Disposition;
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
    /// Every field is in the latest version, or in an older one (`older`: (version,
    /// column) for a field the latest version removed).
    Fits {
        /// The version checked.
        version: i64,
        /// Its schema id.
        id: i32,
        /// The columns whose field only an older version has, with that version.
        older: Vec<(i64, String)>,
    },
    /// Fields no version has: (column, field).
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
            Checked::Fits { version, id, older } if older.is_empty() => write!(
                f,
                "sink `{sink}`: subject `{subject}` version {version} (schema id {id}) has every mapped field"
            ),
            Checked::Fits { version, id, older } => {
                let columns: Vec<String> = older
                    .iter()
                    .map(|(v, column)| format!("`{column}` (version {v})"))
                    .collect();
                write!(
                    f,
                    "sink `{sink}`: subject `{subject}` version {version} (schema id {id}) has every mapped field but {}, which older versions have (NULL in records of newer ones)",
                    columns.join(", ")
                )
            }
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
                    "sink `{sink}`: no version of subject `{subject}` (latest: version {version}, schema id {id}) has the field: {}",
                    fields.join(", ")
                )
            }
            Checked::NotChecked(reason) => {
                write!(
                    f,
                    "sink `{sink}`: subject `{subject}` not checked: {reason}"
                )
            }
        }
    }
}

/// The value subjects of the sinks that read a registry format, each checked.
pub fn check_subjects(sinks: &[&Sink], registry: &Registry) -> Vec<SubjectCheck> {
    let mut out = Vec::new();
    // The registry's subjects, listed once (for the names near a subject without versions).
    let mut listed: Option<Vec<String>> = None;
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
            out.push(check_one(sink, subject, registry, &mut listed));
        }
    }
    out
}

fn check_one(
    sink: &Sink,
    subject: String,
    registry: &Registry,
    listed: &mut Option<Vec<String>>,
) -> SubjectCheck {
    let outcome = match registry.latest(&subject) {
        Ok((latest, schema)) => {
            let fields = mapped_fields(sink);
            let mut missing: Vec<(String, String)> = fields
                .iter()
                .filter(|(_, _, segments)| !schema.may_have_path(&as_strs(segments)))
                .map(|(column, field, _)| (column.clone(), field.clone()))
                .collect();
            let mut older = Vec::new();
            if !missing.is_empty() {
                // A field the latest version removed is still in the records of an older one.
                match older_versions_with(registry, &subject, latest.version, &fields, &mut missing)
                {
                    Ok(found) => older = found,
                    // Which versions hold the field is not known: a registry's passing failure
                    // must not refuse the mapping (the process would exit and consume nothing).
                    Err(error) => {
                        return SubjectCheck {
                            sink: sink.name.clone(),
                            subject,
                            outcome: Checked::NotChecked(format!(
                                "its older versions cannot be read: {error}"
                            )),
                        };
                    }
                }
            }
            if missing.is_empty() {
                Checked::Fits {
                    version: latest.version,
                    id: latest.id,
                    older,
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
            let listed = listed.get_or_insert_with(|| registry.subjects().unwrap_or_default());
            Checked::NotChecked(format!(
                "it has no version yet (nothing produced?){}",
                near_subjects(&subject, listed)
            ))
        }
        Err(error) => Checked::NotChecked(error.to_string()),
    };
    SubjectCheck {
        sink: sink.name.clone(),
        subject,
        outcome,
    }
}

/// Those of the registry's subjects (`listed`; empty when the list could not be read) whose
/// names are near `subject` (a misspelt name, another case), as `; the registry has …` —
/// empty when none is.
fn near_subjects(subject: &str, listed: &[String]) -> String {
    let wanted = subject.to_lowercase();
    let length = wanted.chars().count();
    let within = NEAR_EDITS.max(length / 5);
    let mut near: Vec<(usize, &str)> = listed
        .iter()
        .filter(|s| s.as_str() != subject && s.chars().count().abs_diff(length) <= within)
        .map(|s| (edit_distance(&wanted, &s.to_lowercase()), s.as_str()))
        .filter(|(distance, _)| *distance <= within)
        .collect();
    near.sort_unstable();
    if near.is_empty() {
        return String::new();
    }
    let names: Vec<String> = near.iter().take(3).map(|(_, s)| format!("`{s}`")).collect();
    format!("; the registry has {}", names.join(", "))
}

/// Edits within which a subject's name is near another's (more for longer names).
const NEAR_EDITS: usize = 3;

/// The Levenshtein distance of two names, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Each field source the file wrote (not those `columns = "auto"` filled in, whose fields
/// may be missing): (column, field as written, path in the schema — under `after` for a
/// Debezium sink, whose fields are the row image's).
fn mapped_fields(sink: &Sink) -> Vec<(String, String, Vec<String>)> {
    let prefix: &[&str] = if sink.format == Format::Debezium {
        &["after"]
    } else {
        &[]
    };
    sink.columns
        .iter()
        .filter(|column| !column.filled_in)
        .filter_map(|column| match &column.source {
            Source::Field(path) => {
                let mut segments: Vec<String> = prefix.iter().map(|s| (*s).to_owned()).collect();
                segments.extend(path.segments().iter().cloned());
                Some((column.column.clone(), path.to_string(), segments))
            }
            _ => None,
        })
        .collect()
}

fn as_strs(segments: &[String]) -> Vec<&str> {
    segments.iter().map(String::as_str).collect()
}

/// The versions before `latest`, newest first, that hold fields `missing` names: those
/// fields leave `missing`; the versions that held one, as (version, column). An error when
/// the versions cannot be listed, or one cannot be read for a transient reason; a version
/// the registry no longer has, or whose schema does not compile, holds nothing.
fn older_versions_with(
    registry: &Registry,
    subject: &str,
    latest: i64,
    fields: &[(String, String, Vec<String>)],
    missing: &mut Vec<(String, String)>,
) -> Result<Vec<(i64, String)>, RegistryError> {
    let mut found = Vec::new();
    let mut versions = registry.versions(subject)?;
    versions.retain(|v| *v < latest);
    for version in versions.into_iter().rev() {
        if missing.is_empty() {
            break;
        }
        let schema = match registry.version(subject, &version.to_string()) {
            Ok((_, schema)) => schema,
            Err(error) if error.disposition() == Disposition::Retry => return Err(error),
            Err(_) => continue,
        };
        missing.retain(|(column, _)| {
            let path = fields.iter().find(|(c, ..)| c == column).map(|(.., p)| p);
            let held = path.is_some_and(|p| schema.may_have_path(&as_strs(p)));
            if held {
                found.push((version, column.clone()));
            }
            !held
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::{edit_distance, near_subjects};

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("orders-value", "orders-value"), 0);
        assert_eq!(edit_distance("orders-vaule", "orders-value"), 2);
        assert_eq!(edit_distance("order-value", "orders-value"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("ä-value", "a-value"), 1);
    }

    #[test]
    fn near_subjects_are_named_nearest_first_never_the_subject_itself() {
        let listed: Vec<String> = [
            "orders-value",
            "Orders-Value",
            "orders-key",
            "payments-value",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            near_subjects("orders-vaule", &listed),
            "; the registry has `Orders-Value`, `orders-value`"
        );
        assert_eq!(
            near_subjects("orders-value", &listed),
            "; the registry has `Orders-Value`"
        );
        assert_eq!(near_subjects("invoices-value", &listed), "");
        assert_eq!(near_subjects("orders-value", &[]), "");
    }
}
