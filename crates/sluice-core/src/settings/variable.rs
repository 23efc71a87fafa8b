//! One declaration per environment variable: its name, its default as `--help` and the docs
//! show it, its meaning, whether its value is a secret, and the [`Form`] its value takes.
//!
//! A component declares each of its variables once, as a `const` [`Var`] (or a
//! [`PerPipeline`] family), and both its parser ([`Var::read`]) and its `--help` table
//! ([`Var::variable`]) read that one declaration: the default the parser falls back to is the
//! default the help prints. The configuration tables of docs/operations.md and
//! docs/outbox.md are checked against the components' tables by
//! `crates/sluice-cli/tests/docs_settings.rs`.

use super::{EnvReader, SettingsError};
use crate::pipeline::PipelineKind;
use crate::untrusted::{REDACTED, redact_url};
use std::borrow::Cow;
use std::fmt;

/// One row of a component's variable table: what `--help`, the docs' check and diagnostics
/// know of a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// The name, or a pattern of names (`KAFKA_<NAME>`, `STORAGE_WRITERS_<PIPELINE>`).
    pub name: Cow<'static, str>,
    /// The default as shown: a value, or a note in parentheses (`(required)`).
    pub default: Cow<'static, str>,
    /// What it means.
    pub help: Cow<'static, str>,
    /// Its value is (or holds) a secret: it is printed only through [`Variable::shown`].
    pub secret: bool,
}

impl Variable {
    /// A row no single [`Var`] reads: a pattern of names that the code listing the
    /// environment's names parses (`KAFKA_<NAME>`).
    pub const fn pattern(name: &'static str, default: &'static str, help: &'static str) -> Self {
        Self {
            name: Cow::Borrowed(name),
            default: Cow::Borrowed(default),
            help: Cow::Borrowed(help),
            secret: false,
        }
    }

    /// The same row, its values secret.
    pub const fn secret(mut self) -> Self {
        self.secret = true;
        self
    }

    /// The `--help` line: two spaces, the name padded to `width`, the meaning, the default.
    pub fn help_line(&self, width: usize) -> String {
        format!(
            "  {:<width$} {} [default: {}]\n",
            self.name, self.help, self.default
        )
    }

    /// A value of this variable as it may be printed: a secret one redacted.
    pub fn shown(&self, value: &str) -> String {
        shown(self.secret, value)
    }

    /// Whether `name` is this variable, or one of the names its pattern stands for (each
    /// `<…>` standing for one or more of `A-Z`, `0-9`, `_`).
    pub fn matches(&self, name: &str) -> bool {
        glob(&self.name, name)
    }
}

/// `value` as it may be printed: a secret URL keeps everything but its password
/// ([`redact_url`]), any other secret is `***`.
fn shown(secret: bool, value: &str) -> String {
    match value {
        _ if !secret => value.to_owned(),
        v if v.contains("://") || v.contains('@') => redact_url(v),
        _ => REDACTED.to_owned(),
    }
}

/// `name` against a pattern whose `<…>` each stand for one or more of `A-Z`, `0-9`, `_`.
fn glob(pattern: &str, name: &str) -> bool {
    let Some((literal, rest)) = pattern.split_once('<') else {
        return pattern == name;
    };
    let Some(tail) = name.strip_prefix(literal) else {
        return false;
    };
    let rest = rest.split_once('>').map_or("", |(_, after)| after);
    let run = tail
        .bytes()
        .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
        .count();
    (1..=run).any(|n| glob(rest, &tail[n..]))
}

/// The form a variable's value takes: how it is parsed, what it is when unset, how its
/// default is shown.
pub trait Form {
    /// The parsed value.
    type Value;
    /// The default as declared (a literal in a `const`).
    type Default: Copy + fmt::Debug;

    /// The value set in `name`, or `None` when it is unset (or empty); anything else is an
    /// error naming `name` and the accepted form (which may quote `default`).
    fn parse(
        env: &EnvReader<'_>,
        name: &str,
        default: Self::Default,
    ) -> Result<Option<Self::Value>, SettingsError>;

