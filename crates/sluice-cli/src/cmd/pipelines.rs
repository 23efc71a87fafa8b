//! The pipelines of this process as every storage command sees them (`run`, `lag`, `replay`,
//! `health`, `dlq`): the seed sinks the settings name and the sinks of a mapping file
//! (`--sinks FILE|DIR`, else `SLUICE_SINKS_FILE`), selected by
//! [`sluice_storage::select`]. A file that does not read, parse or check exits 2 naming
//! the file, the sink and the key; nothing is consumed.

use anyhow::anyhow;
use sluice_core::PipelineKind;
use sluice_core::topics::Topics;
use sluice_process::Failure;
use sluice_sinks::{MappingError, Sink, SinkError, check_sinks, parse_sinks};
use sluice_storage::{Pipeline, Unplanned, plan_pipelines};
use sluice_storage::{Selection, StorageSettings, select};
use sqlx::PgConnection;

/// The variable naming the mapping file.
pub const SINKS_FILE_VAR: &str = "SLUICE_SINKS_FILE";

/// The settings, and the sinks of the mapping file if one is given.
#[derive(Debug)]
pub struct Pipelines {
    /// The validated settings.
    pub settings: StorageSettings,
    /// `STORAGE_GROUP_PREFIX` (a sink's default group is `<prefix>.<name>`).
    pub group_prefix: String,
    /// The mapping file or folder, if any.
    pub file: Option<String>,
    /// Its sinks, parsed and checked without a database.
    pub sinks: Vec<Sink>,
}

impl Pipelines {
    /// The settings and the mapping file of `flag`, else of `SLUICE_SINKS_FILE`.
    pub fn load(flag: Option<&str>) -> Result<Self, Failure> {
        let settings = super::settings()?;
        let file = flag
            .map(str::to_owned)
            .or_else(|| sluice_process::env_lookup(SINKS_FILE_VAR).filter(|f| !f.is_empty()));
        let sinks = match &file {
            Some(file) => read_sinks(file).map_err(|errors| refused(file, &errors))?,
            None => Vec::new(),
        };
        Ok(Self {
            settings,
            group_prefix: group_prefix(),
            file,
            sinks,
        })
    }

    /// The pipelines to run: exit 2 when a sink's name or group collides.
    pub fn selection(&self) -> Result<Selection<'_>, Failure> {
        let seeds_named =
            sluice_process::env_lookup("STORAGE_PIPELINES").is_some_and(|v| !v.is_empty());
        let file = self.file.as_deref().unwrap_or("");
        select(
            &self.settings,
            seeds_named,
            &self.group_prefix,
            file,
            &self.sinks,
        )
        .map_err(Failure::config)
    }

    /// The largest batch of any configured pipeline or sink.
    pub fn largest_batch(&self) -> usize {
        let seeds = self.settings.pipelines.iter().map(|p| p.batch_size);
        seeds
            .chain(self.sinks.iter().map(|s| s.batch_size))
            .max()
            .unwrap_or(1)
    }

    /// Every selected pipeline's (name, topics, group).
    pub fn names(&self) -> Result<Vec<(String, Topics, String)>, Failure> {
        Ok(self.selection()?.names(&self.group_prefix))
    }

    /// What the selected pipelines need of the deployment: the seed system's tables (when a
    /// seed pipeline runs, or a mapping file writes one of its tables, as `deploy/sinks/`
    /// does), the topics they read by name, the tables they write.
    pub fn needs(&self) -> Result<Needs, Failure> {
        let selection = self.selection()?;
        let seed_tables = PipelineKind::ALL.map(PipelineKind::table);
        let is_seed_table = |table: &str| {
            let bare = table.rsplit('.').next().unwrap_or(table);
            seed_tables.contains(&bare)
        };
        let mut needs = Needs {
            seeds: !selection.seeds.is_empty()
                || selection.declared.iter().any(|s| is_seed_table(&s.table)),
            ..Needs::default()
        };
        let add = |list: &mut Vec<String>, item: &str| {
            if !list.iter().any(|i| i == item) {
                list.push(item.to_owned());
            }
        };
        for seed in &selection.seeds {
            add(&mut needs.topics, &seed.topic);
            add(&mut needs.tables, seed.kind.table());
        }
        for sink in &selection.declared {
            for topic in sink.topics.named() {
                add(&mut needs.topics, topic);
            }
            if sink.topics.is_pattern() && !needs.patterns.contains(&sink.topics) {
                needs.patterns.push(sink.topics.clone());
            }
            // A table with placeholders names no table until records fill it in; a sink of
            // routes writes its routes' tables (its own `table` is empty).
            if sink.routes.is_empty() {
                if sink.table_template.is_none() {
                    add(&mut needs.tables, &sink.table);
                }
            } else {
                for route in &sink.routes {
                    if route.sink.table_template.is_none() {
                        add(&mut needs.tables, &route.sink.table);
                    }
                }
            }
        }
        Ok(needs)
    }
}

