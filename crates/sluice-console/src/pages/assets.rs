//! The console's own static files, compiled into the binary: its stylesheet and the live
//! chart's script (the only script; every page works without it). Nothing is loaded from
//! another origin.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const ASSETS: [(&str, &str, &str); 3] = [
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../assets/console.css"),
    ),
    (
        "chart.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/chart.js"),
    ),
    (
        "LICENSE-chart.txt",
        "text/plain; charset=utf-8",
        include_str!("../assets/LICENSE-chart.txt"),
    ),
];

/// `GET /assets/{name}`.
pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, ..)| *n == name) {
        Some((_, content_type, body)) => {
            ([(header::CONTENT_TYPE, *content_type)], *body).into_response()
        }
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// `GET /favicon.ico`: no icon (204, so a browser logs no failed load).
pub async fn no_icon() -> StatusCode {
    StatusCode::NO_CONTENT
}
