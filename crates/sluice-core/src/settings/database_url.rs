//! The query parameters of a `postgres://` URL (`DATABASE_URL`): which the client reads,
//! which it would ignore, and which must stop the process because ignoring them would weaken
//! the connection (a misspelt `sslmode`, a channel binding or GSS encryption required).
//! Keys are read as the client reads them: percent-escapes decoded, `+` a space.

/// The parameters sluice's PostgreSQL client reads: libpq's names, and the spellings sqlx
/// takes beside them (`options[name]` too).
pub const READ: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// The `sslmode` values, as libpq names them (any case).
pub const SSL_MODES: &[&str] = &[
    "disable",
    "allow",
    "prefer",
    "require",
    "verify-ca",
    "verify-full",
];

/// The URL's query parameters, keys decoded, values as written (still escaped).
pub fn parameters(url: &str) -> Vec<(String, &str)> {
    let Some((_, query)) = url.split_once('?') else {
        return Vec::new();
    };
    let query = query.split('#').next().unwrap_or_default();
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decoded(key), value)
        })
        .collect()
}

/// `text` with its percent-escapes decoded and `+` read as a space (a malformed escape is
/// kept as written).
fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[at] {
            b'%' if at + 2 < bytes.len() => match (hex(bytes[at + 1]), hex(bytes[at + 2])) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    at += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            byte => out.push(byte),
        }
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the client reads parameter `key`.
pub fn is_read(key: &str) -> bool {
    READ.contains(&key) || (key.starts_with("options[") && key.ends_with(']'))
}

/// What is wrong with the URL's parameters, if anything: a parameter whose loss would weaken
/// the connection — an `ssl…` one the client does not read (a misspelt `sslmode`), an
/// `sslmode` it does not know, `sslpassword` (an encrypted client key, not supported),
/// `sslrootcert=system` (not supported: without `sslrootcert` the built-in roots are used),
/// `channel_binding=require` or `gssencmode=require` (not supported). Names the parameter,
/// never its value. Other parameters the client does not read (`connect_timeout`, an ORM's
/// `schema`) are not a problem: [`ignored`] lists them.
pub fn problem(url: &str) -> Option<String> {
    // A URL ends at `#`: a password holding one would be cut there, and the client would
    // then report the rest as an invalid port.
    let authority = url.split_once("://").map_or("", |(_, rest)| {
        rest.split(['/', '?']).next().unwrap_or_default()
    });
    if authority.contains('#') {
        return Some(
            "has a `#` before its host ends, where a URL ends (the rest would be dropped): \
             write it as `%23` (in a password, for example)"
                .to_owned(),
        );
    }
    for (key, value) in parameters(url) {
        let value = decoded(value).to_ascii_lowercase();
        let problem = match key.as_str() {
            "sslmode" | "ssl-mode" if !SSL_MODES.contains(&value.as_str()) => {
                format!("must be one of {}", SSL_MODES.join(", "))
            }
            "sslpassword" => "(the passphrase of an encrypted client key) is not supported: give \
                 `sslkey` a key file that is not encrypted"
                .to_owned(),
            "sslrootcert" | "ssl-root-cert" | "ssl-ca" if value == "system" => {
                "`system` (libpq's system roots) is not supported: leave it out to verify \
                 against the built-in Mozilla roots"
                    .to_owned()
            }
            "channel_binding" | "gssencmode" if value == "require" => {
                "`require` is not supported (sluice's client cannot do it): remove it".to_owned()
            }
            // A server could then ask for the password in clear; sluice's client cannot refuse.
            "require_auth" if value != "none" => {
                "is not supported (sluice's client cannot restrict the server's authentication \
                 method): remove it"
                    .to_owned()
            }
            "requiressl" => "is not supported: write `sslmode=require`".to_owned(),
            // Any case: `SSLMODE=verify-full` would otherwise be left out for `prefer`.
            _ if key.to_ascii_lowercase().starts_with("ssl") && !is_read(&key) => "is not one \
                 sluice reads (its TLS parameters are sslmode, sslrootcert, sslcert and sslkey)"
                .to_owned(),
            _ => continue,
        };
        return Some(format!("its parameter `{key}` {problem}"));
    }
    None
}