    /// The value when `name` is unset: the default (a form may find it in the environment,
    /// as the host name, or refuse: a required variable).
    fn fallback(
        env: &EnvReader<'_>,
        name: &str,
        default: Self::Default,
    ) -> Result<Self::Value, SettingsError>;

    /// The default as `--help` and the docs show it.
    fn show(default: Self::Default) -> String;
}

/// One environment variable, declared once: name, default, meaning, secret or not, and its
/// [`Form`] (the type parameter).
pub struct Var<F: Form> {
    /// The name.
    pub name: &'static str,
    /// The default, in the form's terms.
    pub default: F::Default,
    /// What it means (`--help`).
    pub help: &'static str,
    /// Its value is (or holds) a secret: an error shows it redacted ([`Variable::shown`]).
    pub secret: bool,
}

impl<F: Form> Clone for Var<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Form> Copy for Var<F> {}

impl<F: Form> fmt::Debug for Var<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Var")
            .field("name", &self.name)
            .field("default", &self.default)
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

impl<F: Form> Var<F> {
    /// A variable that is not secret.
    pub const fn new(name: &'static str, default: F::Default, help: &'static str) -> Self {
        Self {
            name,
            default,
            help,
            secret: false,
        }
    }

    /// The same variable, its value secret.
    pub const fn secret(mut self) -> Self {
        self.secret = true;
        self
    }

    /// The same variable described another way (one component's `--help`).
    pub const fn with_help(mut self, help: &'static str) -> Self {
        self.help = help;
        self
    }

    /// The value, or the default when unset.
    pub fn read(&self, env: &EnvReader<'_>) -> Result<F::Value, SettingsError> {
        match self.read_set(env)? {
            Some(value) => Ok(value),
            None => F::fallback(env, self.name, self.default),
        }
    }

    /// The value, or `None` when unset (a caller whose fallback is another variable).
    pub fn read_set(&self, env: &EnvReader<'_>) -> Result<Option<F::Value>, SettingsError> {
        F::parse(env, self.name, self.default).map_err(|e| redacted(e, self.secret))
    }

    /// The value, or `value` when unset (a default only the caller knows, see [`super::forms::Given`]).
    pub fn read_or(&self, env: &EnvReader<'_>, value: F::Value) -> Result<F::Value, SettingsError> {
        Ok(self.read_set(env)?.unwrap_or(value))
    }

    /// Its row of the table.
    pub fn variable(&self) -> Variable {
        Variable {
            name: Cow::Borrowed(self.name),
            default: Cow::Owned(F::show(self.default)),
            help: Cow::Borrowed(self.help),
            secret: self.secret,
        }
    }
}

/// An error whose value is printed redacted when the variable is secret.
fn redacted(error: SettingsError, secret: bool) -> SettingsError {
    match error {
        SettingsError::Invalid {
            variable,
            value,
            expected,
        } if secret => SettingsError::Invalid {
            variable,
            value: shown(true, &value),
            expected,
        },
        other => other,
    }
}

/// One variable per seed pipeline (`STORAGE_WRITERS_REVIEWS` …), declared once.
pub struct PerPipeline<F: Form> {
    /// The names as a pattern, for `--help` (`STORAGE_WRITERS_<PIPELINE>`).
    pub pattern: &'static str,
    /// One pipeline's name (from [`PipelineKind`], which builds these names).
    pub name_of: fn(PipelineKind) -> String,
    /// One pipeline's default.
    pub default_of: fn(PipelineKind) -> F::Default,
    /// What it means; `<pipeline>` stands for the pipeline's name.
    pub help: &'static str,
}

impl<F: Form> fmt::Debug for PerPipeline<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerPipeline")
            .field("pattern", &self.pattern)
            .finish_non_exhaustive()
    }
}

impl<F: Form> PerPipeline<F> {
    /// `kind`'s variable.
    pub fn name(&self, kind: PipelineKind) -> String {
        (self.name_of)(kind)
    }

    /// `kind`'s default.
    pub fn default(&self, kind: PipelineKind) -> F::Default {
        (self.default_of)(kind)
    }

