//! The metrics-cost phase's scraper: `GET /metrics` every second, as Prometheus would, for
//! as long as the drain runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// A running scraper.
pub struct Scraper {
    stop: CancellationToken,
    scrapes: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Scraper {
    /// Scrapes `127.0.0.1:port` every `every` (connection refused while the process starts
    /// is not counted).
    pub fn start(port: u16, every: Duration) -> Scraper {
        let stop = CancellationToken::new();
        let scrapes = Arc::new(AtomicU64::new(0));
        let task = {
            let (stop, scrapes) = (stop.clone(), Arc::clone(&scrapes));
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        _ = tick.tick() => {}
                    }
                    if scrape_once(port).await.is_some_and(|bytes| bytes > 0) {
                        scrapes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        Scraper {
            stop,
            scrapes,
            task,
        }
    }

    /// Stops scraping; returns how many scrapes got a body.
    pub async fn finish(self) -> u64 {
        self.stop.cancel();
        let _ = self.task.await;
        self.scrapes.load(Ordering::Relaxed)
    }
}

/// One `GET /metrics`; the body's length, or `None` if it failed.
async fn scrape_once(port: u16) -> Option<usize> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then_some(body.len())
        .or_else(|| head.starts_with("HTTP/1.1 200").then_some(body.len()))
}
