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
    /// URL, read as every other command reads `DATABASE_URL` (libpq's way): percent-escapes
    /// decoded, `user`, `password`, `host`, `port` and `dbname` as parameters too, `sslmode`
    /// `prefer` when not given (TLS when the server offers it), `sslcert` and `sslkey` for
    /// a client certificate; a parameter the client would ignore is refused. A slot and a
    /// publication name go with it; both are plain lower-case identifiers (`[a-z0-9_]`, as
    /// slot names must be), so neither needs quoting in a replication command.
    pub fn from_url(
        url: &str,
        slot: &str,
        publication: &str,
    ) -> Result<SourceConfig, CaptureError> {
        let bad = |what: &str| CaptureError::Settings(format!("{what} in the source URL"));
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(bad("no postgres:// scheme"));
        }
        if let Some(problem) = sluice_core::settings::database_url::problem(url) {
            return Err(CaptureError::Settings(format!("the source URL: {problem}")));
        }
        let parsed = url::Url::parse(url).map_err(|e| bad(&format!("a malformed URL ({e})")))?;
        let decoded = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8_lossy()
                .into_owned()
        };
        let mut user = decoded(parsed.username());
        let mut password = parsed.password().map(decoded).unwrap_or_default();
        let mut host = parsed
            .host_str()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
            .unwrap_or_default();
        let mut port = parsed.port().unwrap_or(5432);
        let mut database = decoded(parsed.path().trim_start_matches('/'));
        let mut mode = SslMode::Prefer;
        let (mut root, mut cert, mut key): (Option<PathBuf>, Option<PathBuf>, Option<PathBuf>) =
            (None, None, None);
        for (name, value) in parsed.query_pairs() {
            let value = value.into_owned();
            match name.as_ref() {
                "sslmode" | "ssl-mode" => {
                    mode =
                        ssl_mode(&value.to_ascii_lowercase()).ok_or_else(|| bad("a bad sslmode"))?
                }
                "sslrootcert" | "ssl-root-cert" | "ssl-ca" => root = Some(PathBuf::from(value)),
                "sslcert" | "ssl-cert" => cert = Some(PathBuf::from(value)),
                "sslkey" | "ssl-key" => key = Some(PathBuf::from(value)),
                "user" => user = value,
                "password" => password = value,
                // As sqlx: `hostaddr` is the address connected to.
                "host" | "hostaddr" => host = value,
                "port" => port = value.parse().map_err(|_| bad("a bad port"))?,
                "dbname" => database = value,
                // Read by the catalog connection (sqlx), not needed by the replication one.
                _ => {}
            }
        }
        if host.is_empty() || host.starts_with('/') {
            return Err(bad(
                "no TCP host (the replication connection does not reach a Unix socket)",
            ));
        }
        if user.is_empty() {
            return Err(bad("no user"));
        }
        // As libpq: the database defaults to the user's name, the password to PGPASSWORD.
        if database.is_empty() {
            database = user.clone();
        }
        if password.is_empty() {
            password = std::env::var("PGPASSWORD").unwrap_or_default();
        }
        let tls = tls_config(mode, root, cert, key)
            .ok_or_else(|| bad("sslcert without sslkey (or the other way round)"))?;
        Ok(SourceConfig {
            host,
            port,
            user,
            password,
            database,
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

/// The transport's TLS for `mode`, with the URL's root certificate and client certificate;
/// `None` when only one of `sslcert` and `sslkey` is given.
fn tls_config(
    mode: SslMode,
    root: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
) -> Option<TlsConfig> {
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
    match (cert, key) {
        (Some(cert), Some(key)) => Some(tls.with_client_cert(cert, key)),
        (None, None) => Some(tls),
        _ => None,
    }
}

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
        // As libpq (and every other command): TLS when the server offers it.
        let plain = SourceConfig::from_url("postgres://u@h/db", "s", "p").unwrap();
        assert_eq!((plain.port, plain.tls.mode), (5432, SslMode::Prefer));
    }

    #[test]
    fn reads_the_url_as_the_other_commands_do() {
        let read = |url: &str| SourceConfig::from_url(url, "s", "p").unwrap().replication();
        // Percent-escapes in the user and the password; `+` is a plus there.
        let r = read("postgres://sl%75ice:p%40ss%3Aw+rd%2F@h:5433/my%20db");
        assert_eq!(
            (
                r.user.as_str(),
                r.password.as_str(),
                r.database.as_str(),
                r.port
            ),
            ("sluice", "p@ss:w+rd/", "my db", 5433)
        );
        // User, password, host, port, database as parameters.
        let r = read("postgres:///?user=u&password=pw&host=db.internal&port=6432&dbname=shop");
        assert_eq!(
            (
                r.host.as_str(),
                r.port,
                r.user.as_str(),
                r.password.as_str(),
                r.database.as_str()
            ),
            ("db.internal", 6432, "u", "pw", "shop")
        );
        let r = read("postgres://u@[::1]:5432/db?application_name=x&sslmode=disable");
        assert_eq!((r.host.as_str(), r.tls.mode), ("::1", SslMode::Disable));
        let r = read("postgres://u@h/db?sslmode=verify-full&sslcert=/c.crt&sslkey=/c.key");
        assert_eq!(
            (r.tls.client_cert_pem_path, r.tls.client_key_pem_path),
            (Some(PathBuf::from("/c.crt")), Some(PathBuf::from("/c.key")))
        );
        let r = read("postgres://u@h/?hostaddr=10.0.0.7");
        assert_eq!((r.host.as_str(), r.database.as_str()), ("10.0.0.7", "u"));
        for url in [
            "postgres:///db?user=u&host=/var/run/postgresql",
            "postgres://u@h/db?sslcert=/c.crt",
            "postgres://u@h/db?sslmod=require",
        ] {
            assert!(SourceConfig::from_url(url, "s", "p").is_err(), "{url}");
        }
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