    /// `kind`'s value, or its default when unset.
    pub fn read(&self, env: &EnvReader<'_>, kind: PipelineKind) -> Result<F::Value, SettingsError> {
        let name = self.name(kind);
        match F::parse(env, &name, self.default(kind))? {
            Some(value) => Ok(value),
            None => F::fallback(env, &name, self.default(kind)),
        }
    }

    /// `kind`'s value, or `None` when unset.
    pub fn read_set(
        &self,
        env: &EnvReader<'_>,
        kind: PipelineKind,
    ) -> Result<Option<F::Value>, SettingsError> {
        F::parse(env, &self.name(kind), self.default(kind))
    }

    /// The defaults of every pipeline, `/`-separated (once when they agree).
    pub fn defaults(&self) -> String {
        let mut shown: Vec<String> = PipelineKind::ALL
            .map(|kind| F::show(self.default(kind)))
            .into();
        shown.dedup();
        shown.join("/")
    }

    /// One row for the pattern.
    pub fn variable(&self) -> Variable {
        Variable {
            name: Cow::Borrowed(self.pattern),
            default: Cow::Owned(self.defaults()),
            help: Cow::Borrowed(self.help),
            secret: false,
        }
    }

    /// One row per pipeline.
    pub fn variables(&self) -> Vec<Variable> {
        PipelineKind::ALL
            .iter()
            .map(|&kind| Variable {
                name: Cow::Owned(self.name(kind)),
                default: Cow::Owned(F::show(self.default(kind))),
                help: Cow::Owned(self.help.replace("<pipeline>", kind.name())),
                secret: false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    use crate::settings::forms::{DatabaseUrl, Millis};

    const TIMEOUT: Var<Millis> = Var::new("T_MS", 1500, "a timeout");
    const URL: Var<DatabaseUrl> = Var::new("URL", (), "a database").secret();

    fn env_of<'a>(map: &'a BTreeMap<&str, &str>) -> impl Fn(&str) -> Option<String> + 'a {
        |name| map.get(name).map(|v| (*v).to_owned())
    }

    #[test]
    fn the_default_read_is_the_default_shown() {
        let map = BTreeMap::new();
        let lookup = env_of(&map);
        let env = EnvReader::new(&lookup);
        assert_eq!(TIMEOUT.read(&env), Ok(Duration::from_millis(1500)));
        assert_eq!(TIMEOUT.read_set(&env), Ok(None));
        let row = TIMEOUT.variable();
        assert_eq!((row.name.as_ref(), row.default.as_ref()), ("T_MS", "1500"));
        assert_eq!(row.help_line(6), "  T_MS   a timeout [default: 1500]\n");
        assert_eq!(URL.read(&env).unwrap_err().variable(), "URL");
        assert_eq!(URL.variable().default, "(required)");
    }

    #[test]
    fn a_secret_value_never_reaches_an_error() {
        for (value, hidden) in [
            ("postgres://u:hunter2@h:x/db", "hunter2"),
            ("u:hunter2@h", "hunter2"),
            ("hunter2", "hunter2"),
        ] {
            let map = BTreeMap::from([("URL", value)]);
            let lookup = env_of(&map);
            let err = URL.read(&EnvReader::new(&lookup)).unwrap_err();
            assert_eq!(err.variable(), "URL");
            assert!(!err.to_string().contains(hidden), "{err}");
        }
        assert_eq!(URL.variable().shown("s3cret"), "***");
        assert_eq!(TIMEOUT.variable().shown("12"), "12");
    }

    #[test]
    fn patterns_match_the_names_they_stand_for() {
        let row = Variable::pattern("STORAGE_TOPIC_<SETTING>_<PIPELINE>", "", "");
        assert!(row.matches("STORAGE_TOPIC_RETENTION_MS_NETWORK_METRICS"));
        assert!(!row.matches("STORAGE_TOPIC_REVIEWS"));
        assert!(!row.matches("STORAGE_TOPIC_x_y"));
        assert!(Variable::pattern("A_B", "", "").matches("A_B"));
        assert!(!Variable::pattern("A_B", "", "").matches("A_BC"));
    }
}
