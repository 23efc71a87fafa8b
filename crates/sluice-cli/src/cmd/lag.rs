//! `sluice lag`: per group, topic and partition — committed, end, lag, and whether the group
//! has members; and PostgreSQL's offset beside Kafka's committed one (PostgreSQL's is the one
//! the pipeline starts from; the two are flagged when more than a batch apart).
//!
//! Two lags, for two questions. `lag` is Kafka's: the end less the group's committed offset.
//! `stored_lag` is what sluice has not stored yet: the end less PostgreSQL's offset, which
//! each batch's own transaction moves (docs/ARCHITECTURE.md#offsets). Kafka's commit follows
//! that transaction, so on a topic that keeps receiving records Kafka's lag trails by the
//! batch in flight and may never read 0; "is everything stored?" is asked of `stored_lag`.

use clap::Args;
use serde::Serialize;
use sluice_core::topics::Topics;
use sluice_kafka::Admin;
use sluice_process::Failure;
use sluice_storage::StorageSettings;
use std::time::Duration;

/// Options of `sluice lag`.
#[derive(Debug, Args)]
pub struct LagArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The mapping file (or folder) of declared sinks; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
}

/// Lag of one partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionLag {
    /// Partition.
    pub partition: i32,
    /// The group's committed offset (`None`: nothing committed yet).
    pub committed: Option<i64>,
    /// The end (high watermark) offset.
    pub end: i64,
    /// Records not yet committed by the group (from the low watermark when nothing is
    /// committed, as a new group with `earliest` would read them).
    pub lag: i64,
    /// PostgreSQL's next offset for the group (`None`: none stored, or not read).
    pub postgres: Option<i64>,
    /// Whether Kafka's committed offset and PostgreSQL's are more than a batch apart.
    pub apart: bool,
    /// Records not yet stored in PostgreSQL: the end less PostgreSQL's offset (Kafka's lag
    /// when PostgreSQL holds no offset, or was not read); never negative.
    pub stored_lag: i64,
}

/// Lag of one pipeline's group.
#[derive(Debug, Clone, Serialize)]
pub struct GroupLag {
    /// Pipeline name.
    pub pipeline: String,
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Active members of the group.
    pub members: usize,
    /// Sum over partitions.
    pub total_lag: i64,
    /// Sum of the partitions' `stored_lag`.
    pub total_stored_lag: i64,
    /// Per partition.
    pub partitions: Vec<PartitionLag>,
}

/// Lag of every configured pipeline's group.
pub fn collect(settings: &StorageSettings, admin: &Admin) -> Result<Vec<GroupLag>, Failure> {
    let names: Vec<(String, Topics, String)> = settings
        .pipelines
        .iter()
        .map(|p| {
            (
                p.kind.name().to_owned(),
                Topics::one(p.topic.clone()),
                p.group.clone(),
            )
        })
        .collect();
    collect_named(&names, admin)
}

/// Lag of each (pipeline, topics, group): one entry per topic (a pattern's topics as the
/// cluster has them now).
pub fn collect_named(
    pipelines: &[(String, Topics, String)],
    admin: &Admin,
) -> Result<Vec<GroupLag>, Failure> {
    let mut groups = Vec::new();
    for (name, topics, group) in pipelines {
        for topic in admin.topics_of(topics)? {
            let offsets = admin.group_offsets(group, &topic).map_err(|error| {
                anyhow::anyhow!("pipeline {name}, topic {topic}, group {group}: {error}")
            })?;
            let partitions: Vec<PartitionLag> = offsets
                .iter()
                .map(|p| PartitionLag {
                    partition: p.partition,
                    committed: p.committed,
                    end: p.high,
                    lag: p.lag(),
                    postgres: None,
                    apart: false,
                    stored_lag: p.lag(),
                })
                .collect();
            groups.push(GroupLag {
                pipeline: name.clone(),
                group: group.clone(),
                topic,
                members: admin.group_members(group)?,
                total_lag: partitions.iter().map(|p| p.lag).sum(),
                total_stored_lag: partitions.iter().map(|p| p.lag).sum(),
                partitions,
            });
        }
    }
    Ok(groups)
}

