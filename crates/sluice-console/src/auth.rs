//! Who may act. Without a token the console is read-only: no session can be opened and every
//! action is refused. With one, the operator logs in with the token (compared in constant
//! time) and gets a random session id in a cookie that scripts cannot read (`HttpOnly`) and
//! other sites cannot send (`SameSite=Strict`); every action form carries the session's
//! CSRF token, checked on POST. Sessions live in memory: restarting the console logs
//! everyone out.

use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE_NAME: &str = "sluice_console";
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// The most sessions kept (the oldest is dropped beyond it).
const MAX_SESSIONS: usize = 1024;

/// An open session: what a page needs to render action forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The session's CSRF token (a hidden field of every action form).
    pub csrf: String,
}

#[derive(Debug)]
struct Session {
    csrf: String,
    opened: Instant,
}

/// The token and the open sessions.
pub struct Sessions {
    token: Option<String>,
    open: Mutex<HashMap<String, Session>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("writable", &self.token.is_some())
            .finish_non_exhaustive()
    }
}

/// Why an action was refused (each a 403).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// No token is configured: the console is read-only.
    #[error("the console is read-only (SLUICE_CONSOLE_TOKEN is not set)")]
    ReadOnly,
    /// No valid session cookie.
    #[error("log in first")]
    NoSession,
    /// The form's CSRF token is missing or wrong.
    #[error("the form's CSRF token does not match the session")]
    Csrf,
    /// The login token is wrong.
    #[error("wrong token")]
    WrongToken,
    /// The operating system's random generator failed: no session id can be made.
    #[error("no randomness for a session id")]
    NoRandomness,
}

impl Sessions {
    /// Sessions checked against `token` (`None`: read-only).
    pub fn new(token: Option<String>) -> Self {
        Self {
            token,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Whether actions can be enabled at all.
    pub fn writable(&self) -> bool {
        self.token.is_some()
    }

    /// Opens a session if `given` is the token: returns the session id for the cookie.
    pub fn log_in(&self, given: &str) -> Result<String, Refused> {
        let token = self.token.as_deref().ok_or(Refused::ReadOnly)?;
        if !equal(token.as_bytes(), given.as_bytes()) {
            return Err(Refused::WrongToken);
        }
        let (id, csrf) = random_hex()
            .zip(random_hex())
            .ok_or(Refused::NoRandomness)?;
        let mut open = self.lock();
        open.retain(|_, s| s.opened.elapsed() < SESSION_TTL);
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.opened)
                .map(|(k, _)| k.clone())
        {
            open.remove(&oldest);
        }
        open.insert(
            id.clone(),
            Session {
                csrf,
                opened: Instant::now(),
            },
        );
        Ok(id)
    }

    /// The session of the request's cookie, if it is open.
    pub fn grant(&self, headers: &HeaderMap) -> Option<Grant> {
        self.token.as_ref()?;
        let id = session_id(headers)?;
        let open = self.lock();
        open.iter()
            .find(|(k, s)| equal(k.as_bytes(), id.as_bytes()) && s.opened.elapsed() < SESSION_TTL)
            .map(|(_, s)| Grant {
                csrf: s.csrf.clone(),
            })
    }

    /// Checks an action: a token is configured, the cookie names an open session, and the
    /// form's CSRF token is that session's.
    pub fn authorize(&self, headers: &HeaderMap, csrf: &str) -> Result<Grant, Refused> {
        if !self.writable() {
            return Err(Refused::ReadOnly);
        }
        let grant = self.grant(headers).ok_or(Refused::NoSession)?;
        if equal(grant.csrf.as_bytes(), csrf.as_bytes()) {
            Ok(grant)
        } else {
            Err(Refused::Csrf)
        }
    }

    /// Closes the request's session, if any.
    pub fn log_out(&self, headers: &HeaderMap) {
        if let Some(id) = session_id(headers) {
            self.lock().remove(&id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The `Set-Cookie` value of a new session.
pub fn session_cookie(id: &str) -> String {
    format!(
        "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_TTL.as_secs()
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn cleared_cookie() -> String {
    format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
}

/// The session id of the request's `Cookie` header.
fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
        .filter(|v| !v.is_empty())
}

/// Constant-time equality (the length is not secret).
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// 32 random bytes as hex (from the operating system's generator), `None` if it fails.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn read_only_refuses_everything() {
        let sessions = Sessions::new(None);
        assert_eq!(sessions.log_in("anything"), Err(Refused::ReadOnly));
        assert_eq!(
            sessions.authorize(&with_cookie("sluice_console=x"), "y"),
            Err(Refused::ReadOnly)
        );
        assert_eq!(sessions.grant(&with_cookie("sluice_console=x")), None);
    }

    #[test]
    fn an_action_needs_the_session_and_its_csrf_token() {
        let sessions = Sessions::new(Some("the-operator-token".into()));
        assert_eq!(sessions.log_in("wrong"), Err(Refused::WrongToken));
        let id = sessions.log_in("the-operator-token").unwrap();
        assert_eq!(id.len(), 64);
        let headers = with_cookie(&format!("other=1; {COOKIE_NAME}={id}"));
        let grant = sessions.grant(&headers).unwrap();
        assert_eq!(sessions.authorize(&headers, &grant.csrf), Ok(grant.clone()));
        assert_eq!(sessions.authorize(&headers, "forged"), Err(Refused::Csrf));
        assert_eq!(
            sessions.authorize(&HeaderMap::new(), &grant.csrf),
            Err(Refused::NoSession)
        );
        sessions.log_out(&headers);
        assert_eq!(
            sessions.authorize(&headers, &grant.csrf),
            Err(Refused::NoSession)
        );
    }

    #[test]
    fn the_cookie_cannot_be_read_by_scripts_nor_sent_by_other_sites() {
        let cookie = session_cookie("abc");
        assert!(cookie.starts_with("sluice_console=abc;"));
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    }
}
