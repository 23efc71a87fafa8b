//! `sluice outbox status|release|retry-failed|purge`: the operator's view of the outbox
//! (docs/ARCHITECTURE.md#outbox).

use clap::{Args, Subcommand};
use serde_json::json;
use sluice_dispatch::store::retention::purge_expired;
use sluice_outbox::ops::{retry_failed, statuses_of, summary};
use sluice_outbox::release;
use sluice_process::Failure;
use sqlx::Connection;
use uuid::Uuid;

/// Outbox actions.
#[derive(Debug, Subcommand)]
pub enum OutboxAction {
    /// Counts per status, the oldest due PENDING event's age, stuck DISPATCHING events.
    Status(StatusArgs),
    /// Release PREQUEUED events to PENDING; prints how many moved.
    Release {
        /// Event ids (repeat or comma-separate).
        #[arg(required = true, value_delimiter = ',')]
        ids: Vec<Uuid>,
    },
    /// Re-open FAILURE events (FAILURE → PENDING, attempts reset); prints how many moved.
    RetryFailed {
        /// Only these event ids (default: every FAILURE event).
        #[arg(long = "id", value_delimiter = ',')]
        ids: Vec<Uuid>,
    },
    /// Delete SUCCESS, untracked PUBLISHED and CDC rows last changed more than
    /// OUTBOX_RETENTION_DAYS ago, as `sluice dispatch` does every so often (for a deployment
    /// that relays by CDC and runs no dispatcher); prints how many.
    Purge,
}

/// Options of `outbox status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Entry point.
pub fn run(action: OutboxAction) -> Result<(), Failure> {
    let settings = super::dispatch::outbox_settings()?;
    let runtime = sluice_process::runtime()?;
    runtime.block_on(async {
        let mut conn = sluice_postgres::connect(&settings.database_url, "outbox").await?;
        super::dispatch::require_outbox_table(&mut conn).await?;
        match action {
            OutboxAction::Status(args) => {
                let s = summary(&mut conn, settings.stale_dispatch).await?;
                if args.json {
                    let counts: serde_json::Map<String, serde_json::Value> = s
                        .counts
                        .iter()
                        .map(|(status, n)| (status.as_str().to_owned(), json!(n)))
                        .collect();
                    let value = json!({
                        "counts": counts,
                        "oldest_pending_seconds": s.oldest_pending_seconds,
                        "stuck_dispatching": s.stuck_dispatching,
                        "stale_dispatch_seconds": settings.stale_dispatch.as_secs(),
                    });
                    println!("{}", serde_json::to_string_pretty(&value)?);
                } else {
                    for (status, n) in &s.counts {
                        println!("{:<18} {n}", status.as_str());
                    }
                    match s.oldest_pending_seconds {
                        Some(age) => println!("oldest pending     {age:.1} s"),
                        None => println!("oldest pending     -"),
                    }
                    println!(
                        "stuck dispatching  {} (claimed more than {} s ago)",
                        s.stuck_dispatching,
                        settings.stale_dispatch.as_secs()
                    );
                }
            }
            OutboxAction::Release { ids } => {
                let before = statuses_of(&mut conn, &ids).await?;
                let moved = release(&mut conn, &ids).await?;
                println!("released {moved} of {} events", ids.len());
                name_unmovable(&ids, &before, "PREQUEUED", "released");
            }
            OutboxAction::RetryFailed { ids } => {
                let before = statuses_of(&mut conn, &ids).await?;
                let chosen = (!ids.is_empty()).then_some(ids.as_slice());
                let moved = retry_failed(&mut conn, chosen).await?;
                if ids.is_empty() {
                    println!("re-opened {moved} FAILURE events");
                } else {
                    println!("re-opened {moved} of {} FAILURE events", ids.len());
                    name_unmovable(&ids, &before, "FAILURE", "re-opened");
                }
            }
            OutboxAction::Purge => {
                let deleted = purge_expired(&mut conn, settings.retention).await?;
                println!(
                    "purged {deleted} rows older than {} days",
                    settings.retention.as_secs() / 86_400
                );
            }
        }
        conn.close().await?;
        Ok(())
    })
}

/// Names, on stderr, each of `ids` an operator's move could not take (`before`: their
/// statuses before it): its status when not `from`, or that no such event exists — a
/// mistyped id would otherwise pass unnoticed in "moved 0 of 1".
fn name_unmovable(
    ids: &[Uuid],
    before: &std::collections::BTreeMap<Uuid, String>,
    from: &str,
    moved: &str,
) {
    for id in ids {
        match before.get(id).map(String::as_str) {
            Some(status) if status == from => {}
            Some(status) => eprintln!("not {moved}: event {id} is {status}, not {from}"),
            None => eprintln!("not {moved}: no event {id}"),
        }
    }
}
