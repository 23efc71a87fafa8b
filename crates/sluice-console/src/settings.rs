//! The console's own settings: where it listens and the operator token. A pure function of
//! the two variables; a non-loopback address without a token is refused, so the console is
//! never reachable from another host without authentication.

use std::net::SocketAddr;

/// The variable naming the listen address.
pub const ADDR_VAR: &str = "SLUICE_CONSOLE_ADDR";
/// The variable holding the operator token (unset: read-only).
pub const TOKEN_VAR: &str = "SLUICE_CONSOLE_TOKEN";
/// The listen address when [`ADDR_VAR`] is unset.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9480";
/// The shortest token accepted: a guessable token is worse than none.
pub const MIN_TOKEN_LEN: usize = 16;

/// Validated console settings.
#[derive(Clone)]
pub struct ConsoleSettings {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The operator token; `None` makes the console read-only.
    pub token: Option<String>,
}

impl std::fmt::Debug for ConsoleSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleSettings")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Why the console's settings were refused (each a configuration error, exit 2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingsError {
    /// The address does not parse.
    #[error("{ADDR_VAR}={raw:?}: not a socket address such as 127.0.0.1:9480")]
    BadAddress {
        /// The variable's value.
        raw: String,
    },
    /// A non-loopback address without a token.
    #[error(
        "{ADDR_VAR}={addr} is not a loopback address and {TOKEN_VAR} is not set: the console \
         refuses to serve other hosts without a token (set {TOKEN_VAR}, or bind 127.0.0.1)"
    )]
    OpenWithoutToken {
        /// The address.
        addr: SocketAddr,
    },
    /// The token is too short.
    #[error("{TOKEN_VAR} is shorter than {MIN_TOKEN_LEN} characters")]
    ShortToken,
}

impl ConsoleSettings {
    /// The settings from the raw variables (`None` or empty: unset).
    pub fn parse(addr: Option<&str>, token: Option<&str>) -> Result<Self, SettingsError> {
        let raw = addr.filter(|a| !a.is_empty()).unwrap_or(DEFAULT_ADDR);
        let addr: SocketAddr = raw.parse().map_err(|_| SettingsError::BadAddress {
            raw: raw.to_owned(),
        })?;
        let token = token.filter(|t| !t.is_empty()).map(str::to_owned);
        if token
            .as_ref()
            .is_some_and(|t| t.chars().count() < MIN_TOKEN_LEN)
        {
            return Err(SettingsError::ShortToken);
        }
        if token.is_none() && !addr.ip().is_loopback() {
            return Err(SettingsError::OpenWithoutToken { addr });
        }
        Ok(Self { addr, token })
    }

    /// Whether actions (replay, retry) can be enabled at all.
    pub fn writable(&self) -> bool {
        self.token.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_the_default_and_needs_no_token() {
        let s = ConsoleSettings::parse(None, None).unwrap();
        assert_eq!(s.addr.to_string(), DEFAULT_ADDR);
        assert!(!s.writable());
        let s = ConsoleSettings::parse(Some("[::1]:9000"), Some("")).unwrap();
        assert!(s.token.is_none());
    }

    #[test]
    fn another_host_needs_a_token() {
        let open = ConsoleSettings::parse(Some("0.0.0.0:9480"), None).unwrap_err();
        let text = open.to_string();
        assert!(
            text.contains(ADDR_VAR) && text.contains(TOKEN_VAR),
            "{text}"
        );
        let s = ConsoleSettings::parse(Some("0.0.0.0:9480"), Some("a-long-enough-token")).unwrap();
        assert!(s.writable());
        assert!(!format!("{s:?}").contains("a-long-enough-token"));
    }

    #[test]
    fn bad_values_are_named() {
        assert_eq!(
            ConsoleSettings::parse(Some("localhost"), None).unwrap_err(),
            SettingsError::BadAddress {
                raw: "localhost".into()
            }
        );
        assert_eq!(
            ConsoleSettings::parse(None, Some("short")).unwrap_err(),
            SettingsError::ShortToken
        );
    }
}
