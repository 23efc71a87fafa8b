//! The forms a variable's value takes ([`Form`]): the common ones (numbers, durations, text,
//! a topic, a database URL) and the storage consumer's own (`STORAGE_AUTO_OFFSET_RESET`,
//! `STORAGE_DB_RETRY_MAX_ATTEMPTS`, `STORAGE_APPLICATIONS_TABLE`, `STORAGE_INSTANCE_ID`).
//! Each one parses, falls back to its default and shows it the same way wherever it is used.

use super::SettingsError;
use super::read::{EnvReader, is_identifier, is_topic_name};
use super::variable::Form;
use crate::pipeline::PipelineKind;
use crate::untrusted::redact_url;
use std::time::Duration;

/// A positive whole number.
#[derive(Debug)]
pub struct Count;

impl Form for Count {
    type Value = u64;
    type Default = u64;
    fn parse(env: &EnvReader<'_>, name: &str, default: u64) -> Result<Option<u64>, SettingsError> {
        env.positive(name, default)
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: u64) -> Result<u64, SettingsError> {
        Ok(default)
    }
    fn show(default: u64) -> String {
        default.to_string()
    }
}

/// A positive whole number that fits `u32`.
#[derive(Debug)]
pub struct Count32;

impl Form for Count32 {
    type Value = u32;
    type Default = u32;
    fn parse(env: &EnvReader<'_>, name: &str, default: u32) -> Result<Option<u32>, SettingsError> {
        let Some(n) = env.positive(name, u64::from(default))? else {
            return Ok(None);
        };
        u32::try_from(n)
            .map(Some)
            .map_err(|_| SettingsError::invalid(name, &n.to_string(), "at most 4294967295"))
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: u32) -> Result<u32, SettingsError> {
        Ok(default)
    }
    fn show(default: u32) -> String {
        default.to_string()
    }
}

/// Positive milliseconds, declared as a number of them.
#[derive(Debug)]
pub struct Millis;

impl Form for Millis {
    type Value = Duration;
    type Default = u64;
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        default: u64,
    ) -> Result<Option<Duration>, SettingsError> {
        Ok(env.positive(name, default)?.map(Duration::from_millis))
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: u64) -> Result<Duration, SettingsError> {
        Ok(Duration::from_millis(default))
    }
    fn show(default: u64) -> String {
        default.to_string()
    }
}

/// Milliseconds from 0 to 1,000, declared as a number of them (`STORAGE_LINGER_MS`; 0 turns
/// it off).
#[derive(Debug)]
pub struct LingerMillis;

impl Form for LingerMillis {
    type Value = Duration;
    type Default = u64;
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        default: u64,
    ) -> Result<Option<Duration>, SettingsError> {
        let expected = format!("whole milliseconds from 0 to 1000 (default {default})");
        Ok(env
            .parse::<u64>(name, |n| *n <= 1_000, &expected)?
            .map(Duration::from_millis))
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: u64) -> Result<Duration, SettingsError> {
        Ok(Duration::from_millis(default))
    }
    fn show(default: u64) -> String {
        default.to_string()
    }
}

/// Positive seconds, declared as a number of them.
#[derive(Debug)]
pub struct Seconds;

impl Form for Seconds {
    type Value = Duration;
    type Default = u64;
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        default: u64,
    ) -> Result<Option<Duration>, SettingsError> {
        Ok(env.positive(name, default)?.map(Duration::from_secs))
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: u64) -> Result<Duration, SettingsError> {
        Ok(Duration::from_secs(default))
    }
    fn show(default: u64) -> String {
        default.to_string()
    }
}

/// Any text.
#[derive(Debug)]
pub struct Text;

impl Form for Text {
    type Value = String;
    type Default = &'static str;
    fn parse(env: &EnvReader<'_>, name: &str, _: &str) -> Result<Option<String>, SettingsError> {
        Ok(env.raw(name))
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: &str) -> Result<String, SettingsError> {
        Ok(default.to_owned())
    }
    fn show(default: &str) -> String {
        default.to_owned()
    }
}

