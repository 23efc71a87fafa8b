//! The HTTP endpoint of the long-running commands, on when `SLUICE_HTTP_ADDR` is set:
//! `GET /metrics` (Prometheus text format 0.0.4, or OpenMetrics 1.0 when the scraper's
//! `Accept` asks for `application/openmetrics-text`), `GET /health/live` and
//! `GET /health/ready`.
//!
//! The server runs on its own thread and single-threaded runtime: a slow scraper never
//! blocks a pipeline, and the pipelines never wait for the server (metrics are atomics the
//! server only reads).

use crate::{Failure, env_lookup};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
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

/// Why the endpoint did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// `SLUICE_HTTP_ADDR` is not a socket address (a configuration error).
    #[error("{ADDR_VARIABLE}={raw:?}: not a socket address such as 127.0.0.1:9464 ({source})")]
    BadAddress {
        /// The variable's value.
        raw: String,
        /// Why it does not parse.
        source: std::net::AddrParseError,
    },
    /// The address cannot be bound, e.g. a port in use (a configuration error).
    #[error("{ADDR_VARIABLE}={raw}: cannot listen there: {source}")]
    CannotListen {
        /// The variable's value.
        raw: String,
        /// The bind error.
        source: std::io::Error,
    },
    /// The server's socket, runtime or thread could not be set up.
    #[error(transparent)]
    Setup(#[from] std::io::Error),
}

impl EndpointError {
    /// Whether the operator's setting is at fault (exit 2) rather than the machine (exit 1).
    pub fn is_config(&self) -> bool {
        matches!(self, Self::BadAddress { .. } | Self::CannotListen { .. })
    }
}

/// The running endpoint; stopped when dropped.
#[derive(Debug)]
pub struct Endpoint {
    addr: SocketAddr,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    /// The address it listens on (the port the system chose when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
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
    let Some(raw) = env_lookup(ADDR_VARIABLE).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match start_at(&raw, registry, health) {
        Ok(endpoint) => Ok(Some(endpoint)),
        Err(error) if error.is_config() => Err(Failure::config(error)),
        Err(error) => Err(Failure::from(error)),
    }
}

/// Starts the endpoint at `raw` (the value of `SLUICE_HTTP_ADDR`).
pub fn start_at(raw: &str, registry: Registry, health: Health) -> Result<Endpoint, EndpointError> {
    let addr: SocketAddr = raw
        .trim()
        .parse()
        .map_err(|source| EndpointError::BadAddress {
            raw: raw.to_owned(),
            source,
        })?;
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| EndpointError::CannotListen {
            raw: raw.to_owned(),
            source,
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
    Ok(Endpoint {
        addr,
        stop,
        thread: Some(thread),
    })
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
    verdict(
        readiness(&shared.health, crate::stopping()),
        "ready",
        "not ready",
    )
}

/// Not ready once a stop signal arrived (an orchestrator sends no more work to a process
/// that finishes what it holds); otherwise as the command's own readiness says.
fn readiness(health: &Health, stopping: bool) -> Result<(), Vec<String>> {
    if stopping {
        return Err(vec![
            "stopping: a stop signal arrived; finishing the work in flight".to_owned(),
        ]);
    }
    (health.ready)()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn health(ready: Result<(), Vec<String>>) -> Health {
        Health {
            ready: Arc::new(move || ready.clone()),
            live: Arc::new(|| Ok(())),
        }
    }

    /// The status code, the headers and the body of `GET path` (HTTP/1.0, so the server
    /// closes the connection after the response).
    fn get(endpoint: &Endpoint, path: &str, headers: &str) -> (u16, String, String) {
        let mut stream = std::net::TcpStream::connect(endpoint.addr()).expect("connect");
        write!(stream, "GET {path} HTTP/1.0\r\nHost: test\r\n{headers}\r\n").expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status code");
        (status, head.to_owned(), body.to_owned())
    }

    #[test]
    fn serves_metrics_in_both_formats_and_health() {
        let mut registry = Registry::default();
        crate::register_build_info(&mut registry);
        let endpoint = start_at("127.0.0.1:0", registry, health(Ok(()))).expect("endpoint");

        let (status, head, body) = get(&endpoint, "/metrics", "");
        assert_eq!(status, 200);
        assert!(head.contains(PROMETHEUS_TEXT), "{head}");
        assert!(body.contains("sluice_build_info{version=\""), "{body}");

        let accept = "Accept: application/openmetrics-text\r\n";
        let (status, head, body) = get(&endpoint, "/metrics", accept);
        assert_eq!(status, 200);
        assert!(head.contains(OPENMETRICS), "{head}");
        assert!(body.ends_with("# EOF\n"), "{body}");

        assert_eq!(get(&endpoint, "/health/live", "").2, "ok\n");
        assert_eq!(get(&endpoint, "/health/ready", "").2, "ready\n");
    }

    #[test]
    fn not_ready_is_503_with_one_line_per_problem() {
        let problems = vec![
            "reviews: not running".to_owned(),
            "outbox: stalled".to_owned(),
        ];
        let endpoint =
            start_at("127.0.0.1:0", Registry::default(), health(Err(problems))).expect("endpoint");
        let (status, _, body) = get(&endpoint, "/health/ready", "");
        assert_eq!(status, 503);
        assert_eq!(body, "not ready\nreviews: not running\noutbox: stalled\n");
    }

    #[test]
    fn a_stopping_process_is_not_ready_whatever_its_command_says() {
        let stopping = readiness(&health(Ok(())), true).expect_err("stopping");
        assert_eq!(
            stopping,
            ["stopping: a stop signal arrived; finishing the work in flight"]
        );
        assert_eq!(readiness(&health(Ok(())), false), Ok(()));
        let problems = vec!["reviews: not running".to_owned()];
        assert_eq!(
            readiness(&health(Err(problems.clone())), false),
            Err(problems)
        );
    }

    #[test]
    fn a_bad_or_busy_address_is_a_configuration_error_naming_the_variable() {
        let error = start_at("nowhere", Registry::default(), health(Ok(()))).expect_err("bad");
        assert!(error.is_config());
        assert!(
            error
                .to_string()
                .starts_with("SLUICE_HTTP_ADDR=\"nowhere\": not a socket address"),
            "{error}"
        );

        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let raw = taken.local_addr().expect("its address").to_string();
        let error = start_at(&raw, Registry::default(), health(Ok(()))).expect_err("in use");
        assert!(error.is_config());
        assert!(
            error
                .to_string()
                .starts_with(&format!("SLUICE_HTTP_ADDR={raw}: cannot listen there: ")),
            "{error}"
        );
    }
}
