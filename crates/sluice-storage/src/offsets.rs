//! Where a pipeline's partitions start: PostgreSQL's offsets (docs/ARCHITECTURE.md#offsets).
//!
//! Invariants: before its consumer exists, a pipeline's group is *adopted* — if PostgreSQL
//! has no offsets of the group yet, Kafka's committed offsets are copied there in one durable
//! transaction, so an existing deployment resumes where it was. From then on every partition
//! assigned starts at PostgreSQL's offset, and a partition without one has never been stored
//! and starts where `STORAGE_AUTO_OFFSET_RESET` says — whatever Kafka's committed offset is
//! (it may be ahead of PostgreSQL's after a crash of PostgreSQL under
//! `synchronous_commit = off`, even for a partition whose very first batch was lost).
//!
//! A stored offset beyond the partition's end cannot be a position in it: the topic was
//! deleted and created again (or its records removed). That offset is discarded (its row
//! deleted, with a warning) and the partition starts at the reset position. A re-created
//! topic that already holds more records than the old one's offset cannot be told apart
//! here: re-creating a topic is followed by `sluice replay <pipeline> --to earliest`.

use sluice_core::settings::OffsetReset;
use sluice_core::topics::Topics;
use sluice_kafka::Admin;
use sluice_kafka::rebalance::{StartAt, StartingOffsets};
use sqlx::PgConnection;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How many times reading the starting offsets is tried on an assignment, a second apart
/// and doubling (about 15 s in all), before the partitions are assigned without them.
const ATTEMPTS: u32 = 4;

/// Copies Kafka's committed offsets of `group` into PostgreSQL unless the group's offsets
/// live there already. Returns how many partitions were copied (`None`: adopted before).
pub async fn adopt_group(
    conn: &mut PgConnection,
    admin: &Admin,
    group: &str,
    topics: &Topics,
) -> Result<Option<usize>, AdoptError> {
    if sluice_postgres::offsets::adopted(conn, group).await? {
        return Ok(None);
    }
    let mut counted = Vec::new();
    for topic in admin.topics_of(topics)? {
        if let Some(count) = admin.partition_count(&topic)? {
            counted.push((topic, count));
        }
    }
    // One request for every topic of a pattern (a client per topic cost seconds each).
    let kafka: Vec<(String, i32, i64)> = admin
        .committed_offsets_of(group, &counted)?
        .into_iter()
        .filter_map(|(topic, partition, committed)| committed.map(|next| (topic, partition, next)))
        .collect();
    let copied = kafka.len();
    if sluice_postgres::offsets::adopt(conn, group, &kafka).await? {
        tracing::info!(%group, partitions = copied, offsets = ?kafka,
            "the group's offsets now live in PostgreSQL (Kafka's committed offsets copied)");
        Ok(Some(copied))
    } else {
        Ok(None)
    }
}

/// Why a group could not be adopted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// Kafka's committed offsets could not be read.
    #[error("cannot read the group's committed offsets in Kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// PostgreSQL could not be read or written.
    #[error("cannot store the group's offsets in PostgreSQL: {0}")]
    Database(#[from] sqlx::Error),
}

/// The starting offsets of a pipeline's partitions, read from PostgreSQL on every assignment
/// (on the reader thread, which runs no async runtime: the reads run on a runtime of their
/// own, with a connection kept between assignments).
pub struct PostgresStarts {
    database_url: String,
    group: String,
    reset: OffsetReset,
    client: Mutex<Option<(tokio::runtime::Runtime, Option<PgConnection>)>>,
}

impl std::fmt::Debug for PostgresStarts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStarts")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl PostgresStarts {
    /// The starting offsets of `group`'s partitions; `reset` for a partition never stored.
    pub fn new(database_url: &str, group: &str, reset: OffsetReset) -> Self {
        Self {
            database_url: database_url.to_owned(),
            group: group.to_owned(),
            reset,
            client: Mutex::new(None),
        }
    }

    /// The stored offsets of `partitions`, less those beyond their partition's end (deleted).
    async fn read(
        conn: &mut Option<PgConnection>,
        url: &str,
        group: &str,
        partitions: &[(String, i32, Option<i64>)],
    ) -> Result<HashMap<(String, i32), i64>, sqlx::Error> {
        if conn.is_none() {
            *conn = Some(sluice_postgres::connect(url, "offsets").await?);
        }
        let Some(open) = conn.as_mut() else {
            return Err(sqlx::Error::Protocol("no connection".into()));
        };
        let keys: Vec<(String, i32)> = partitions.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        let read = async {
            let mut stored = sluice_postgres::offsets::stored(open, group, &keys).await?;
            for (topic, partition, end) in partitions {
                let key = (topic.clone(), *partition);
                let (Some(end), Some(&at)) = (end, stored.get(&key)) else {
                    continue;
                };
                if at > *end {
                    tracing::warn!(%group, %topic, partition, stored = at, end,
                        "the stored offset is past the partition's end (the topic was created \
                         again, or its records removed): discarded, the partition starts at \
                         the reset position");
                    sluice_postgres::offsets::forget(open, group, topic, *partition, at).await?;
                    stored.remove(&key);
                }
            }
            Ok::<_, sqlx::Error>(stored)
        };
        let stored = read.await;
        if stored.is_err() {
            *conn = None;
        }
        stored
    }
}

impl StartingOffsets for PostgresStarts {
    fn starting_offsets(
        &self,
        partitions: &[(String, i32, Option<i64>)],
    ) -> Result<HashMap<(String, i32), StartAt>, String> {
        let mut client = self.client.lock().map_err(|_| "poisoned".to_owned())?;
        if client.is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            *client = Some((runtime, None));
        }
        let Some((runtime, conn)) = client.as_mut() else {
            return Err("no runtime".into());
        };
        let mut delay = Duration::from_secs(1);
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let read = runtime.block_on(Self::read(
                conn,
                &self.database_url,
                &self.group,
                partitions,
            ));
            match read {
                Ok(stored) => {
                    let never = match self.reset {
                        OffsetReset::Earliest => StartAt::Beginning,
                        OffsetReset::Latest => StartAt::End,
                    };
                    return Ok(partitions
                        .iter()
                        .map(|(topic, partition, _)| {
                            let key = (topic.clone(), *partition);
                            let at = stored.get(&key).map_or(never, |o| StartAt::Offset(*o));
                            (key, at)
                        })
                        .collect());
                }
                Err(error) => {
                    last = error.to_string();
                    tracing::warn!(group = %self.group, attempt, %error,
                        "cannot read the partitions' offsets in PostgreSQL; trying again");
                    if attempt < ATTEMPTS {
                        std::thread::sleep(delay);
                        delay *= 2;
                    }
                }
            }
        }
        Err(last)
    }
}