/// Text whose default only the caller knows (a host name and process id): read with
/// [`super::Var::read_or`]; the declared default is how `--help` describes it.
#[derive(Debug)]
pub struct Given;

impl Form for Given {
    type Value = String;
    type Default = &'static str;
    fn parse(env: &EnvReader<'_>, name: &str, _: &str) -> Result<Option<String>, SettingsError> {
        Ok(env.raw(name))
    }
    fn fallback(_: &EnvReader<'_>, name: &str, default: &str) -> Result<String, SettingsError> {
        Err(SettingsError::invalid(
            name,
            "",
            &format!("a value (the caller gives the default, {default})"),
        ))
    }
    fn show(default: &str) -> String {
        default.to_owned()
    }
}

/// A Kafka topic name.
#[derive(Debug)]
pub struct Topic;

impl Form for Topic {
    type Value = String;
    type Default = &'static str;
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        default: &str,
    ) -> Result<Option<String>, SettingsError> {
        env.raw(name).map(|_| env.topic(name, default)).transpose()
    }
    fn fallback(env: &EnvReader<'_>, name: &str, default: &str) -> Result<String, SettingsError> {
        env.topic(name, default)
    }
    fn show(default: &str) -> String {
        default.to_owned()
    }
}

/// A required `postgres://` URL with a host ([`super::valid_database_url`]); its password
/// never reaches an error (declare it secret too: then nothing but a URL's password-free
/// parts does).
#[derive(Debug)]
pub struct DatabaseUrl;

/// The accepted form of a database URL.
const DATABASE_URL_FORM: &str = "postgres://user[:password]@host[:port]/database";

impl Form for DatabaseUrl {
    type Value = String;
    type Default = ();
    fn parse(env: &EnvReader<'_>, name: &str, (): ()) -> Result<Option<String>, SettingsError> {
        match env.raw(name) {
            Some(url) if !super::valid_database_url(&url) => Err(SettingsError::invalid(
                name,
                &redact_url(&url),
                DATABASE_URL_FORM,
            )),
            Some(url) => match super::database_url::problem(&url) {
                // The URL without its query: another parameter's value may be a secret.
                Some(problem) => Err(SettingsError::invalid(
                    name,
                    &redact_url(url.split('?').next().unwrap_or_default()),
                    &problem,
                )),
                None => Ok(Some(url)),
            },
            None => Ok(None),
        }
    }
    fn fallback(_: &EnvReader<'_>, name: &str, (): ()) -> Result<String, SettingsError> {
        Err(SettingsError::invalid(
            name,
            "",
            &format!("required: {DATABASE_URL_FORM}"),
        ))
    }
    fn show((): ()) -> String {
        "(required)".to_owned()
    }
}

/// Where a new consumer group starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// The oldest retained record: a new group reads the backlog.
    Earliest,
    /// Only records produced from now on.
    Latest,
}

impl OffsetReset {
    /// The librdkafka `auto.offset.reset` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Earliest => "earliest",
            Self::Latest => "latest",
        }
    }
}

impl Form for OffsetReset {
    type Value = OffsetReset;
    type Default = OffsetReset;
    fn parse(env: &EnvReader<'_>, name: &str, _: Self) -> Result<Option<Self>, SettingsError> {
        let Some(reset) = env.raw(name) else {
            return Ok(None);
        };
        match reset.to_ascii_lowercase().as_str() {
            "earliest" => Ok(Some(Self::Earliest)),
            "latest" => Ok(Some(Self::Latest)),
            _ => Err(SettingsError::invalid(name, &reset, "earliest or latest")),
        }
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: Self) -> Result<Self, SettingsError> {
        Ok(default)
    }
    fn show(default: Self) -> String {
        default.as_str().to_owned()
    }
}

