//! `/login` and `/logout`: a session from the operator token.

use super::{Viewer, forbidden, render};
use crate::auth::{Refused, cleared_cookie, session_cookie};
use crate::error::ConsoleError;
use crate::state::Console;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    token: String,
}

/// The logout form's fields.
#[derive(Debug, Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

/// `GET /login`.
pub async fn form(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    render(
        &console,
        "login.html",
        json!({ "title": "Log in", "viewer": viewer, "error": null }),
    )
}

/// `POST /login`: a session cookie and back to the pipelines, or 403.
pub async fn submit(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(login): Form<LoginForm>,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    match console.sessions.log_in(&login.token) {
        Ok(id) => {
            tracing::info!("console operator logged in");
            let mut response = Redirect::to("/pipelines").into_response();
            if let Ok(cookie) = HeaderValue::from_str(&session_cookie(&id)) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            Ok(response)
        }
        Err(Refused::WrongToken) => {
            tracing::warn!("console login with a wrong token");
            let page = render(
                &console,
                "login.html",
                json!({ "title": "Log in", "viewer": viewer, "error": "wrong token" }),
            )?;
            Ok((StatusCode::FORBIDDEN, page).into_response())
        }
        Err(why) => Ok(forbidden(&console, &viewer, why)),
    }
}

/// `POST /logout` (with the CSRF token, so another page cannot log the operator out).
pub async fn logout(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    let viewer = Viewer::of(&console, &headers);
    if let Err(why) = console.sessions.authorize(&headers, &form.csrf) {
        return forbidden(&console, &viewer, why);
    }
    console.sessions.log_out(&headers);
    let mut response = Redirect::to("/pipelines").into_response();
    if let Ok(cookie) = HeaderValue::from_str(&cleared_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}
