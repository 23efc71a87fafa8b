//! Every connection sluice opens goes through here: the URL is read the way libpq reads it
//! (`sslmode` disable | prefer | require | verify-ca | verify-full, `sslrootcert`, `sslcert`,
//! `sslkey`, a Unix socket directory in `host=/path`), and the connection is named
//! `sluice-<role>` in `pg_stat_activity` unless the URL (or `PGAPPNAME`) names it.
//!
//! TLS is rustls: with `prefer` (the default) a server that offers TLS gets an encrypted
//! connection, never a silent plaintext one; `verify-full` checks the certificate against
//! `sslrootcert` (else the Mozilla roots) and the host name.

use sluice_core::settings::{UnusableSetting, database_url};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{ConnectOptions, PgConnection};
use std::str::FromStr;

/// The options of `url`, named `sluice-<role>` unless the URL sets `application_name`.
///
/// A parameter whose loss would weaken the connection (a misspelt `sslmode`, `sslpassword`,
/// `channel_binding=require`; see [`database_url::problem`]) is refused, naming the
/// parameter, never its value; so is, at the process's first connection, a certificate or
/// key file the chosen `sslmode` reads that cannot be read. Other parameters the client does
/// not read (`connect_timeout`, an ORM's `schema`) are left out of what it is given (it
/// would log their values) and named in a warning, once.
pub fn connect_options(url: &str, role: &str) -> Result<PgConnectOptions, sqlx::Error> {
    let problem = database_url::problem(url)
        .map(|problem| format!("DATABASE_URL: {problem}"))
        .or_else(|| first_connection_file_problem(url));
    if let Some(problem) = problem {
        return Err(sqlx::Error::Configuration(Box::new(UnusableSetting(
            problem,
        ))));
    }
    let ignored = database_url::ignored(url);
    if !ignored.is_empty() {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(parameters = ?ignored, "DATABASE_URL parameters sluice does not read are ignored");
        });
    }
    let options = PgConnectOptions::from_str(&database_url::without_ignored(url))?;
    Ok(if options.get_application_name().is_some() {
        options
    } else {
        options.application_name(&format!("sluice-{role}"))
    })
}

/// [`unreadable_file`] at the process's first connection only: a file that goes missing
/// later (a certificate being rotated) is the client's error at connect, retried as any.
fn first_connection_file_problem(url: &str) -> Option<String> {
    static CHECKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if CHECKED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    unreadable_file(url)
}

/// The first certificate or key file the URL's `sslmode` reads that cannot be read, as a
/// sentence naming the parameter and the path (the client's own error names neither): the
/// root certificate under `verify-ca` and `verify-full`, the client's certificate and key
/// under any mode but `disable`.
fn unreadable_file(url: &str) -> Option<String> {
    let mode = database_url::ssl_mode(url);
    let verifies = mode == "verify-ca" || mode == "verify-full";
    let parsed = url::Url::parse(url).ok()?;
    parsed.query_pairs().find_map(|(key, path)| {
        let read = match key.as_ref() {
            "sslrootcert" | "ssl-root-cert" | "ssl-ca" => verifies,
            "sslcert" | "ssl-cert" | "sslkey" | "ssl-key" => mode != "disable",
            _ => false,
        };
        if !read {
            return None;
        }
        std::fs::File::open(path.as_ref()).err().map(|error| {
            format!(
                "DATABASE_URL: its parameter `{key}` names the file {path}, which cannot be \
                 read: {error}"
            )
        })
    })
}

/// One connection for `role` (see [`connect_options`]).
pub async fn connect(url: &str, role: &str) -> Result<PgConnection, sqlx::Error> {
    connect_options(url, role)?.connect().await
}

/// The server process behind `conn` (to cancel its statement from another connection).
pub async fn backend_pid(conn: &mut PgConnection) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
}

/// Asks the server to cancel the statement server process `pid` runs, from a connection
/// of its own (the same role may cancel its own sessions, no privilege needed). Returns
/// whether the signal was sent: `false` when that process is gone.
pub async fn cancel_backend(url: &str, role: &str, pid: i32) -> Result<bool, sqlx::Error> {
    let mut conn = connect(url, role).await?;
    let sent = sqlx::query_scalar("SELECT pg_cancel_backend($1)")
        .bind(pid)
        .fetch_one(&mut conn)
        .await;
    let _ = sqlx::Connection::close(conn).await;
    sent
}

/// A `LISTEN` connection for `role` (see [`connect_options`]).
pub async fn listener(url: &str, role: &str) -> Result<PgListener, sqlx::Error> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(connect_options(url, role)?);
    PgListener::connect_with(&pool).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_names_the_connection_unless_the_url_does() {
        let o = connect_options("postgres://u@h:5432/db", "reviews").unwrap();
        assert_eq!(o.get_application_name(), Some("sluice-reviews"));
        let o = connect_options("postgres://u@h/db?application_name=billing", "x").unwrap();
        assert_eq!(o.get_application_name(), Some("billing"));
    }

    #[test]
    fn libpq_url_parameters_are_understood() {
        let o = connect_options(
            "postgres://u@localhost/db?sslmode=verify-full&sslrootcert=/dev/null",
            "t",
        )
        .unwrap();
        assert!(matches!(
            o.get_ssl_mode(),
            sqlx::postgres::PgSslMode::VerifyFull
        ));
        let o = connect_options("postgres:///db?host=/var/run/postgresql", "t").unwrap();
        assert_eq!(
            o.get_socket(),
            Some(&std::path::PathBuf::from("/var/run/postgresql"))
        );
        assert!(connect_options("postgres://u@h/db?sslmode=sometimes", "t").is_err());
    }

    #[test]
    fn a_parameter_the_client_would_ignore_or_a_missing_file_is_refused_by_name() {
        let refused = |url: &str| match connect_options(url, "t") {
            Err(error) => error.to_string(),
            Ok(_) => panic!("{url} was accepted"),
        };
        let error = refused("postgres://u@h/db?sslpassword=keypass123");
        assert!(
            error.contains("`sslpassword`") && !error.contains("keypass123"),
            "{error}"
        );
        let error = refused("postgres://u@h/db?sslmod=verify-full");
        assert!(error.contains("`sslmod`"), "{error}");
        // The files a mode reads, named with their paths (checked at the process's first
        // connection only, so here through the check itself).
        for (url, named) in [
            (
                "postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt",
                "`sslrootcert`",
            ),
            (
                "postgres://u@h/db?sslkey=/nonexistent/client.key",
                "`sslkey`",
            ),
        ] {
            let error = unreadable_file(url).unwrap_or_default();
            assert!(
                error.contains(named) && error.contains("/nonexistent/"),
                "{error}"
            );
        }
        // A root certificate `require` never reads, a client key under `disable`: fine.
        assert_eq!(
            unreadable_file("postgres://u@h/db?sslmode=require&sslrootcert=/nonexistent/ca.crt"),
            None
        );
        assert_eq!(
            unreadable_file("postgres://u@h/db?sslmode=disable&sslkey=/nonexistent/c.key"),
            None
        );
        // A parameter the client does not read is left out (its value never reaches it).
        let options =
            connect_options("postgres://u@h/db?connect_timeout=10&schema=public", "t").unwrap();
        assert_eq!(options.get_database(), Some("db"));
    }
}
