//! The HTTP server: routes, the security headers every response carries, the handler's time
//! in a `Server-Timing` header, and the rate sampler that runs beside it.
//!
//! The Content-Security-Policy allows scripts, styles, images and requests from the
//! console's own origin only, and no inline script or style: even a dead letter that got
//! past escaping could not run a script or reach another host.

use crate::error::ConsoleError;
use crate::pages;
use crate::sampler::INTERVAL;
use crate::settings::ConsoleSettings;
use crate::sources::Sources;
use crate::state::Console;
use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The Content-Security-Policy of every response.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'self'";

/// Binds the console's address; a failure (a port in use, an address of another host) is
/// [`ConsoleError::Listen`], the caller's configuration error.
pub async fn bind(settings: &ConsoleSettings) -> Result<tokio::net::TcpListener, ConsoleError> {
    tokio::net::TcpListener::bind(settings.addr)
        .await
        .map_err(|source| ConsoleError::Listen {
            addr: settings.addr,
            source,
        })
}

/// Serves the console on `listener` (from [`bind`]) until `stop` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    settings: ConsoleSettings,
    sources: Sources,
    stop: CancellationToken,
) -> Result<(), ConsoleError> {
    let console = Console::new(sources, settings.token.clone())?;
    let sampler = tokio::spawn(sample_rates(Arc::clone(&console), stop.clone()));
    tracing::info!(addr = %settings.addr, writable = settings.writable(),
        pipelines = console.sources.pipelines.len(), "sluice console listening");
    let hosts = loopback_hosts(&settings);
    let app = router(console).layer(middleware::from_fn(move |request: Request, next: Next| {
        let hosts = hosts.clone();
        async move { check_host(hosts.as_deref(), request, next).await }
    }));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(stop.clone().cancelled_owned())
        .await
        .map_err(ConsoleError::Serve);
    stop.cancel();
    let _ = sampler.await;
    served
}

fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(pages::home))
        .route("/pipelines", get(pages::pipelines::page))
        .route("/api/rates", get(pages::pipelines::rates))
        .route("/dead-letters", get(pages::dead_letters::list))
        .route(
            "/dead-letters/replay",
            get(pages::replay::preview).post(pages::replay::execute),
        )
        .route("/dead-letters/{id}", get(pages::dead_letters::detail))
        .route("/dead-letters/{id}/replay", post(pages::replay::one))
        .route("/outbox", get(pages::outbox::page))
        .route("/outbox/retry", post(pages::outbox::retry))
        .route("/slots", get(pages::slots::page))
        .route("/login", get(pages::login::form).post(pages::login::submit))
        .route("/logout", post(pages::login::logout))
        .route("/assets/{name}", get(pages::assets::asset))
        .route("/favicon.ico", get(pages::assets::no_icon))
        .fallback(pages::not_found)
        .layer(middleware::from_fn(security_headers))
        .with_state(console)
}

/// On a loopback address, the `Host` values a browser on this machine sends
/// (`127.0.0.1:<port>`, `localhost:<port>`, `[::1]:<port>`); `None` (any) on another address,
/// where the console sits behind names and proxies the console cannot know.
fn loopback_hosts(settings: &ConsoleSettings) -> Option<Arc<[String]>> {
    let port = settings.addr.port();
    settings.addr.ip().is_loopback().then(|| {
        let names = ["127.0.0.1", "localhost", "[::1]"];
        let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
        if port == 80 {
            hosts.extend(names.iter().map(|n| (*n).to_owned()));
        }
        hosts.into()
    })
}

/// Refuses (421) a request whose `Host` is not one of `hosts`: a page of another site whose
/// name was re-bound to 127.0.0.1 (DNS rebinding) cannot read the console through the
/// operator's browser.
async fn check_host(hosts: Option<&[String]>, request: Request, next: Next) -> Response {
    if let Some(hosts) = hosts {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            tracing::info!(host = %sluice_core::untrusted::escape_controls(host),
                "console request for another host refused");
            return (
                axum::http::StatusCode::MISDIRECTED_REQUEST,
                "this console answers only to 127.0.0.1, localhost and [::1]",
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// Adds the security headers and `Server-Timing: app;dur=<ms>` (the handler's own time).
async fn security_headers(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let path = request.uri().path().to_owned();
    let mut response = next.run(request).await;
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(timing) = HeaderValue::from_str(&format!("app;dur={millis:.1}")) {
        headers.insert(HeaderName::from_static("server-timing"), timing);
    }
    tracing::debug!(path, status = response.status().as_u16(), millis, "served");
    response
}

/// Reads every pipeline's lag and members every [`INTERVAL`] until `stop`: the committed
/// offsets feed the rows/s samples, and the pipelines page shows the latest read (a page
/// then costs no Kafka round trip; each group's offsets need a coordinator lookup).
async fn sample_rates(console: Arc<Console>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let pipelines = console.sources.pipelines.clone();
        let read = console
            .kafka(move |admin| {
                pipelines
                    .iter()
                    .map(|p| crate::kafka_view::read_pipeline(admin, p))
                    .collect::<Vec<_>>()
            })
            .await;
        let now = chrono::Utc::now();
        match read {
            Ok(views) => {
                {
                    let mut samples = console.samples();
                    for (source, view) in console.sources.pipelines.iter().zip(&views) {
                        match &view.error {
                            None => samples.record(&source.name, now, view.committed),
                            Some(error) => {
                                tracing::debug!(pipeline = %source.name, %error,
                                    "cannot sample offsets");
                            }
                        }
                    }
                }
                console.keep_latest(views);
            }
            Err(error) => tracing::warn!(%error, "cannot sample offsets"),
        }
    }
}
