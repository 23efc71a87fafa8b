//! Printing secrets and untrusted bytes safely.
//!
//! - [`redact_url`]: a connection URL's password never reaches a message, a log line or an
//!   error, whatever characters it holds (an unencoded `/`, `@`, `?` or `#` included).
//! - [`escape_controls`]: text that came from a Kafka message (a package name, a reason that
//!   echoes a field, a key or a payload) is printed with its control characters escaped, so
//!   a message cannot move the cursor, rewrite a terminal's title (ANSI/OSC sequences), forge
//!   a log line with a newline, or reorder what is shown (bidirectional overrides).

use std::borrow::Cow;

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "***";

/// A connection URL without its secrets.
///
/// Everything between `://` and the *last* `@` is the userinfo: a password may hold any
/// character, so no earlier `/`, `?` or `#` is trusted to end it. The user name before the
/// first `:` is kept when it is a plain name; otherwise the whole userinfo is replaced. A
/// `password` query parameter (or any `…password` one, such as `sslpassword`) is replaced
/// too. Without `://`, everything before the last `@` is replaced. Over-redacting (a `@`
/// in the query string) is accepted: it can hide a host, never show a password.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let (userinfo, after) = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let shown = match userinfo.split_once(':') {
                _ if scheme.is_empty() => REDACTED.to_owned(),
                Some((user, _)) if is_plain_user(user) => format!("{user}:{REDACTED}"),
                None if is_plain_user(userinfo) => userinfo.to_owned(),
                _ => REDACTED.to_owned(),
            };
            (format!("{shown}@"), &rest[at + 1..])
        }
        None => (String::new(), rest),
    };
    format!("{scheme}{userinfo}{}", redact_query_passwords(after))
}

/// A user name that cannot be the tail of a password: no delimiter of a URL in it.
fn is_plain_user(user: &str) -> bool {
    !user.contains(['/', '?', '#', '@', ':'])
}

/// `host/db?user=u&password=x#f` → `host/db?user=u&password=***#f`.
fn redact_query_passwords(rest: &str) -> String {
    let Some((path, query)) = rest.split_once('?') else {
        return rest.to_owned();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if key.to_ascii_lowercase().ends_with("password") => {
                format!("{key}={REDACTED}")
            }
            _ => param.to_owned(),
        })
        .collect();
    let mut out = format!("{path}?{}", params.join("&"));
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// Whether `c` must not reach a terminal or a log line raw: C0 and C1 controls, DEL, and
/// the invisible characters that change how text around them is shown (bidirectional
/// overrides and isolates, zero-width characters, line and paragraph separators).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}')
}

/// `text` with every unsafe character escaped: `\n`, `\r`, `\t`, and `\u{…}` for the rest
/// (ESC is `\u{1b}`). Printable text, quotes and backslashes are left as they are, so a
/// JSON payload stays readable. Borrows when there is nothing to escape.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A JSON document made safe for a terminal without changing its meaning: serializers
/// escape C0 controls already, but leave C1 controls, DEL and the invisible formatting
/// characters raw; these can only occur inside JSON strings, where `\uXXXX` means the same.
pub fn escape_json_text(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_unsafe) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        // Whitespace between JSON tokens (newlines of a pretty print) stays as it is.
        if is_unsafe(c) && !matches!(c, '\n' | '\r' | '\t') {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_whatever_they_hold() {
        let cases = [
            ("postgres://u:pw@h:1/db?x=1", "postgres://u:***@h:1/db?x=1"),
            ("postgres://u:ab/cd@h/db", "postgres://u:***@h/db"),
            ("postgres://u:a@b@h/db", "postgres://u:***@h/db"),
            ("postgres://u:a:b@h/db", "postgres://u:***@h/db"),
            ("postgres://u:a?b=c@h/db", "postgres://u:***@h/db"),
            ("postgres://u:a#b@h/db", "postgres://u:***@h/db"),
            ("postgres://u:p%40ss%2F@h/db", "postgres://u:***@h/db"),
            ("postgresql://:secret@h/db", "postgresql://:***@h/db"),
            ("postgres://us%3Aer:pw@h/db", "postgres://us%3Aer:***@h/db"),
            // The password before an unencoded '/': the "user" is not a plain name.
            ("postgres://u/x:pw@h/db", "postgres://***@h/db"),
            ("postgres://secret/part@h/db", "postgres://***@h/db"),
            // No password, no userinfo: nothing to hide.
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://h:5432/db", "postgres://h:5432/db"),
            (
                "postgres://h/db?sslmode=disable",
                "postgres://h/db?sslmode=disable",
            ),
            // A password in the query string.
            (
                "postgres://u@h/db?password=s3cret&sslmode=require",
                "postgres://u@h/db?password=***&sslmode=require",
            ),
            (
                "postgres://h/db?sslmode=verify-full&SSLPassword=k#f",
                "postgres://h/db?sslmode=verify-full&SSLPassword=***#f",
            ),
            // An '@' after the host: more is hidden, never less.
            (
                "postgres://u:pw@h/db?application_name=a@b",
                "postgres://u:***@b",
            ),
            // Not a URL at all.
            ("u:secret@h", "***@h"),
            ("secret@h", "***@h"),
            ("plain", "plain"),
            ("", ""),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
        for secret in [
            "pw", "ab/cd", "a@b", "a:b", "a?b=c", "a#b", "p%40ss", "s3cret", "k",
        ] {
            let url = format!("postgres://u:{secret}@h/db");
            assert!(!redact_url(&url).contains(secret), "{url}");
        }
    }

    #[test]
    fn control_characters_are_escaped_and_text_is_kept() {
        assert!(matches!(
            escape_controls("com.example.app"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\u{1b}]0;pwned\u{7}b"),
            "a\\u{1b}]0;pwned\\u{7}b"
        );
        assert_eq!(escape_controls("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape_controls("line\nforged\r\tx"), "line\\nforged\\r\\tx");
        assert_eq!(escape_controls("\u{9b}\u{7f}\u{0}"), "\\u{9b}\\u{7f}\\u{0}");
        assert_eq!(escape_controls("abc\u{202e}def"), "abc\\u{202e}def");
        assert_eq!(
            escape_controls(r#"{"a":"é \"q\" \\n ✓"}"#),
            r#"{"a":"é \"q\" \\n ✓"}"#
        );
    }

    #[test]
    fn json_stays_json_and_gets_no_raw_control() {
        let value = serde_json::json!({"p": "\u{1b}]0;pwned\u{7}\u{9b}31m\u{202e}\n"});
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let safe = escape_json_text(&pretty);
        assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
