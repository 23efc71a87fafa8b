//! The storage consumer's per-pipeline settings: which pipelines run (`STORAGE_PIPELINES`),
//! their groups (`STORAGE_GROUP_PREFIX`), and each one's topic, batch size and writers — its
//! own `…_<PIPELINE>` variable, else the shared one, else the built-in default.

use sluice_core::pipeline::PipelineKind;
use sluice_core::settings::forms::{Count, Topic};
use sluice_core::settings::variable::{Form, PerPipeline};
use sluice_core::settings::{EnvReader, SettingsError, Var, is_topic_name};

/// Settings of one pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineSettings {
    /// Which pipeline.
    pub kind: PipelineKind,
    /// The topic it consumes.
    pub topic: String,
    /// Its consumer group (`prefix.pipeline`).
    pub group: String,
    /// Max records per transaction (a batch holds one partition's records).
    pub batch_size: usize,
    /// Writers (database connections) of the pipeline; any free one takes the next batch of
    /// any partition with no batch in flight.
    pub writers: usize,
}

/// Built-in writers per pipeline (`STORAGE_WRITERS`), chosen by `sluice-lab bench`: 1, 2 and 4
/// side by side, 2 the fastest on inserts (docs/performance.md).
pub const DEFAULT_WRITERS: usize = 2;
/// The most writers a pipeline may have.
pub const MAX_WRITERS: usize = 8;
/// The largest batch a pipeline may take.
const MAX_BATCH_SIZE: u64 = 100_000;

/// `STORAGE_PIPELINES`.
pub const PIPELINES: Var<PipelineList> =
    Var::new("STORAGE_PIPELINES", (), "pipelines this process runs");

/// `STORAGE_TOPIC_<PIPELINE>`.
pub const TOPIC: PerPipeline<Topic> = PerPipeline {
    pattern: "STORAGE_TOPIC_<PIPELINE>",
    name_of: PipelineKind::topic_variable,
    default_of: PipelineKind::default_topic,
    help: "topic of the <pipeline> pipeline",
};

/// `STORAGE_GROUP_PREFIX`.
pub const GROUP_PREFIX: Var<GroupPrefix> = Var::new(
    "STORAGE_GROUP_PREFIX",
    "storage-consumer",
    "consumer group = prefix.pipeline",
);

/// `STORAGE_MAX_POLL_RECORDS_<PIPELINE>`.
pub const MAX_POLL_RECORDS_OF: PerPipeline<Count> = PerPipeline {
    pattern: "STORAGE_MAX_POLL_RECORDS_<PIPELINE>",
    name_of: PipelineKind::batch_size_variable,
    default_of: |kind| kind.default_batch_size() as u64,
    help: "batch size of one pipeline",
};

/// `STORAGE_MAX_POLL_RECORDS`: unset, each pipeline's own default.
pub const MAX_POLL_RECORDS: Var<SharedBatchSize> = Var::new(
    "STORAGE_MAX_POLL_RECORDS",
    (),
    "batch size of every pipeline without its own",
);

/// `STORAGE_WRITERS_<PIPELINE>`: unset, `STORAGE_WRITERS`.
pub const WRITERS_OF: PerPipeline<WriterCount> = PerPipeline {
    pattern: "STORAGE_WRITERS_<PIPELINE>",
    name_of: PipelineKind::writers_variable,
    default_of: |_| WRITERS.default,
    help: "writers (connections) of one pipeline, 1-8",
};

/// `STORAGE_WRITERS`.
pub const WRITERS: Var<WriterCount> = Var::new(
    "STORAGE_WRITERS",
    DEFAULT_WRITERS,
    "writers (connections) per pipeline, 1-8; any free writer takes the next partition's batch",
);

/// Reads the pipelines this process runs, and the shared writer count.
pub(super) fn read(env: &EnvReader<'_>) -> Result<(Vec<PipelineSettings>, usize), SettingsError> {
    let prefix = GROUP_PREFIX.read(env)?;
    let shared_batch = MAX_POLL_RECORDS.read(env)?;
    let shared_writers = WRITERS.read(env)?;
    let kinds = PIPELINES.read(env)?;
    let mut pipelines = Vec::with_capacity(kinds.len());
    for kind in kinds {
        let topic = TOPIC.read(env, kind)?;
        let own = MAX_POLL_RECORDS_OF.read_set(env, kind)?;
        let batch = own
            .or(shared_batch)
            .unwrap_or(MAX_POLL_RECORDS_OF.default(kind));
        if batch > MAX_BATCH_SIZE {
            let var = if own.is_some() {
                MAX_POLL_RECORDS_OF.name(kind)
            } else {
                MAX_POLL_RECORDS.name.to_owned()
            };
            return Err(SettingsError::invalid(
                &var,
                &batch.to_string(),
                &format!("between 1 and {MAX_BATCH_SIZE}"),
            ));
        }
        let batch_size = usize::try_from(batch).unwrap_or(usize::MAX);
        let writers = WRITERS_OF.read_set(env, kind)?.unwrap_or(shared_writers);
        pipelines.push(PipelineSettings {
            kind,
            topic,
            group: format!("{prefix}.{}", kind.name()),
            batch_size,
            writers,
        });
    }
    Ok((pipelines, shared_writers))
}

