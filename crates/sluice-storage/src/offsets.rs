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
//! A stored offset that cannot be a position in the partition as it is now means the topic
//! was deleted and created again (or its records removed): that offset is discarded (its row
//! deleted, with a warning) and the partition starts at the reset position. Two signs:
//!
//! - the offset is beyond the partition's end;
//! - Kafka holds no committed offset of the group for the partition (deleting a topic drops
//!   its groups' offsets; sluice commits to Kafka after every batch) *and* a record below the
//!   stored offset was written after that offset was stored (its timestamp, by Kafka's
//!   ListOffsets by time, later than the row's `updated_at` plus [`CLOCK_SKEW`]): the records
//!   sluice stored were all written before it stored them. Either sign alone is not enough —
//!   a crash between the first batch's commit and Kafka's, or offsets Kafka expired after a
//!   week stopped, also leave Kafka without one; a producer's clock may run ahead.
//!
//! A topic created again and filled with records stamped before the offset was stored (a
//! mirror copying old timestamps) still cannot be told apart: `sluice replay <pipeline> --to
//! earliest --execute` after re-creating a topic that way.

use sluice_core::settings::OffsetReset;
use sluice_core::topics::Topics;
use sluice_kafka::Admin;
use sluice_kafka::rebalance::{Assigning, OffsetsForTimes, StartAt, StartingOffsets};
use sqlx::PgConnection;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How far a producer's clock may run ahead of PostgreSQL's before a record it wrote looks
/// written after an offset stored later.
pub const CLOCK_SKEW: Duration = Duration::from_secs(1);

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

    /// The stored offsets of `partitions`, less those of a topic created again since.
    async fn read(
        conn: &mut Option<PgConnection>,
        url: &str,
        group: &str,
        (partitions, times): (&[Assigning], &dyn OffsetsForTimes),
    ) -> Result<HashMap<(String, i32), i64>, sqlx::Error> {
        if conn.is_none() {
            *conn = Some(sluice_postgres::connect(url, "offsets").await?);
        }
        let Some(open) = conn.as_mut() else {
            return Err(sqlx::Error::Protocol("no connection".into()));
        };
        let keys: Vec<(String, i32)> = partitions
            .iter()
            .map(|p| (p.topic.clone(), p.partition))
            .collect();
        let read = async {
            let stored = sluice_postgres::offsets::stored_since(open, group, &keys).await?;
            let mut kept = HashMap::with_capacity(stored.len());
            for assigning in partitions {
                let key = (assigning.topic.clone(), assigning.partition);
                let Some(&(at, since)) = stored.get(&key) else {
                    continue;
                };
                match created_again(assigning, at, since, times) {
                    None => {
                        kept.insert(key, at);
                    }
                    Some(sign) => {
                        tracing::warn!(%group, topic = %assigning.topic,
                            partition = assigning.partition, stored = at, sign,
                            "the stored offset is no position in the partition as it is now \
                             (the topic was created again, or its records removed): \
                             discarded, the partition starts at the reset position");
                        sluice_postgres::offsets::forget(
                            open,
                            group,
                            &assigning.topic,
                            assigning.partition,
                            at,
                        )
                        .await?;
                    }
                }
            }
            Ok::<_, sqlx::Error>(kept)
        };
        let stored = read.await;
        if stored.is_err() {
            *conn = None;
        }
        stored
    }
}

/// Why offset `at`, stored at `since`, is no position in `assigning` as it is now; `None`
/// when it may be (see the module's documentation).
fn created_again(
    assigning: &Assigning,
    at: i64,
    since: chrono::DateTime<chrono::Utc>,
    times: &dyn OffsetsForTimes,
) -> Option<String> {
    if let Some(end) = assigning.end.filter(|end| at > *end) {
        return Some(format!("past the partition's end {end}"));
    }
    if assigning.kafka_committed != Some(false) || at == 0 {
        return None;
    }
    let skew = i64::try_from(CLOCK_SKEW.as_millis()).unwrap_or(i64::MAX);
    let after = since.timestamp_millis().saturating_add(skew);
    let first = times.first_at_or_after(&assigning.topic, assigning.partition, after)?;
    (first < at).then(|| {
        format!(
            "Kafka holds no committed offset of the group, and the record at {first} was \
             written after the offset was stored ({since})"
        )
    })
}

impl StartingOffsets for PostgresStarts {
    fn starting_offsets(
        &self,
        partitions: &[Assigning],
        times: &dyn OffsetsForTimes,
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
                (partitions, times),
            ));
            match read {
                Ok(stored) => {
                    let never = match self.reset {
                        OffsetReset::Earliest => StartAt::Beginning,
                        OffsetReset::Latest => StartAt::End,
                    };
                    return Ok(partitions
                        .iter()
                        .map(|p| {
                            let key = (p.topic.clone(), p.partition);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use chrono::{TimeZone, Utc};

    /// A partition whose first record at or after a time is `first` (`None`: none).
    struct Times(Option<i64>);

    impl OffsetsForTimes for Times {
        fn first_at_or_after(&self, _: &str, _: i32, _: i64) -> Option<i64> {
            self.0
        }
    }

    fn assigning(end: Option<i64>, kafka_committed: Option<bool>) -> Assigning {
        Assigning {
            topic: "t".into(),
            partition: 0,
            end,
            kafka_committed,
        }
    }

    #[test]
    fn an_offset_is_kept_unless_a_sign_says_the_topic_is_another() {
        let since = Utc.with_ymd_and_hms(2026, 12, 7, 8, 0, 0).unwrap();
        let again = |a: &Assigning, times: Option<i64>| created_again(a, 50, since, &Times(times));
        // Past the end: discarded whatever Kafka says.
        assert!(again(&assigning(Some(10), Some(true)), None).is_some());
        // Kafka holds the group's offset: kept, even with records written after.
        assert_eq!(again(&assigning(Some(900), Some(true)), Some(0)), None);
        // Kafka's offset not known: kept.
        assert_eq!(again(&assigning(Some(900), None), Some(0)), None);
        // Kafka holds none (offsets expired, or a crash before Kafka's commit) and every
        // record written after the offset was stored lies at or past it: kept.
        assert_eq!(again(&assigning(Some(900), Some(false)), Some(50)), None);
        assert_eq!(again(&assigning(Some(900), Some(false)), None), None);
        // Kafka holds none and a record below it was written after it was stored: another
        // topic under the same name.
        let sign = again(&assigning(Some(900), Some(false)), Some(3)).unwrap();
        assert!(sign.contains("the record at 3 was written after"), "{sign}");
        // Nothing stored past offset 0 is a position in any partition.
        assert_eq!(
            created_again(
                &assigning(Some(900), Some(false)),
                0,
                since,
                &Times(Some(0))
            ),
            None
        );
    }
}
