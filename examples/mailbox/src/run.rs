//! The example's consumer run: the main consumer alone, or with its retry tiers.

use crate::MailboxError;
use crate::consumer::{ConsumerConfig, ConsumerTotals, consume};
use crate::metrics::MailboxMetrics;
use tokio_util::sync::CancellationToken;

/// Consumes the mailbox topic until `stop` is cancelled: each record is handled by
/// [`handle_command`](crate::consumer::handle_command) in its own transaction, then its offset is committed. A database or
/// broker failure ends the run with the error (the uncommitted record is read again by the
/// next run, and processed at most once).
pub async fn run_consumer(
    config: &ConsumerConfig,
    stop: CancellationToken,
) -> Result<ConsumerTotals, MailboxError> {
    run_consumer_observed(config, &MailboxMetrics::default(), stop).await
}

/// [`run_consumer`], counting into `metrics` and keeping its health current.
pub async fn run_consumer_observed(
    config: &ConsumerConfig,
    metrics: &MailboxMetrics,
    stop: CancellationToken,
) -> Result<ConsumerTotals, MailboxError> {
    metrics.set_running(true);
    let result = match &config.retry {
        None => consume(config, metrics, stop).await,
        Some(tiers) => crate::retry::with_tiers(config, tiers, metrics, stop).await,
    };
    metrics.set_running(false);
    result
}