/// A `STORAGE_WRITERS_<X>` or `STORAGE_MAX_POLL_RECORDS_<X>` whose `<X>` names no pipeline is
/// an error: a typo (`STORAGE_WRITERS_REVEIWS`), or a mapping file's sink, would otherwise be
/// ignored without a word. `names` are the environment's variable names.
pub(super) fn no_stray_overrides<'a>(
    env: &EnvReader<'_>,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), SettingsError> {
    for name in names {
        // An empty value counts as unset, here as everywhere.
        if env.raw(name).is_none_or(|value| value.trim().is_empty()) {
            continue;
        }
        for shared in [WRITERS.name, MAX_POLL_RECORDS.name] {
            let Some(suffix) = name
                .strip_prefix(shared)
                .and_then(|rest| rest.strip_prefix('_'))
            else {
                continue;
            };
            if !PipelineKind::ALL.iter().any(|k| k.env_suffix() == suffix) {
                return Err(SettingsError::invalid(
                    name,
                    &env.raw(name).unwrap_or_default(),
                    &format!(
                        "a per-pipeline override {shared}_<PIPELINE> with <PIPELINE> one of {} \
                         (a mapping file's sink takes {} and its own batch_size)",
                        PipelineKind::ALL.map(PipelineKind::env_suffix).join(", "),
                        WRITERS.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Comma-separated pipeline names, each once; unset, every pipeline.
#[derive(Debug)]
pub struct PipelineList;

impl Form for PipelineList {
    type Value = Vec<PipelineKind>;
    type Default = ();
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        (): (),
    ) -> Result<Option<Vec<PipelineKind>>, SettingsError> {
        let Some(names) = env.raw(name) else {
            return Ok(None);
        };
        let mut kinds: Vec<PipelineKind> = Vec::new();
        for one in names.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let kind = one.parse::<PipelineKind>().map_err(|e| {
                SettingsError::invalid(name, &names, &format!("{e}; comma-separated"))
            })?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            return Err(SettingsError::invalid(
                name,
                &names,
                &format!(
                    "at least one of {}",
                    PipelineKind::ALL.map(PipelineKind::name).join(", ")
                ),
            ));
        }
        Ok(Some(kinds))
    }
    fn fallback(_: &EnvReader<'_>, _: &str, (): ()) -> Result<Vec<PipelineKind>, SettingsError> {
        Ok(PipelineKind::ALL.to_vec())
    }
    fn show((): ()) -> String {
        PipelineKind::all_names()
    }
}

/// A consumer group prefix: `prefix.pipeline` must be a legal group name and fit
/// `dead_letter_events.consumer_group VARCHAR(255)`.
#[derive(Debug)]
pub struct GroupPrefix;

impl GroupPrefix {
    fn check(name: &str, prefix: String) -> Result<String, SettingsError> {
        let longest = 255 - 1 - PipelineKind::longest_name();
        if !is_topic_name(&prefix) || prefix.len() > longest {
            return Err(SettingsError::invalid(
                name,
                &prefix,
                &format!(
                    "1-{longest} of letters, digits, '.', '_' and '-' (prefix.pipeline must fit \
                     255 characters)"
                ),
            ));
        }
        Ok(prefix)
    }
}

impl Form for GroupPrefix {
    type Value = String;
    type Default = &'static str;
    fn parse(env: &EnvReader<'_>, name: &str, _: &str) -> Result<Option<String>, SettingsError> {
        env.raw(name).map(|p| Self::check(name, p)).transpose()
    }
    fn fallback(_: &EnvReader<'_>, name: &str, default: &str) -> Result<String, SettingsError> {
        Self::check(name, default.to_owned())
    }
    fn show(default: &str) -> String {
        default.to_owned()
    }
}

/// The batch size of every pipeline without its own; unset (`None`), each pipeline's own
/// default ([`MAX_POLL_RECORDS_OF`]).
#[derive(Debug)]
pub struct SharedBatchSize;

impl Form for SharedBatchSize {
    type Value = Option<u64>;
    type Default = ();
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        (): (),
    ) -> Result<Option<Option<u64>>, SettingsError> {
        let expected = format!(
            "a positive whole number (default: each pipeline's own, {})",
            Self::show(())
        );
        Ok(env.parse::<u64>(name, |n| *n > 0, &expected)?.map(Some))
    }
    fn fallback(_: &EnvReader<'_>, _: &str, (): ()) -> Result<Option<u64>, SettingsError> {
        Ok(None)
    }
    fn show((): ()) -> String {
        MAX_POLL_RECORDS_OF.defaults()
    }
}

/// A writer count, 1 to [`MAX_WRITERS`].
#[derive(Debug)]
pub struct WriterCount;

impl Form for WriterCount {
    type Value = usize;
    type Default = usize;
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        default: usize,
    ) -> Result<Option<usize>, SettingsError> {
        env.parse::<usize>(
            name,
            |n| (1..=MAX_WRITERS).contains(n),
            &format!("a whole number from 1 to {MAX_WRITERS} (default {default})"),
        )
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: usize) -> Result<usize, SettingsError> {
        Ok(default)
    }
    fn show(default: usize) -> String {
        default.to_string()
    }
}