/// PostgreSQL's offsets of `groups`: (group, topic, partition, next offset). Read before
/// Kafka's end offsets (which only grow), so that an offset past the end means the topic was
/// made again, never a batch stored between the two reads.
pub async fn postgres_offsets(
    groups: &[String],
    database_url: &str,
) -> Result<Vec<(String, String, i32, i64)>, String> {
    let read = async {
        let mut conn = sluice_postgres::connect(database_url, "lag").await?;
        let mut all: Vec<(String, String, i32, i64)> = Vec::new();
        for group in groups.iter().map(String::as_str) {
            if all.iter().any(|(g, ..)| g == group) {
                continue;
            }
            for (topic, partition, next) in
                sluice_postgres::offsets::of_group(&mut conn, group).await?
            {
                all.push((group.to_owned(), topic, partition, next));
            }
        }
        Ok::<_, sqlx::Error>(all)
    };
    read.await.map_err(|e| e.to_string())
}

/// The groups of (pipeline, topics, group) entries, each once.
fn group_names(named: &[(String, Topics, String)]) -> Vec<String> {
    let mut groups: Vec<String> = named.iter().map(|(_, _, group)| group.clone()).collect();
    groups.dedup();
    groups
}

/// Fills in PostgreSQL's offset of each partition (`stored`, from [`postgres_offsets`]) and
/// the stored lag it gives, and flags those more than `batch` records from Kafka's committed
/// offset.
pub fn with_postgres(groups: &mut [GroupLag], stored: &[(String, String, i32, i64)], batch: i64) {
    for g in groups.iter_mut() {
        for p in &mut g.partitions {
            p.postgres = stored
                .iter()
                .find(|(group, topic, partition, _)| {
                    *group == g.group && *topic == g.topic && *partition == p.partition
                })
                .map(|s| s.3);
            p.apart = match (p.committed, p.postgres) {
                (Some(kafka), Some(postgres)) => (kafka - postgres).abs() > batch,
                (None, Some(postgres)) => postgres > batch,
                _ => false,
            };
            // An offset past the end: the topic was made again since (an end never moves
            // back), and the pipeline reads it from its start: none of it is stored.
            p.stored_lag = p.postgres.map_or(p.lag, |postgres| {
                if postgres > p.end {
                    p.end
                } else {
                    p.end - postgres
                }
            });
        }
        g.total_stored_lag = g.partitions.iter().map(|p| p.stored_lag).sum();
    }
}

/// Lag of every configured pipeline's group, with PostgreSQL's offsets and the stored lag
/// they give: what a caller that waits for "everything stored" reads.
pub async fn collect_stored(
    settings: &StorageSettings,
    admin: &Admin,
) -> Result<Vec<GroupLag>, Failure> {
    let batch = settings
        .pipelines
        .iter()
        .map(|p| p.batch_size)
        .max()
        .unwrap_or(1);
    let names: Vec<String> = settings.pipelines.iter().map(|p| p.group.clone()).collect();
    let stored = postgres_offsets(&names, &settings.database_url)
        .await
        .map_err(|e| anyhow::anyhow!("PostgreSQL's offsets: {e}"))?;
    let mut groups = collect(settings, admin)?;
    with_postgres(&mut groups, &stored, batch as i64);
    Ok(groups)
}

/// Every selected pipeline's groups with PostgreSQL's offsets beside Kafka's (`sluice
/// verify`'s lag step): of a mapping file's sinks as of the seed pipelines.
pub async fn collect_stored_of(
    pipelines: &super::pipelines::Pipelines,
    admin: &Admin,
) -> Result<Vec<GroupLag>, Failure> {
    let named = pipelines.names()?;
    let stored = postgres_offsets(&group_names(&named), &pipelines.settings.database_url)
        .await
        .map_err(|e| anyhow::anyhow!("PostgreSQL's offsets: {e}"))?;
    let mut groups = collect_named(&named, admin)?;
    with_postgres(&mut groups, &stored, pipelines.largest_batch() as i64);
    Ok(groups)
}

