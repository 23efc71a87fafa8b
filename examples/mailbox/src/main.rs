//! `sluice-mailbox`: the mailbox example service (docs/ARCHITECTURE.md#mailbox), a business
//! application built on the outbox library, kept out of the production `sluice` binary.
//!
//! `sluice-mailbox consume` runs the example's consumer until SIGTERM/SIGINT. Environment: `DATABASE_URL` (required), `KAFKA_BOOTSTRAP_SERVERS` (default
//! `127.0.0.1:9092`), `MAILBOX_TOPIC` (required), `MAILBOX_GROUP` (default
//! `mailbox-example`), `MAILBOX_RETRY_TIERS` (default `30s,2m,5m`: the retry tiers; their
//! topics and the dead-letter topic are created when missing, and one consumer per tier runs
//! beside the main one). A missing, empty or invalid variable exits 2. The example's tables
//! are created first (idempotent); a stop signal ends the run after the record in flight
//! (its transaction and offset commit), and the process exits 0. `SLUICE_HTTP_ADDR` serves
//! `/metrics`, `/health/live` and `/health/ready` as for `sluice dispatch`.
//!
//! Exit codes: 0 success; 1 runtime failure; 2 bad configuration or usage.

use anyhow::anyhow;
use clap::{Parser, Subcommand};
use sluice_core::settings::EnvReader;
use sluice_mailbox::metrics::MailboxMetrics;
use sluice_mailbox::{self as mailbox, ConsumerConfig};
use sluice_process::endpoint::{self, Health};
use sluice_process::{Failure, env_lookup};
use sqlx::Connection;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(
    name = "sluice-mailbox",
    version,
    about = "The mailbox example service on sluice's outbox"
)]
struct Cli {
    #[command(subcommand)]
    action: MailboxAction,
}

/// `sluice-mailbox …`.
#[derive(Debug, Subcommand)]
enum MailboxAction {
    /// Run the mailbox consumer and its retry tier consumers until SIGTERM/SIGINT (env:
    /// DATABASE_URL, KAFKA_BOOTSTRAP_SERVERS, MAILBOX_TOPIC, MAILBOX_GROUP,
    /// MAILBOX_RETRY_TIERS, SLUICE_HTTP_ADDR).
    Consume,
    /// Create a user and pin it to a partition (idempotent); prints the partition.
    CreateUser {
        /// The canonical mailbox user id (never an e-mail or a display name).
        user_id: String,
        /// Users per partition before the next partition opens.
        #[arg(long, default_value_t = 100)]
        max_users_per_partition: i32,
    },
    /// Send a command to a user through the outbox (key = user id, the user's partition).
    Send {
        /// The canonical mailbox user id.
        user_id: String,
        /// The command's sequence number for this user.
        seq: i64,
        /// The command as JSON, e.g. '{"op":"archive"}' ('{"op":"reject"}' is rejected;
        /// demo ops of the retry topics: '{"op":"flaky","fail_times":N}' fails on its first N
        /// deliveries, '{"op":"fail"}' always fails and ends in the dead-letter topic).
        command: String,
    },
}

/// The consumer configuration from the process environment, read by the same validated
/// helpers as every other command (exit 2 naming the variable when incomplete).
fn consumer_config() -> Result<ConsumerConfig, Failure> {
    let env = EnvReader::new(&env_lookup);
    let database_url = env.database_url().map_err(Failure::config)?;
    let kafka = sluice_process::kafka_settings()?;
    let topic = env
        .required_topic("MAILBOX_TOPIC", "the mailbox topic")
        .map_err(Failure::config)?;
    let mut config = ConsumerConfig::new(kafka, database_url, topic);
    config.group = env
        .topic("MAILBOX_GROUP", mailbox::GROUP)
        .map_err(Failure::config)?;
    Ok(config)
}

fn main() -> ExitCode {
    let cli: Cli = match sluice_process::start("sluice-mailbox") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    sluice_process::finish("sluice-mailbox", run(cli.action))
}

fn run(action: MailboxAction) -> Result<(), Failure> {
    match action {
        MailboxAction::Consume => consume(),
        MailboxAction::CreateUser {
            user_id,
            max_users_per_partition,
        } => {
            let config = consumer_config()?;
            sluice_process::runtime()?.block_on(async {
                let mut conn = sluice_postgres::connect(&config.database_url, "mailbox").await?;
                mailbox::setup(&mut conn).await?;
                let admin =
                    sluice_kafka::Admin::new(&config.kafka, std::time::Duration::from_secs(30))?;
                let partition = mailbox::create_user(
                    &mut conn,
                    &admin,
                    &config.topic,
                    &user_id,
                    max_users_per_partition,
                )
                .await?;
                println!("{user_id}: partition {partition}");
                Ok(())
            })
        }
        MailboxAction::Send {
            user_id,
            seq,
            command,
        } => {
            let config = consumer_config()?;
            let command: serde_json::Value = serde_json::from_str(&command)
                .map_err(|e| Failure::config(anyhow!("the command is not JSON: {e}")))?;
            sluice_process::runtime()?.block_on(async {
                let mut conn = sluice_postgres::connect(&config.database_url, "mailbox").await?;
                let mut tx = conn.begin().await?;
                let id =
                    mailbox::send_command(&mut tx, &config.topic, &user_id, seq, command).await?;
                tx.commit().await?;
                println!("enqueued event {id}");
                Ok(())
            })
        }
    }
}

fn consume() -> Result<(), Failure> {
    let mut config = consumer_config()?;
    let tiers =
        EnvReader::new(&env_lookup).string("MAILBOX_RETRY_TIERS", sluice_retry::DEFAULT_TIERS);
    config.retry = Some(
        sluice_retry::Tiers::parse(&tiers)
            .map_err(|e| Failure::config(anyhow!("MAILBOX_RETRY_TIERS: {e}")))?,
    );
    let mut registry = prometheus_client::registry::Registry::default();
    sluice_process::register_build_info(&mut registry);
    let metrics = MailboxMetrics::register(&mut registry);
    let _endpoint = endpoint::start(
        registry,
        Health::of(
            &metrics,
            MailboxMetrics::readiness,
            MailboxMetrics::liveness,
        ),
    )?;
    let (runtime, mut signals) = sluice_process::service_runtime()?;
    runtime.block_on(async {
        let mut conn = sluice_postgres::connect(&config.database_url, "mailbox").await?;
        mailbox::setup(&mut conn).await?;
        conn.close().await?;
        let stop = CancellationToken::new();
        let task = {
            let (config, stop) = (config.clone(), stop.child_token());
            tokio::spawn(
                async move { mailbox::run_consumer_observed(&config, &metrics, stop).await },
            )
        };
        sluice_process::run_until_signal("mailbox consumer", &mut signals, stop, task)
            .await
            .map(|_totals| ())
    })
}