/// What a process's selected pipelines need of the deployment ([`Pipelines::needs`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Needs {
    /// The seed system's tables (and so its applications table).
    pub seeds: bool,
    /// The topics read by name, in selection order (a `topic_pattern` names none).
    pub topics: Vec<String>,
    /// The `topic_pattern`s read: their topics are the cluster's that match, now.
    pub patterns: Vec<Topics>,
    /// The tables written, in selection order (not those a `table` with placeholders
    /// names record by record).
    pub tables: Vec<String>,
}

/// `STORAGE_GROUP_PREFIX` as the settings read it.
pub fn group_prefix() -> String {
    sluice_process::env_lookup("STORAGE_GROUP_PREFIX")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "storage-consumer".into())
}

/// The sinks of a mapping file, or of every `*.toml` of a folder (in name order), parsed and
/// checked together (names and topics distinct across the files); every error, not only the
/// first.
pub fn read_sinks(path: &str) -> Result<Vec<Sink>, Vec<MappingError>> {
    let read_error = |file: &str, e: std::io::Error| MappingError::Read {
        file: file.to_owned(),
        message: e.to_string(),
    };
    let files: Vec<String> = if std::path::Path::new(path).is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| vec![read_error(path, e)])?;
        let mut files: Vec<String> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .map(|p| p.display().to_string())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(vec![MappingError::Read {
                file: path.to_owned(),
                message: "the folder holds no *.toml mapping file".into(),
            }]);
        }
        files
    } else {
        vec![path.to_owned()]
    };
    let mut sinks = Vec::new();
    let mut errors = Vec::new();
    for file in &files {
        match std::fs::read_to_string(file) {
            Ok(text) => match parse_sinks(file, &text) {
                Ok(mut more) => sinks.append(&mut more),
                Err(error) => errors.push(error),
            },
            Err(e) => errors.push(read_error(file, e)),
        }
    }
    if errors.is_empty() {
        errors = check_sinks(path, &sinks);
    }
    if errors.is_empty() {
        Ok(sinks)
    } else {
        Err(errors)
    }
}

/// Each sink planned against the live schema (`conn`'s catalog): the plans, or every error
/// of every sink.
pub async fn plan_sinks(
    conn: &mut PgConnection,
    sinks: &[Sink],
    group_prefix: &str,
) -> Result<Result<Vec<Pipeline>, Vec<SinkError>>, Failure> {
    let unplanned = sinks
        .iter()
        .map(|sink| Unplanned {
            sink: sink.clone(),
            writers: 1,
            topic_source: String::new(),
        })
        .collect();
    let planned = plan_pipelines(conn, unplanned, group_prefix)
        .await
        .map_err(|e| anyhow!("cannot read the catalog: {e}"))?;
    Ok(planned)
}

/// Exit 2: each error on its own line on stderr.
fn refused(file: &str, errors: &[MappingError]) -> Failure {
    for error in errors {
        eprintln!("sluice: invalid: {error}");
    }
    Failure::config(anyhow!(
        "{file}: {} error(s); nothing was consumed",
        errors.len()
    ))
}
