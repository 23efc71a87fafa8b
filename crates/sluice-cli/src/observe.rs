//! The HTTP endpoint of the long-running commands, on when `SLUICE_HTTP_ADDR` is set:
//! `GET /metrics` (Prometheus text format 0.0.4, or OpenMetrics 1.0 when the scraper's
//! `Accept` asks for `application/openmetrics-text`), `GET /health/live` and
//! `GET /health/ready`.
//!
//! The server runs on its own thread and single-threaded runtime: a slow scraper never
//! blocks a pipeline, and the pipelines never wait for the server (metrics are atomics the
//! server only reads).

use crate::Failure;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The variable that turns the endpoint on.
pub const ADDR_VARIABLE: &str = "SLUICE_HTTP_ADDR";

/// The `--help` line of [`ADDR_VARIABLE`], its name padded to `width`.
pub fn help_line(width: usize) -> String {
    format!(
        "  {ADDR_VARIABLE:<width$} Serve /metrics, /health/live and /health/ready there, e.g. \
         127.0.0.1:9464 (a port in use exits 2) [default: off]\n"
    )
}

/// Whether the command is ready (or alive): `Err` lists what is not, one line each.
pub type Readiness = Arc<dyn Fn() -> Result<(), Vec<String>> + Send + Sync>;

/// What the health routes ask.
#[derive(Clone)]
pub struct Health {
    /// `/health/ready`.
    pub ready: Readiness,
    /// `/health/live`: the command's loops are alive.
    pub live: Readiness,
}

impl Health {
    /// The health of a command whose state lives in `state` (its metrics): `ready` and
    /// `live` are asked of a clone of it on each request.
    pub fn of<S: Clone + Send + Sync + 'static>(
        state: &S,
        ready: fn(&S) -> Result<(), Vec<String>>,
        live: fn(&S) -> Result<(), Vec<String>>,
    ) -> Health {
        let (for_ready, for_live) = (state.clone(), state.clone());
        Health {
            ready: Arc::new(move || ready(&for_ready)),
            live: Arc::new(move || live(&for_live)),
        }
    }
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Health")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    librdkafka: String,
}

/// Registers `sluice_build_info{version,librdkafka}` (always 1).
pub fn register_build_info(registry: &mut Registry) {
    let info = Family::<BuildLabels, Gauge>::default();
    let librdkafka = sluice_kafka::config::librdkafka_build()
        .map(|(version, _)| version)
        .unwrap_or_else(|_| "unknown".into());
    info.get_or_create(&BuildLabels {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        librdkafka,
    })
    .set(1);
    registry.register(
        "sluice_build_info",
        "sluice's version and the librdkafka it was built with (always 1)",
        info,
    );
}

/// The running endpoint; stopped when dropped.
#[derive(Debug)]
pub struct Endpoint {
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[derive(Clone)]
struct Shared {
    registry: Arc<Registry>,
    health: Health,
}

/// Starts the endpoint if `SLUICE_HTTP_ADDR` is set. An address that does not parse or
/// cannot be bound (a port in use) is a configuration failure (exit 2) naming the variable.
pub fn start(registry: Registry, health: Health) -> Result<Option<Endpoint>, Failure> {
    let Some(raw) = crate::cmd::env_lookup(ADDR_VARIABLE).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let addr: SocketAddr = raw.trim().parse().map_err(|error| {
        Failure::config(anyhow::anyhow!(
            "{ADDR_VARIABLE}={raw:?}: not a socket address such as 127.0.0.1:9464 ({error})"
        ))
    })?;
    let listener = std::net::TcpListener::bind(addr).map_err(|error| {
        Failure::config(anyhow::anyhow!(
            "{ADDR_VARIABLE}={raw}: cannot listen there: {error}"
        ))
    })?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let shared = Shared {
        registry: Arc::new(registry),
        health,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("http".into())
            .spawn(move || runtime.block_on(serve(listener, shared, stop)))?
    };
    tracing::info!(%addr, "HTTP endpoint: /metrics, /health/live, /health/ready");
    Ok(Some(Endpoint {
        stop,
        thread: Some(thread),
    }))
}

async fn serve(listener: std::net::TcpListener, shared: Shared, stop: CancellationToken) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(%error, "HTTP endpoint cannot start");
            return;
        }
    };
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/health/live", get(live))
        .route("/health/ready", get(ready))
        .with_state(shared);
    if let Err(error) = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
    {
        tracing::warn!(%error, "HTTP endpoint stopped");
    }
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

async fn metrics(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let mut body = String::new();
    let encoded = if openmetrics {
        prometheus_client::encoding::text::encode(&mut body, &shared.registry)
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut body, &shared.registry)
    };
    match encoded {
        Ok(()) => {
            let kind = if openmetrics {
                OPENMETRICS
            } else {
                PROMETHEUS_TEXT
            };
            ([(header::CONTENT_TYPE, kind)], body).into_response()
        }
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics\n",
        )
            .into_response(),
    }
}

async fn ready(State(shared): State<Shared>) -> Response {
    verdict((shared.health.ready)(), "ready", "not ready")
}

async fn live(State(shared): State<Shared>) -> Response {
    verdict((shared.health.live)(), "ok", "not alive")
}

/// 200 with `good`, or 503 with `bad` and one line per problem.
fn verdict(result: Result<(), Vec<String>>, good: &str, bad: &str) -> Response {
    match result {
        Ok(()) => format!("{good}\n").into_response(),
        Err(problems) => {
            let mut body = format!("{bad}\n");
            for p in problems {
                body.push_str(&p);
                body.push('\n');
            }
            (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
        }
    }
}