/// Entry point.
pub fn run(args: &LagArgs) -> Result<(), Failure> {
    let pipelines = super::pipelines::Pipelines::load(args.sinks.as_deref())?;
    let admin = Admin::new(&pipelines.settings.kafka, Duration::from_secs(15))?;
    let named = pipelines.names()?;
    let database_url = &pipelines.settings.database_url;
    let stored =
        sluice_process::runtime()?.block_on(postgres_offsets(&group_names(&named), database_url));
    let mut groups = collect_named(&named, &admin)?;
    // Without PostgreSQL's offsets the stored lag is not known: Kafka's is printed in its
    // place, and the command fails, so that a script never reads it as the stored lag.
    let unread = match stored {
        Ok(stored) => {
            with_postgres(&mut groups, &stored, pipelines.largest_batch() as i64);
            None
        }
        Err(error) => Some(anyhow::anyhow!(
            "PostgreSQL's offsets could not be read ({error}): the stored lag is not known, and \
             Kafka's lag is shown in its place"
        )),
    };
    let unknown = |unread: Option<anyhow::Error>| unread.map_or(Ok(()), |e| Err(e.into()));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&groups)?);
        return unknown(unread);
    }
    println!(
        "{:<40} {:<24} {:>9} {:>12} {:>12} {:>12} {:>10} {:>10}  members",
        "group", "topic", "partition", "committed", "postgres", "end", "lag", "stored lag"
    );
    let shown = |o: Option<i64>| o.map_or_else(|| "-".to_owned(), |c| c.to_string());
    let mut apart = 0;
    for g in &groups {
        for p in &g.partitions {
            apart += usize::from(p.apart);
            println!(
                "{:<40} {:<24} {:>9} {:>12} {:>12} {:>12} {:>10} {:>10}  {}{}",
                g.group,
                g.topic,
                p.partition,
                shown(p.committed),
                shown(p.postgres),
                p.end,
                p.lag,
                p.stored_lag,
                g.members,
                if p.apart { "  ! apart" } else { "" }
            );
        }
    }
    if apart > 0 {
        println!(
            "{apart} partition(s) where Kafka's committed offset and PostgreSQL's are more than a \
             batch apart: the pipeline starts from PostgreSQL's (see docs/ARCHITECTURE.md#offsets)"
        );
    }
    unknown(unread)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(partition: i32, committed: Option<i64>, end: i64) -> PartitionLag {
        let lag = end - committed.unwrap_or(0);
        PartitionLag {
            partition,
            committed,
            end,
            lag,
            postgres: None,
            apart: false,
            stored_lag: lag,
        }
    }

    #[test]
    fn the_stored_lag_is_read_from_postgresql_and_kafkas_lag_stays_beside_it() {
        let mut groups = vec![GroupLag {
            pipeline: "metrics".into(),
            group: "g".into(),
            topic: "t".into(),
            members: 1,
            total_lag: 5,
            total_stored_lag: 5,
            partitions: vec![
                // Kafka's commit trails PostgreSQL's by the batch in flight.
                partition(0, Some(98), 100),
                // PostgreSQL's offset read, Kafka's commit not yet made.
                partition(1, None, 3),
                // No offset in PostgreSQL: Kafka's lag stands.
                partition(2, Some(7), 7),
            ],
        }];
        let stored = [
            ("g".to_owned(), "t".to_owned(), 0, 100),
            ("g".to_owned(), "t".to_owned(), 1, 3),
            ("other".to_owned(), "t".to_owned(), 2, 0),
        ];
        with_postgres(&mut groups, &stored, 500);
        let lags: Vec<(i64, i64)> = groups[0]
            .partitions
            .iter()
            .map(|p| (p.lag, p.stored_lag))
            .collect();
        assert_eq!(lags, [(2, 0), (3, 0), (0, 0)]);
        assert_eq!(groups[0].total_stored_lag, 0);
        assert_eq!(groups[0].total_lag, 5, "Kafka's lag is reported as it is");
        // PostgreSQL behind Kafka (a lost commit): the stored lag says what is not stored.
        with_postgres(&mut groups, &[("g".to_owned(), "t".to_owned(), 0, 90)], 500);
        assert_eq!(groups[0].partitions[0].stored_lag, 10);
        assert_eq!(
            groups[0].total_stored_lag, 13,
            "partition 1 falls back to Kafka's lag"
        );
        // PostgreSQL past the end: the topic was made again, and none of it is stored.
        with_postgres(
            &mut groups,
            &[("g".to_owned(), "t".to_owned(), 0, 150)],
            500,
        );
        assert_eq!(groups[0].partitions[0].stored_lag, 100);
    }
}
