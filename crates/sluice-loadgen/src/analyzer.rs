//! The network-analyzer simulator: one network-metrics message per analysed capture.

use crate::messages::NetworkMetrics;
use crate::{Expect, Generated};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_core::PipelineKind;

/// Knobs of the analyzer.
#[derive(Debug, Clone)]
pub struct AnalyzerConfig {
    /// Package names to analyse (round robin).
    pub apps: Vec<String>,
    /// RNG seed.
    pub seed: u64,
}

/// The `n`-th analysis, captured at `captured_at` (the demo uses "now" to measure
/// produce → commit latency from the stored row).
pub fn analysis(config: &AnalyzerConfig, n: u64, captured_at: DateTime<Utc>) -> Generated {
    // One RNG per (seed, n): distinct pairs never share a stream, so ids never repeat.
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&config.seed.to_le_bytes());
    seed[8..16].copy_from_slice(&n.to_le_bytes());
    let mut rng = StdRng::from_seed(seed);
    let id = uuid::Builder::from_random_bytes(rng.random()).into_uuid();
    let package = config
        .apps
        .get(n as usize % config.apps.len().max(1))
        .cloned();
    let domains: Vec<String> = (0..rng.random_range(0..40))
        .map(|i| format!("cdn{i}.tracker{}.example.com", rng.random_range(0..100)))
        .collect();
    let sent: i64 = rng.random_range(1_000..50_000_000);
    let received: i64 = rng.random_range(1_000..500_000_000);
    let message = NetworkMetrics {
        analysis_id: id,
        package_name: package.unwrap_or_else(|| "com.sluice.demo.app0".into()),
        captured_at,
        duration_seconds: f64::from(rng.random_range(5_u32..600)) + 0.25,
        packet_count: rng.random_range(100..1_000_000),
        total_bytes: sent + received,
        bytes_sent: Some(sent),
        bytes_received: Some(received),
        dns_queries: Some(rng.random_range(0..500)),
        tls_handshakes: Some(rng.random_range(0..100)),
        plaintext_http_requests: Some(rng.random_range(0..10)),
        domains: Some(domains),
    };
    Generated {
        pipeline: PipelineKind::NetworkMetrics,
        key: id.to_string().into_bytes(),
        payload: Some(serde_json::to_vec(&message).unwrap_or_default()),
        expect: Expect::Row,
    }
}
