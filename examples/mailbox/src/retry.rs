//! The mailbox example's retry topics (sluice-retry): a record whose handler fails goes to
//! `<topic>.retry.<tier>` and after the last tier to `<topic>.dlt`, handled by one tier
//! consumer per tier beside the main consumer, all in one process.
//!
//! Every consumer handles a record through the same [`handle_message`] (keyed by the outbox
//! event id in the main group), so a record retried, redelivered or duplicated into a tier
//! (a crash between a forward and its source commit) is applied once. A database error is
//! infrastructure, not a handler failure: it ends the run with the record uncommitted, as
//! without retry topics. A dead-lettered record's outbox row stays PUBLISHED (not final):
//! `sluice dlt replay` re-publishes it to the main topic, where it is handled again.

use crate::MailboxError;
use crate::consumer::{ConsumerConfig, ConsumerTotals, MailboxHandler, consume};
use crate::metrics::MailboxMetrics;
use sluice_kafka::Admin;
use sluice_retry::{Forwarder, TierConfig, Tiers, dlt_topic, retry_topic, run_tier};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Creates the tier topics and the dead-letter topic when missing, with the main topic's
/// partition count (1 when the main topic does not exist yet).
pub async fn ensure_retry_topics(
    config: &ConsumerConfig,
    tiers: &Tiers,
) -> Result<(), MailboxError> {
    let admin = Admin::new(&config.kafka, Duration::from_secs(30))?;
    let partitions = admin.partition_count(&config.topic)?.unwrap_or(1).max(1);
    let mut topics: Vec<String> = tiers
        .as_slice()
        .iter()
        .map(|tier| retry_topic(&config.topic, tier))
        .collect();
    topics.push(dlt_topic(&config.topic));
    for topic in topics {
        let change = admin.ensure_topic(&topic, partitions).await?;
        tracing::info!(%topic, ?change, "mailbox retry topic ensured");
    }
    Ok(())
}

/// The main consumer and one consumer per tier until `stop` is cancelled or one of them
/// fails (then the others are stopped too and the first error is returned).
pub(super) async fn with_tiers(
    config: &ConsumerConfig,
    tiers: &Tiers,
    metrics: &MailboxMetrics,
    stop: CancellationToken,
) -> Result<ConsumerTotals, MailboxError> {
    ensure_retry_topics(config, tiers).await?;
    let all = stop.child_token();
    let mut tasks = tokio::task::JoinSet::new();
    {
        let (config, metrics, stop) = (config.clone(), metrics.clone(), all.clone());
        tasks.spawn(async move { consume(&config, &metrics, stop).await });
    }
    for tier in 0..tiers.len() {
        let (config, metrics, stop) = (config.clone(), metrics.clone(), all.clone());
        let tier_config = TierConfig {
            kafka: config.kafka.clone(),
            topic: config.topic.clone(),
            group: config.group.clone(),
            tiers: tiers.clone(),
            tier,
        };
        tasks.spawn(async move { run_one_tier(&config, &tier_config, metrics, stop).await });
    }
    let mut totals = ConsumerTotals::default();
    let mut failure: Option<MailboxError> = None;
    while let Some(joined) = tasks.join_next().await {
        let error = match joined {
            Ok(Ok(done)) => {
                totals.add(&done);
                continue;
            }
            Ok(Err(error)) => error,
            Err(join) => MailboxError::Task(join.to_string()),
        };
        tracing::warn!(%error, "a mailbox consumer failed; stopping the others");
        all.cancel();
        failure.get_or_insert(error);
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(totals),
    }
}

async fn run_one_tier(
    config: &ConsumerConfig,
    tier: &TierConfig,
    metrics: MailboxMetrics,
    stop: CancellationToken,
) -> Result<ConsumerTotals, MailboxError> {
    let conn = sluice_postgres::connect(&config.database_url, "mailbox").await?;
    let mut handler = MailboxHandler::new(conn, config.group.clone(), metrics);
    let forwarder = Forwarder::new(
        &config.kafka,
        &config.topic,
        tier.tiers.clone(),
        &format!("{}-retry", config.client_id),
    )?;
    let tier_totals = run_tier(tier, &forwarder, &mut handler, stop).await?;
    tracing::info!(tier = tier.tier, ?tier_totals, "mailbox retry tier stopped");
    handler.close().await
}
