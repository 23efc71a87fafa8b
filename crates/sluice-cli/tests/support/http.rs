//! The HTTP endpoint as a scraper sees it: a plain HTTP/1.0 client and an independent
//! Prometheus text-format parser (`prometheus-parse`), never string matching.

use prometheus_parse::{Sample, Scrape, Value as Metric};
use std::io::{Read, Write};
use std::time::Duration;

/// `GET path` over HTTP/1.0: (status, body).
pub fn get(port: u16, path: &str, accept: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: localhost\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

/// The status of `GET path`, or `None` while nothing listens on the port yet.
pub fn status_of(port: u16, path: &str) -> Option<u16> {
    std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    Some(get(port, path, "text/plain").0)
}

/// The metrics in Prometheus text format, parsed.
pub fn scrape(port: u16) -> Vec<Sample> {
    let (status, body) = get(port, "/metrics", "text/plain");
    assert_eq!(status, 200, "{body}");
    Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .unwrap()
        .samples
}

pub fn value(s: &Sample) -> f64 {
    match s.value {
        Metric::Counter(v) | Metric::Gauge(v) | Metric::Untyped(v) => v,
        _ => f64::NAN,
    }
}

/// The sum of `metric`'s samples whose labels include every `(name, value)` of `labels`.
pub fn sum(samples: &[Sample], metric: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(value)
        .sum()
}

/// A port nobody listens on (yet).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
