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
//! A stored offset that cannot be a position in the partition as it is now belongs to a log
//! that is gone: the topic was deleted and created again (or its records removed). That offset
//! is replaced, durably and with a warning, by the partition's first offset now (its row
//! deleted when that is not known), and the partition starts at its beginning, whatever
//! `STORAGE_AUTO_OFFSET_RESET` says — the reset position is for a partition never stored, and
//! the new log's records must not be skipped. Two signs:
//!
//! - the offset is beyond the partition's end;
//! - Kafka holds no committed offset of the group for the partition (deleting a topic drops
//!   its groups' offsets; sluice commits to Kafka after every batch) *and* the record just
//!   below the offset, the last one sluice read there, is not the one it read: fetched now,
//!   it is stamped otherwise than the timestamp stored with the offset (`last_record_ms`, set
//!   by the claim of the batch that stored it). Kafka alone without the offset is no sign — a
//!   crash between a partition's first batch and its Kafka commit, or offsets Kafka expired
//!   after a week stopped, leave it so too — and then the record there is the one read.
//!
//! Not told apart (the offset kept): a record there stamped at the very millisecond of the
//! one read; no record at that offset any more (compacted away); a timestamp not known (an
//! offset adopted from Kafka or set by `sluice replay`, until its next batch; a record
//! without one); a broker that does not answer within [`RECORD_WAIT`]. After re-creating a
//! topic in such a case: `sluice replay <pipeline> --to earliest --execute`.

use sluice_core::KafkaClientSettings;
use sluice_core::settings::OffsetReset;
use sluice_core::topics::Topics;
use sluice_kafka::Admin;
use sluice_kafka::clients::RecordAt;
use sluice_kafka::rebalance::{Assigning, StartAt, StartingOffsets};
use sqlx::PgConnection;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long the record just below a stored offset is waited for when it is checked.
pub const RECORD_WAIT: Duration = Duration::from_secs(5);

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
    /// Reads the record just below a stored offset (see the module's documentation).
    kafka: KafkaClientSettings,
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
    /// The starting offsets of `group`'s partitions; `reset` for a partition never stored;
    /// `kafka` to read the record below a stored offset.
    pub fn new(
        database_url: &str,
        group: &str,
        reset: OffsetReset,
        kafka: &KafkaClientSettings,
    ) -> Self {
        Self {
            database_url: database_url.to_owned(),
            group: group.to_owned(),
            reset,
            kafka: kafka.clone(),
            client: Mutex::new(None),
        }
    }

    /// Where each of `partitions` with a stored offset starts: at it, or at its beginning
    /// when the offset belongs to a log that is gone (its row moved there).
    async fn read(
        conn: &mut Option<PgConnection>,
        url: &str,
        group: &str,
        (partitions, kafka): (&[Assigning], &KafkaClientSettings),
    ) -> Result<HashMap<(String, i32), StartAt>, sqlx::Error> {
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
            let gone = gone_logs(partitions, &stored, &|asked| {
                records_below(kafka, group, asked)
            });
            let mut starts = HashMap::with_capacity(stored.len());
            let mut restarted = Vec::new();
            for p in partitions {
                let key = (p.topic.clone(), p.partition);
                let Some(&(at, _)) = stored.get(&key) else {
                    continue;
                };
                let Some(sign) = gone.get(&key) else {
                    starts.insert(key, StartAt::Offset(at));
                    continue;
                };
                tracing::warn!(%group, topic = %key.0, partition = key.1, stored = at,
                    start = p.start, sign,
                    "the stored offset is no position in the partition as it is now (the \
                     topic was created again, or its records removed): the partition starts \
                     at its beginning");
                restarted.push((key.0.clone(), key.1, at, p.start));
                // The new log's start is stored durably below, so a failure that makes this
                // read again, or the pipeline start again, still starts it there (not at the
                // reset position). The consumer is told the beginning, not that offset:
                // retention may move the start before the first fetch.
                starts.insert(key, StartAt::Beginning);
            }
            if !restarted.is_empty() {
                sluice_postgres::offsets::restart_at_start(open, group, &restarted).await?;
            }
            Ok::<_, sqlx::Error>(starts)
        };
        let starts = read.await;
        if starts.is_err() {
            *conn = None;
        }
        starts
    }
}

/// The record just below each of `asked` — (topic, partition, stored offset) — fetched now
/// in one go by a reader in `group` (a failure logged and taken as not fetched).
fn records_below(
    kafka: &KafkaClientSettings,
    group: &str,
    asked: &[(String, i32, i64)],
) -> HashMap<(String, i32), RecordAt> {
    let below: Vec<(String, i32, i64)> = asked
        .iter()
        .map(|(t, p, o)| (t.clone(), *p, o - 1))
        .collect();
    sluice_kafka::clients::records_at(kafka, group, &below, RECORD_WAIT).unwrap_or_else(|error| {
        tracing::warn!(%error, partitions = ?below,
            "cannot read the records below the stored offsets; the offsets are kept");
        HashMap::new()
    })
}

/// Fetches the records just below offsets — (topic, partition, stored offset) — as the
/// partitions are now.
type RecordsBelow<'a> = dyn Fn(&[(String, i32, i64)]) -> HashMap<(String, i32), RecordAt> + 'a;