/// `on` or `off`: PostgreSQL's `synchronous_commit` for the writers' sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncCommit {
    /// Each COMMIT waits for its WAL flush (PostgreSQL's default).
    On,
    /// A COMMIT returns before its WAL flush: a PostgreSQL crash loses the last few hundred
    /// milliseconds of batches together with their offsets, and sluice reads them again.
    Off,
}

impl SyncCommit {
    /// The value of `synchronous_commit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
        }
    }
}

impl Form for SyncCommit {
    type Value = SyncCommit;
    type Default = SyncCommit;
    fn parse(env: &EnvReader<'_>, name: &str, _: Self) -> Result<Option<Self>, SettingsError> {
        let Some(value) = env.raw(name) else {
            return Ok(None);
        };
        match value.to_ascii_lowercase().as_str() {
            "on" => Ok(Some(Self::On)),
            "off" => Ok(Some(Self::Off)),
            _ => Err(SettingsError::invalid(name, &value, "on or off")),
        }
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: Self) -> Result<Self, SettingsError> {
        Ok(default)
    }
    fn show(default: Self) -> String {
        default.as_str().to_owned()
    }
}

/// A number of retries, 0-30.
#[derive(Debug)]
pub struct RetryAttempts;

impl Form for RetryAttempts {
    type Value = u32;
    type Default = u32;
    fn parse(env: &EnvReader<'_>, name: &str, default: u32) -> Result<Option<u32>, SettingsError> {
        env.parse::<u32>(
            name,
            |n| *n <= 30,
            &format!("a whole number 0-30 (default {default})"),
        )
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: u32) -> Result<u32, SettingsError> {
        Ok(default)
    }
    fn show(default: u32) -> String {
        default.to_string()
    }
}

/// A table name, optionally schema-qualified.
#[derive(Debug)]
pub struct TableName;

impl Form for TableName {
    type Value = String;
    type Default = &'static str;
    fn parse(env: &EnvReader<'_>, name: &str, _: &str) -> Result<Option<String>, SettingsError> {
        match env.raw(name) {
            Some(table) if !is_identifier(&table) => Err(SettingsError::invalid(
                name,
                &table,
                "a table name, optionally schema-qualified: [schema.]table of letters, digits, '_'",
            )),
            table => Ok(table),
        }
    }
    fn fallback(_: &EnvReader<'_>, _: &str, default: &str) -> Result<String, SettingsError> {
        Ok(default.to_owned())
    }
    fn show(default: &str) -> String {
        default.to_owned()
    }
}

/// A static group member id prefix, or `off` (`None`); unset, the host name (`HOSTNAME`,
/// which the binary fills in from the kernel when the shell did not export it) made a
/// legal id.
#[derive(Debug)]
pub struct InstanceId;

/// The longest instance id: `<id>-network-metrics` must fit Kafka's 249 characters.
const MAX_INSTANCE_ID: usize = 249 - 1 - PipelineKind::longest_name();

impl Form for InstanceId {
    type Value = Option<String>;
    type Default = ();
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        (): (),
    ) -> Result<Option<Option<String>>, SettingsError> {
        let Some(value) = env.raw(name) else {
            return Ok(None);
        };
        if value.eq_ignore_ascii_case("off") {
            return Ok(Some(None));
        }
        if !is_topic_name(&value) || value.len() > MAX_INSTANCE_ID {
            return Err(SettingsError::invalid(
                name,
                &value,
                &format!(
                    "1-{MAX_INSTANCE_ID} of letters, digits, '.', '_', '-' (unique per live \
                     process), or off"
                ),
            ));
        }
        Ok(Some(Some(value)))
    }
    fn fallback(env: &EnvReader<'_>, _: &str, (): ()) -> Result<Option<String>, SettingsError> {
        let host: String = env
            .raw("HOSTNAME")
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .take(MAX_INSTANCE_ID)
            .collect();
        Ok(Some(if host.is_empty() || host == "." || host == ".." {
            "sluice".to_owned()
        } else {
            host
        }))
    }
    fn show((): ()) -> String {
        "(the host name)".to_owned()
    }
}
