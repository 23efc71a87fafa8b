//! The one reader of settings: every variable of every command (storage, outbox, mailbox,
//! topics) goes through these helpers, so "empty means unset", "a positive whole number",
//! a database URL and a topic name are checked the same way everywhere, and every error
//! names its variable ([`SettingsError`]).

use super::SettingsError;
use std::str::FromStr;
use std::time::Duration;

/// Reads variables through a `name → value` lookup (the process environment in the binary,
/// a map in tests). Values are trimmed; an empty value counts as unset.
#[derive(Clone, Copy)]
pub struct EnvReader<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl std::fmt::Debug for EnvReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvReader")
    }
}

impl<'a> EnvReader<'a> {
    /// A reader over `lookup`.
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self { lookup }
    }

    /// The trimmed value, or `None` when unset or empty.
    pub fn raw(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The value, or `default`.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_owned())
    }

    /// A value of type `T` that `accept` takes, or `None` when unset; anything else is an
    /// error naming the variable and `expected`.
    pub fn parse<T: FromStr>(
        &self,
        name: &str,
        accept: impl Fn(&T) -> bool,
        expected: &str,
    ) -> Result<Option<T>, SettingsError> {
        let Some(value) = self.raw(name) else {
            return Ok(None);
        };
        match value.parse::<T>() {
            Ok(n) if accept(&n) => Ok(Some(n)),
            _ => Err(SettingsError::invalid(name, &value, expected)),
        }
    }

    /// A positive whole number, or `None` when unset.
    pub fn positive(&self, name: &str, default: u64) -> Result<Option<u64>, SettingsError> {
        self.parse::<u64>(
            name,
            |n| *n > 0,
            &format!("a positive whole number (default {default})"),
        )
    }

    /// A positive whole number, or `default`.
    pub fn number(&self, name: &str, default: u64) -> Result<u64, SettingsError> {
        Ok(self.positive(name, default)?.unwrap_or(default))
    }

    /// A positive whole number that fits `u32`, or `default`.
    pub fn small(&self, name: &str, default: u32) -> Result<u32, SettingsError> {
        let n = self.number(name, u64::from(default))?;
        u32::try_from(n)
            .map_err(|_| SettingsError::invalid(name, &n.to_string(), "at most 4294967295"))
    }

    /// Positive milliseconds, or `default`.
    pub fn millis(&self, name: &str, default: u64) -> Result<Duration, SettingsError> {
        self.number(name, default).map(Duration::from_millis)
    }

    /// Positive seconds, or `default`.
    pub fn seconds(&self, name: &str, default: u64) -> Result<Duration, SettingsError> {
        self.number(name, default).map(Duration::from_secs)
    }

    /// `DATABASE_URL` ([`super::DATABASE_URL`]): required, a `postgres://` URL with a host
    /// ([`valid_database_url`]); the password never reaches the error.
    pub fn database_url(&self) -> Result<String, SettingsError> {
        super::DATABASE_URL.read(self)
    }

    /// A Kafka topic name, or `default`.
    pub fn topic(&self, name: &str, default: &str) -> Result<String, SettingsError> {
        let topic = self.string(name, default);
        if !is_topic_name(&topic) {
            return Err(SettingsError::invalid(
                name,
                &topic,
                "a Kafka topic name: 1-249 of letters, digits, '.', '_', '-'",
            ));
        }
        Ok(topic)
    }

    /// A required Kafka topic name.
    pub fn required_topic(&self, name: &str, what: &str) -> Result<String, SettingsError> {
        if self.raw(name).is_none() {
            return Err(SettingsError::invalid(
                name,
                "",
                &format!("required: {what}, a Kafka topic name"),
            ));
        }
        self.topic(name, "")
    }
}

/// A legal Kafka topic or group name: 1-249 of letters, digits, `.`, `_`, `-`, not `.`/`..`.
pub fn is_topic_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 249
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A `[schema.]table` name of letters, digits and `_`.
pub fn is_identifier(s: &str) -> bool {
    let mut parts = s.split('.');
    let ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 63
            && p.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let first = parts.next().is_some_and(ok);
    let rest: Vec<&str> = parts.collect();
    first && rest.len() <= 1 && rest.iter().all(|p| ok(p))
}

/// A `postgres://` URL cut at its authority: (everything after the scheme, the authority,
/// its `host[:port]` part after any `user[:password]@`).
fn split_database_url(url: &str) -> Option<(&str, &str, &str)> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    Some((rest, authority, host_port))
}

/// The host and port of a `postgres://` URL's authority, when it names both.
pub fn database_host_port(url: &str) -> Option<(&str, &str)> {
    let (_, _, host_port) = split_database_url(url)?;
    host_port.rsplit_once(':')
}

/// A `postgres://` URL with a host (`host[:port]` or the `host=` parameter: a name, or a
/// Unix socket directory as in `postgres:///db?host=/var/run/postgresql`).
pub fn valid_database_url(url: &str) -> bool {
    let Some((rest, authority, host_port)) = split_database_url(url) else {
        return false;
    };
    let host_parameter = rest.split_once('?').is_some_and(|(_, query)| {
        query
            .split('&')
            .any(|pair| pair.strip_prefix("host=").is_some_and(|h| !h.is_empty()))
    });
    if host_port.is_empty() {
        // `user@` with no host is not a URL (`postgres:///db?user=u&host=/dir` is).
        return host_parameter && !authority.contains('@');
    }
    match host_port.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host_port.starts_with('[') => {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn every_helper_treats_empty_as_unset_and_names_its_variable() {
        let map: BTreeMap<&str, &str> = [
            ("EMPTY", "  "),
            ("N", " 7 "),
            ("ZERO", "0"),
            ("BIG", "99999999999"),
            ("T", "bad topic"),
        ]
        .into();
        let lookup = |name: &str| map.get(name).map(|v| (*v).to_owned());
        let env = EnvReader::new(&lookup);
        assert_eq!(env.raw("EMPTY"), None);
        assert_eq!(env.number("EMPTY", 3), Ok(3));
        assert_eq!(env.number("N", 3), Ok(7));
        assert_eq!(env.number("ZERO", 3).unwrap_err().variable(), "ZERO");
        assert_eq!(env.small("BIG", 1).unwrap_err().variable(), "BIG");
        assert_eq!(env.topic("T", "x").unwrap_err().variable(), "T");
        assert_eq!(env.topic("UNSET", "dflt"), Ok("dflt".to_owned()));
        assert_eq!(
            env.required_topic("UNSET", "the topic")
                .unwrap_err()
                .variable(),
            "UNSET"
        );
        assert_eq!(env.database_url().unwrap_err().variable(), "DATABASE_URL");
    }
}