/// The partitions of `partitions` whose `stored` offset (with the timestamp of the record
/// read just below it) belongs to a log that is gone, each with the sign (see the module's
/// documentation); `below` fetches the records just below offsets as the partitions are now.
fn gone_logs(
    partitions: &[Assigning],
    stored: &HashMap<(String, i32), (i64, Option<i64>)>,
    below: &RecordsBelow<'_>,
) -> HashMap<(String, i32), String> {
    let mut gone = HashMap::new();
    let mut asked = Vec::new();
    for p in partitions {
        let key = (p.topic.clone(), p.partition);
        let Some(&(at, read)) = stored.get(&key) else {
            continue;
        };
        if let Some(end) = p.end.filter(|end| at > *end) {
            gone.insert(key, format!("past the partition's end {end}"));
            continue;
        }
        if let (Some(false), Some(_), true) = (p.kafka_committed, read, at > 0) {
            asked.push((p.topic.clone(), p.partition, at));
        }
    }
    if asked.is_empty() {
        return gone;
    }
    let found = below(&asked);
    for (topic, partition, at) in asked {
        let key = (topic, partition);
        let Some(&(_, Some(read))) = stored.get(&key) else {
            continue;
        };
        let now = match found.get(&key) {
            Some(RecordAt::Stamped(now)) => *now,
            Some(RecordAt::Missing) => {
                gone.insert(
                    key,
                    format!(
                        "Kafka holds no committed offset of the group, and the partition ends \
                         before {}, the last record read",
                        at - 1
                    ),
                );
                continue;
            }
            _ => continue,
        };
        if now == Some(read) {
            continue;
        }
        let now = now.map_or_else(
            || "without a timestamp".to_owned(),
            |ms| format!("stamped {ms}"),
        );
        gone.insert(
            key,
            format!(
                "Kafka holds no committed offset of the group, and the record at {} is {now}, \
                 the one read there was stamped {read}",
                at - 1
            ),
        );
    }
    gone
}

impl StartingOffsets for PostgresStarts {
    fn starting_offsets(
        &self,
        partitions: &[Assigning],
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
                (partitions, &self.kafka),
            ));
            match read {
                Ok(starts) => {
                    let never = match self.reset {
                        OffsetReset::Earliest => StartAt::Beginning,
                        OffsetReset::Latest => StartAt::End,
                    };
                    return Ok(partitions
                        .iter()
                        .map(|p| {
                            let key = (p.topic.clone(), p.partition);
                            let at = starts.get(&key).copied().unwrap_or(never);
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

    fn assigning(end: Option<i64>, kafka_committed: Option<bool>) -> Assigning {
        Assigning {
            topic: "t".into(),
            partition: 0,
            start: Some(0),
            end,
            kafka_committed,
        }
    }

    /// The sign `gone_logs` gives for partition t/0 stored at `at` with the record below it
    /// read stamped `read`, when the record there now is `now`.
    fn sign(p: &Assigning, at: i64, read: Option<i64>, now: RecordAt) -> Option<String> {
        let stored = HashMap::from([(("t".to_owned(), 0), (at, read))]);
        let below = |asked: &[(String, i32, i64)]| {
            assert_eq!(
                asked,
                [("t".to_owned(), 0, at)],
                "asked for the stored offset"
            );
            HashMap::from([(("t".to_owned(), 0), now)])
        };
        gone_logs(std::slice::from_ref(p), &stored, &below).remove(&("t".to_owned(), 0))
    }

    #[test]
    fn an_offset_is_kept_unless_a_sign_says_the_log_is_another() {
        let read = Some(1_000);
        let other = RecordAt::Stamped(Some(2_000));
        // Past the end: gone whatever Kafka says.
        assert!(sign(&assigning(Some(10), Some(true)), 50, read, other).is_some());
        // Kafka holds the group's offset: kept (not even fetched).
        assert_eq!(
            sign(&assigning(Some(900), Some(true)), 50, read, other),
            None
        );
        // Kafka's offset not known: kept.
        assert_eq!(sign(&assigning(Some(900), None), 50, read, other), None);
        // Kafka holds none (offsets expired, or a crash before Kafka's commit) and the record
        // below is the one read: kept.
        let same = RecordAt::Stamped(read);
        assert_eq!(
            sign(&assigning(Some(900), Some(false)), 50, read, same),
            None
        );
        // The partition ends before it: another log.
        assert!(sign(&assigning(None, Some(false)), 50, read, RecordAt::Missing).is_some());
        // No record there now but later ones (compacted, retention), or none fetched: kept.
        for now in [RecordAt::Later, RecordAt::NotFetched] {
            assert_eq!(
                sign(&assigning(Some(900), Some(false)), 50, read, now),
                None
            );
        }
        // The timestamp read not known (adopted, replayed): kept.
        assert_eq!(
            sign(&assigning(Some(900), Some(false)), 50, None, other),
            None
        );
        // Kafka holds none and the record below is another: another log.
        let found = sign(&assigning(Some(900), Some(false)), 50, read, other).unwrap();
        assert!(
            found.contains("the record at 49 is stamped 2000"),
            "{found}"
        );
        let bare = RecordAt::Stamped(None);
        assert!(sign(&assigning(Some(900), Some(false)), 50, read, bare).is_some());
        // Offset 0 has nothing below it.
        assert_eq!(
            sign(&assigning(Some(900), Some(false)), 0, read, other),
            None
        );
    }
}
