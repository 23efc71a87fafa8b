//! The pages: one file per page, sharing the viewer (may this request act?) and rendering.

pub mod assets;
pub mod dead_letters;
pub mod login;
pub mod outbox;
pub mod pipelines;
pub mod replay;
pub mod slots;

use crate::auth::Refused;
use crate::error::ConsoleError;
use crate::state::Console;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Serialize;
use serde_json::json;

/// Who is looking: whether actions exist at all, and the session's CSRF token if logged in.
#[derive(Debug, Clone, Serialize)]
pub struct Viewer {
    /// A token is configured.
    pub writable: bool,
    /// The session's CSRF token (logged in), for the action forms.
    pub csrf: Option<String>,
}

impl Viewer {
    /// The viewer of a request.
    pub fn of(console: &Console, headers: &HeaderMap) -> Viewer {
        Viewer {
            writable: console.sessions.writable(),
            csrf: console.sessions.grant(headers).map(|g| g.csrf),
        }
    }
}

/// Renders a template as a page.
pub fn render(
    console: &Console,
    name: &str,
    context: serde_json::Value,
) -> Result<Response, ConsoleError> {
    Ok(Html(console.templates.render(name, context)?).into_response())
}

/// A short page with a title and one message (`status` as given).
pub fn message(
    console: &Console,
    viewer: &Viewer,
    status: StatusCode,
    title: &str,
    text: &str,
    back: &str,
) -> Result<Response, ConsoleError> {
    let page = console.templates.render(
        "message.html",
        json!({ "title": title, "text": text, "back": back, "viewer": viewer }),
    )?;
    Ok((status, Html(page)).into_response())
}

/// A refused action: 403 with the reason.
pub fn forbidden(console: &Console, viewer: &Viewer, why: Refused) -> Response {
    tracing::info!(reason = %why, "console action refused");
    message(
        console,
        viewer,
        StatusCode::FORBIDDEN,
        "Forbidden",
        &why.to_string(),
        "/pipelines",
    )
    .unwrap_or_else(|_| (StatusCode::FORBIDDEN, why.to_string()).into_response())
}

/// `/`: the pipelines page.
pub async fn home() -> Redirect {
    Redirect::to("/pipelines")
}

/// Anything else: 404.
pub async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found")
}
