//! Where to capture from: the server, the slot, the publication. Parsed once, then only read.

use crate::error::CaptureError;
use pgwire_replication::{ReplicationConfig, SslMode, TlsConfig};
use std::path::PathBuf;
use std::time::Duration;

/// A validated capture source. `Debug` leaves the password out.
#[derive(Clone)]
pub struct SourceConfig {
    host: String,
    port: u16,
    user: String,
    password: String,
    database: String,
    tls: TlsConfig,
    slot: String,
    publication: String,
    status_interval: Duration,
}

impl SourceConfig {
    /// From a `postgres://user[:password]@host[:port]/database[?sslmode=…&sslrootcert=…]`
    /// URL (the form `DATABASE_URL` has), a slot and a publication name. Slot and
    /// publication are plain lower-case identifiers (`[a-z0-9_]`, as slot names must be),
    /// so neither needs quoting in a replication command.
    pub fn from_url(
        url: &str,
        slot: &str,
        publication: &str,
    ) -> Result<SourceConfig, CaptureError> {
        let bad = |what: &str| CaptureError::Settings(format!("{what} in the source URL"));
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| bad("no postgres:// scheme"))?;
        let (base, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, database) = base.split_once('/').ok_or_else(|| bad("no database"))?;
        let (userinfo, hostport) = authority.rsplit_once('@').ok_or_else(|| bad("no user"))?;
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let (host, port) = match hostport.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().map_err(|_| bad("a bad port"))?),
            None => (hostport, 5432),
        };
        let mut mode = SslMode::Disable;
        let mut root: Option<PathBuf> = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sslmode", value)) => {
                    mode = ssl_mode(value).ok_or_else(|| bad("a bad sslmode"))?
                }
                Some(("sslrootcert", value)) => root = Some(PathBuf::from(value)),
                // The key only: a value may be a secret (`sslpassword`).
                _ => {
                    let key = pair.split_once('=').map_or(pair, |(key, _)| key);
                    return Err(bad(&format!(
                        "the parameter `{key}`, which the capture does not read (it reads sslmode and sslrootcert),"
                    )));
                }
            }
        }
        let tls = match mode {
            SslMode::Disable => TlsConfig::disabled(),
            SslMode::VerifyCa => TlsConfig::verify_ca(root),
            SslMode::VerifyFull => TlsConfig::verify_full(root),
            SslMode::Require => TlsConfig::require(),
            _ => {
                let mut tls = TlsConfig::require();
                tls.mode = mode;
                tls
            }
        };
        Ok(SourceConfig {
            host: host.to_owned(),
            port,
            user: user.to_owned(),
            password: password.to_owned(),
            database: database.to_owned(),
            tls,
            slot: identifier("slot", slot)?,
            publication: identifier("publication", publication)?,
            status_interval: Duration::from_secs(1),
        })
    }

    /// How often at most an acknowledged LSN is reported to the server (default 1 s).
    pub fn with_status_interval(mut self, interval: Duration) -> SourceConfig {
        self.status_interval = interval;
        self
    }

    /// How often at most an acknowledged position is reported to the server.
    pub fn status_interval(&self) -> Duration {
        self.status_interval
    }

    /// The source database's name (Debezium's `source.db`).
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The slot's name.
    pub fn slot(&self) -> &str {
        &self.slot
    }

    /// The publication's name.
    pub fn publication(&self) -> &str {
        &self.publication
    }

    /// The transport's configuration: pgoutput text format, streaming from the slot's
    /// confirmed LSN (`0/0`), nothing acknowledged until `CaptureStream::acknowledge`.
    pub(super) fn replication(&self) -> ReplicationConfig {
        ReplicationConfig::new(
            &self.host,
            &self.user,
            &self.password,
            &self.database,
            &self.slot,
            self.publication.as_str(),
        )
        .with_port(self.port)
        .with_tls(self.tls.clone())
        .with_status_interval(self.status_interval)
        .with_application_name("sluice-capture")
        .with_options(VALUE_FORMAT)
    }
}

impl std::fmt::Debug for SourceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("database", &self.database)
            .field("tls", &self.tls.mode)
            .field("slot", &self.slot)
            .field("publication", &self.publication)
            .finish_non_exhaustive()
    }
}

/// pgoutput's text values are the walsender's output functions under the session's
/// settings: pinned, so a value's text does not depend on the server's, the database's or
/// the role's defaults (timestamps in ISO form and UTC, floats with every digit, intervals
/// as `1 day 02:03:04`, money as `$1,234.57`, bytea as `\x…`). docs/capture.md#values
const VALUE_FORMAT: &str = "-c datestyle=ISO,MDY -c timezone=UTC -c intervalstyle=postgres \
     -c extra_float_digits=3 -c lc_monetary=C -c bytea_output=hex";

fn ssl_mode(value: &str) -> Option<SslMode> {
    Some(match value {
        "disable" => SslMode::Disable,
        "prefer" | "allow" => SslMode::Prefer,
        "require" => SslMode::Require,
        "verify-ca" => SslMode::VerifyCa,
        "verify-full" => SslMode::VerifyFull,
        _ => return None,
    })
}

fn identifier(what: &str, name: &str) -> Result<String, CaptureError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(name.to_owned())
    } else {
        Err(CaptureError::Settings(format!(
            "{what} name {name:?} is not [a-z0-9_]{{1,63}}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_database_url() {
        let config = SourceConfig::from_url(
            "postgres://sluice:pw@127.0.0.1:54329/src?sslmode=verify-full&sslrootcert=/ca.crt",
            "s_1",
            "p",
        )
        .unwrap();
        let replication = config.replication();
        assert_eq!(
            (
                replication.host.as_str(),
                replication.port,
                replication.user.as_str()
            ),
            ("127.0.0.1", 54329, "sluice")
        );
        assert_eq!(
            (replication.password.as_str(), replication.database.as_str()),
            ("pw", "src")
        );
        assert_eq!(replication.tls.mode, SslMode::VerifyFull);
        assert_eq!(replication.tls.ca_pem_path, Some(PathBuf::from("/ca.crt")));
        let plain = SourceConfig::from_url("postgres://u@h/db", "s", "p").unwrap();
        assert_eq!((plain.port, plain.tls.mode), (5432, SslMode::Disable));
    }

    #[test]
    fn an_unknown_parameter_is_named_without_its_value() {
        let error = SourceConfig::from_url("postgres://u@h/db?sslpassword=keypass123", "s", "p")
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("`sslpassword`") && !error.contains("keypass123"),
            "{error}"
        );
    }

    #[test]
    fn refuses_what_it_cannot_quote_or_read() {
        for (url, slot, publication) in [
            ("mysql://u@h/db", "s", "p"),
            ("postgres://u@h", "s", "p"),
            ("postgres://u@h/db?sslmode=sometimes", "s", "p"),
            ("postgres://u@h/db", "Slot", "p"),
            ("postgres://u@h/db", "s", "p'; DROP"),
            ("postgres://u@h/db?sslpassword=keypass123", "s", "p"),
        ] {
            assert!(
                SourceConfig::from_url(url, slot, publication).is_err(),
                "{url} {slot} {publication}"
            );
        }
    }
}