/// The parameters the client does not read and that are no [`problem`]: left out of the
/// URL the client is given (it would log their values), named in a warning.
pub fn ignored(url: &str) -> Vec<String> {
    parameters(url)
        .into_iter()
        .map(|(key, _)| key)
        .filter(|key| !is_read(key))
        .collect()
}

/// `url` without the parameters [`ignored`] lists.
pub fn without_ignored(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query, None),
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(key, _)| key);
            !pair.is_empty() && is_read(&decoded(key))
        })
        .collect();
    let mut out = base.to_owned();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// The `sslmode` the URL sets (`prefer` when it sets none), lower-case.
pub fn ssl_mode(url: &str) -> String {
    parameters(url)
        .into_iter()
        .rfind(|(key, _)| key == "sslmode" || key == "ssl-mode")
        .map_or_else(
            || "prefer".to_owned(),
            |(_, value)| decoded(value).to_ascii_lowercase(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_client_reads_or_may_ignore_passes() {
        for url in [
            "postgres://u@h/db",
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=/ca.crt&sslcert=/c&sslkey=/k",
            "postgres://u@h/db?sslmode=VERIFY-CA&application_name=x&options[search_path]=s",
            "postgres:///db?host=/var/run/postgresql&user=u&password=p&port=5432&dbname=d",
            "postgres://u@h/db?ssl-mode=require&statement-cache-capacity=10#frag",
            // Neon, Prisma, libpq's timeouts: not read, not a problem.
            "postgres://u@h/db?sslmode=require&channel_binding=prefer&connect_timeout=10",
            "postgres://u@h/db?schema=public&pgbouncer=true&target_session_attrs=read-write",
            "postgres://u@h/db?options%5Bsearch_path%5D=x&sslmode=allow",
        ] {
            assert_eq!(problem(url), None, "{url}");
        }
        assert_eq!(
            ignored("postgres://u@h/db?sslmode=require&connect_timeout=10&schema=public"),
            ["connect_timeout", "schema"]
        );
        assert_eq!(
            without_ignored("postgres://u@h/db?connect_timeout=10&sslmode=require&pwd=x#f"),
            "postgres://u@h/db?sslmode=require#f"
        );
        assert_eq!(
            without_ignored("postgres://u@h/db?connect_timeout=10"),
            "postgres://u@h/db"
        );
        assert_eq!(ssl_mode("postgres://u@h/db"), "prefer");
        assert_eq!(
            ssl_mode("postgres://u@h/db?sslmode=Verify-Full"),
            "verify-full"
        );
    }

    #[test]
    fn what_would_weaken_the_connection_is_refused_without_its_value() {
        for (url, named) in [
            ("postgres://u@h/db?sslmod=verify-full", "`sslmod`"),
            (
                "postgres://u@h/db?sslmode=bogus",
                "`sslmode` must be one of",
            ),
            ("postgres://u@h/db?sslmode=", "`sslmode` must be one of"),
            ("postgres://u@h/db?sslpassword=keypass123", "`sslpassword`"),
            ("postgres://u:pa#ss@h:5432/db", "`%23`"),
            ("postgres://u@h/db?ssl%6dode=bogus", "`sslmode`"),
            ("postgres://u@h/db?sslrootcert=system", "`sslrootcert`"),
            (
                "postgres://u@h/db?channel_binding=require",
                "`channel_binding`",
            ),
            ("postgres://u@h/db?gssencmode=require", "`gssencmode`"),
            (
                "postgres://u@h/db?require_auth=scram-sha-256",
                "`require_auth`",
            ),
            ("postgres://u@h/db?requiressl=1", "`requiressl`"),
            ("postgres://u@h/db?SSLMODE=verify-full", "`SSLMODE`"),
        ] {
            let problem = problem(url).unwrap_or_default();
            assert!(problem.contains(named), "{url}: {problem}");
            assert!(
                !problem.contains("keypass123") && !problem.contains("bogus"),
                "{problem}"
            );
        }
    }
}
