//! The source model of `debezium_model.rs`, and what its replica must hold.
//!
//! The source is a table `items (id int primary key, v int, big text)` whose `big` is the
//! TOASTed column. Random operations on it — inserts, updates that rewrite `big` or leave it
//! unchanged, key changes (rewriting it or not), deletes, re-inserts of a deleted or moved-away
//! key, truncates — grouped in source transactions of one to three, become Debezium 3.6.1
//! change events shaped like the committed fixtures (`tests/data/debezium/`): the Connect JSON
//! envelope with its schema, the key as the connector writes it, the
//! `__debezium.context.*` headers, `__debezium.newkey` on a key change's `d` and its tombstone,
//! `__debezium.oldkey` on its `c`, `__debezium_unavailable_value` for an unchanged `big`, a
//! tombstone after each delete, `op: "t"` for a truncate. Each change has its own `source.lsn`
//! (a key change's `d` and `c` share one, as in fixtures 03 and 05), increasing; a transaction
//! shares `txId` and `source.ts_ms`. A key's events go to one partition (a stable hash of the
//! key), a truncate (no key) to any.
//!
//! Now and then a poison record goes in: an update or insert whose `v` fails the replica's
//! `CHECK (v >= 0)`, or an envelope that is not JSON. It is not a source operation (the source
//! rows do not change): it must be dead-lettered and leave no trace.
//!
//! [`Replica`] applies the changes one by one in source order with the documented effect of
//! each (docs/replication.md; docs/ARCHITECTURE.md, key
//! changes): `c`/`r`/`u` upsert by the conflict policy, a value Debezium did not send keeps the
//! stored one (a key change's `c` takes it from the row its `d` set aside, else from the old
//! key's row), `d` deletes unless the stored row is newer, tombstones and truncates change no
//! row. The replica must equal it whatever the partitions, batches, kills and replays.

use std::collections::BTreeMap;

use rand::Rng;
use rand::rngs::StdRng;

/// Keys are drawn from `1..=KEYS`, so they come back (re-inserts, key changes onto a key
/// deleted before).
pub const KEYS: i32 = 40;

/// What Debezium sends for a TOASTed value an update did not change.
pub const PLACEHOLDER: &str = "__debezium_unavailable_value";

/// The conflict policy of the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    AlwaysUpdate,
    InsertIgnore,
    /// `{ newest-wins = "lsn" }`, the column mapped from `source.lsn`.
    NewestWinsLsn,
}

impl Policy {
    pub const ALL: [Policy; 3] = [
        Policy::AlwaysUpdate,
        Policy::InsertIgnore,
        Policy::NewestWinsLsn,
    ];

    /// The `conflict = …` value in the mapping.
    pub fn toml(self) -> &'static str {
        match self {
            Policy::AlwaysUpdate => "\"always-update\"",
            Policy::InsertIgnore => "\"insert-ignore\"",
            Policy::NewestWinsLsn => "{ newest-wins = \"lsn\" }",
        }
    }
}

/// A row of the replica: `v`, `big`, the `source.lsn` of the version stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub v: i32,
    pub big: String,
    pub lsn: i64,
}

/// What one record is, for the model.
#[derive(Debug, Clone)]
pub enum Change {
    /// `c`, `r` or `u`: `big` `None` is the placeholder; `oldkey` on a key change's `c`.
    Upsert {
        op: char,
        id: i32,
        v: i32,
        big: Option<String>,
        lsn: i64,
        oldkey: Option<i32>,
    },
    /// `d`: `newkey` on a key change's.
    Delete {
        id: i32,
        lsn: i64,
        newkey: Option<i32>,
    },
    /// The Kafka tombstone after a delete.
    Tombstone { id: i32, newkey: Option<i32> },
    /// `t`.
    Truncate { lsn: i64 },
    /// Not a source operation: must leave no trace, and be dead-lettered — `certain`: always
    /// (it cannot be decoded); otherwise (a value the table refuses) unless a later record of
    /// its key in the same batch supersedes it (then it is never written, nor checked).
    Poison {
        id: i32,
        what: &'static str,
        certain: bool,
    },
}

/// A scripted source operation (a minimized case).
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Insert(i32),
    /// An update; `keep`: `big` unchanged (the placeholder).
    Update {
        id: i32,
        keep: bool,
    },
    /// A record the table refuses (`v` = -3, a new `big`): not a source operation.
    Refused(i32),
    /// A key change leaving `big` unchanged.
    KeyChange {
        old: i32,
        new: i32,
    },
}

/// One record to produce, at its partition and offset.
#[derive(Debug, Clone)]
pub struct Event {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub change: Change,
}

impl Event {
    /// The id whose row the record is about (`None`: a truncate).
    pub fn id(&self) -> Option<i32> {
        match &self.change {
            Change::Upsert { id, .. }
            | Change::Delete { id, .. }
            | Change::Tombstone { id, .. }
            | Change::Poison { id, .. } => Some(*id),
            Change::Truncate { .. } => None,
        }
    }

    /// Whether the record concerns row `id` (its own key, or the other key of a key change).
    pub fn touches(&self, id: i32) -> bool {
        match &self.change {
            Change::Upsert {
                id: own, oldkey, ..
            } => *own == id || *oldkey == Some(id),
            Change::Delete {
                id: own, newkey, ..
            }
            | Change::Tombstone {
                id: own, newkey, ..
            } => *own == id || *newkey == Some(id),
            Change::Poison { id: own, .. } => *own == id,
            Change::Truncate { .. } => true,
        }
    }

    /// One line: coordinates and the change, `big` as its length and first characters.
    pub fn show(&self) -> String {
        let at = format!("p{}@{}", self.partition, self.offset);
        match &self.change {
            Change::Upsert {
                op,
                id,
                v,
                big,
                lsn,
                oldkey,
            } => format!(
                "{at} {op} id={id} v={v} big={} lsn={lsn}{}",
                big.as_deref().map_or("<placeholder>".into(), short),
                oldkey.map_or(String::new(), |o| format!(" oldkey={o}"))
            ),
            Change::Delete { id, lsn, newkey } => format!(
                "{at} d id={id} lsn={lsn}{}",
                newkey.map_or(String::new(), |n| format!(" newkey={n}"))
            ),
            Change::Tombstone { id, newkey } => format!(
                "{at} tombstone id={id}{}",
                newkey.map_or(String::new(), |n| format!(" newkey={n}"))
            ),
            Change::Truncate { lsn } => format!("{at} t lsn={lsn}"),
            Change::Poison { id, what, .. } => format!("{at} POISON id={id}: {what}"),
        }
    }
}

/// A `big` value shown: its length and first characters.
pub fn short(big: &str) -> String {
    format!("{}…({})", &big[..big.len().min(8)], big.len())
}

/// The source table and the events its changes become.
pub struct Source {
    partitions: i32,
    /// The source's rows: id → (v, big).
    rows: BTreeMap<i32, (i32, String)>,
    lsn: i64,
    committed_lsn: i64,
    tx: i64,
    ts_ms: i64,
    offsets: Vec<i64>,
    value_schema: String,
    truncates: usize,
    /// Keep a key change's `c` whose old key is on another partition from carrying the
    /// placeholder (the known failing case: its `c` may come before the old row is stored).
    avoid_known: bool,
    /// Of 100 operations, how many are poison records (3; more to explore).
    pub poison_percent: u32,
}

/// The key schema of the fixtures, for an `int` key.
const KEY_SCHEMA: &str = concat!(
    r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"#,
    r#""optional":false,"name":"dbzsamples.public.items.Key"}"#
);

const RUN_ID: &str = "01a23463-c6ea-764f-ac08-08320dec7db0";

impl Source {
    /// An empty source table whose events go to `partitions` partitions; `truncates` at most.
    pub fn new(partitions: i32, truncates: usize, avoid_known: bool) -> Source {
        Source {
            partitions,
            rows: BTreeMap::new(),
            lsn: 31_726_388_944,
            committed_lsn: 31_726_388_944,
            tx: 525_282,
            ts_ms: 1_796_175_284_525,
            offsets: vec![0; partitions as usize],
            value_schema: value_schema(),
            truncates,
            avoid_known,
            poison_percent: 3,
        }
    }

    /// The source's rows now (id → (v, big)).
    pub fn rows(&self) -> &BTreeMap<i32, (i32, String)> {
        &self.rows
    }

    /// At least `n` more records: whole source transactions of random operations (the
    /// first chunk starts with a snapshot of a few rows, `op: "r"`).
    pub fn chunk(&mut self, n: usize, rng: &mut StdRng) -> Vec<Event> {
        let mut events = Vec::new();
        if self.tx == 525_282 {
            self.tx += 1;
            let reads = rng.random_range(0..=8);
            for i in 0..reads {
                let id = rng.random_range(1..=KEYS);
                if self.rows.contains_key(&id) {
                    continue;
                }
                let (v, big) = (rng.random_range(0..1000), big(rng));
                self.rows.insert(id, (v, big.clone()));
                let snapshot = if i + 1 == reads { "last" } else { "true" };
                let lsn = self.lsn;
                self.upsert(&mut events, 'r', id, v, Some(big), lsn, None, snapshot);
            }
        }
        while events.len() < n {
            self.tx += 1;
            self.ts_ms += rng.random_range(1..40);
            for _ in 0..rng.random_range(1..=3) {
                self.operation(&mut events, rng);
            }
            self.committed_lsn = self.lsn;
        }
        events
    }

    /// The records of one scripted step, a source transaction of its own.
    pub fn step(&mut self, step: Step, rng: &mut StdRng) -> Vec<Event> {
        let mut events = Vec::new();
        self.tx += 1;
        self.ts_ms += 1;
        match step {
            Step::Insert(id) => self.insert(&mut events, id, rng),
            Step::Update { id, keep } => {
                let lsn = self.next_lsn(rng);
                let v = rng.random_range(0..1000);
                let big = (!keep).then(|| big(rng));
                let row = self.rows.get_mut(&id).expect("a live row");
                row.0 = v;
                if let Some(big) = &big {
                    row.1.clone_from(big);
                }
                self.upsert(&mut events, 'u', id, v, big, lsn, None, "false");
            }
            Step::Refused(id) => {
                let lsn = self.next_lsn(rng);
                let after = format!(r#"{{"id":{id},"v":-3,"big":{}}}"#, json(&big(rng)));
                let value = self.envelope("null", &after, 'u', lsn, "false");
                let partition = self.partition(id);
                self.push(
                    &mut events,
                    partition,
                    Some(id),
                    Some(value),
                    Vec::new(),
                    Change::Poison {
                        id,
                        what: "u with v = -3",
                        certain: false,
                    },
                );
            }
            Step::KeyChange { old, new } => {
                // As `key_change`, `big` always left unchanged (the placeholder).
                let lsn = self.next_lsn(rng);
                self.delete_at(&mut events, old, Some(new), lsn);
                let (_, old_big) = self.rows.remove(&old).expect("a live row");
                let v = rng.random_range(0..1000);
                self.rows.insert(new, (v, old_big));
                self.upsert(&mut events, 'c', new, v, None, lsn, Some(old), "false");
            }
        }
        self.committed_lsn = self.lsn;
        events
    }

    fn next_lsn(&mut self, rng: &mut StdRng) -> i64 {
        self.lsn += rng.random_range(8..200);
        self.lsn
    }

    fn live(&self, rng: &mut StdRng) -> Option<i32> {
        let ids: Vec<i32> = self.rows.keys().copied().collect();
        (!ids.is_empty()).then(|| ids[rng.random_range(0..ids.len())])
    }

    fn free(&self, rng: &mut StdRng) -> Option<i32> {
        let ids: Vec<i32> = (1..=KEYS).filter(|i| !self.rows.contains_key(i)).collect();
        (!ids.is_empty()).then(|| ids[rng.random_range(0..ids.len())])
    }

    /// One random operation and its records.
    fn operation(&mut self, events: &mut Vec<Event>, rng: &mut StdRng) {
        let roll = rng.random_range(0..100);
        let (live, free) = (self.live(rng), self.free(rng));
        match (roll, live, free) {
            (0, _, _) if self.truncates > 0 => {
                self.truncates -= 1;
                self.rows.clear();
                let lsn = self.next_lsn(rng);
                let partition = rng.random_range(0..self.partitions);
                let value = self.envelope("null", "null", 't', lsn, "false");
                self.push(
                    events,
                    partition,
                    None,
                    Some(value),
                    Vec::new(),
                    Change::Truncate { lsn },
                );
            }
            (roll, Some(id), _) if (1..=self.poison_percent).contains(&roll) => {
                self.poison(events, id, rng);
            }
            (4..=19, _, Some(id)) | (_, None, Some(id)) => self.insert(events, id, rng),
            (20..=35, Some(id), _) => {
                let lsn = self.next_lsn(rng);
                let (v, big) = (rng.random_range(0..1000), big(rng));
                self.rows.insert(id, (v, big.clone()));
                self.upsert(events, 'u', id, v, Some(big), lsn, None, "false");
            }
            (36..=58, Some(id), _) | (_, Some(id), None) => {
                let lsn = self.next_lsn(rng);
                let v = rng.random_range(0..1000);
                self.rows.get_mut(&id).expect("a live row").0 = v;
                self.upsert(events, 'u', id, v, None, lsn, None, "false");
            }
            (59..=76, Some(old), Some(new)) => self.key_change(events, old, new, rng),
            (77..=88, Some(id), _) => self.delete(events, id, None, rng),
            (89..=94, Some(old), Some(new)) => {
                // A key change, then the old key inserted again.
                self.key_change(events, old, new, rng);
                self.insert(events, old, rng);
            }
            (_, Some(id), _) => {
                // A delete, then the same key inserted again.
                self.delete(events, id, None, rng);
                self.insert(events, id, rng);
            }
            (_, None, None) => unreachable!("KEYS > 0: a key is live or free"),
        }
    }

    fn insert(&mut self, events: &mut Vec<Event>, id: i32, rng: &mut StdRng) {
        let lsn = self.next_lsn(rng);
        let (v, big) = (rng.random_range(0..1000), big(rng));
        self.rows.insert(id, (v, big.clone()));
        self.upsert(events, 'c', id, v, Some(big), lsn, None, "false");
    }

    /// `d` of `old` and its tombstone (header `__debezium.newkey`), `c` of `new` (header
    /// `__debezium.oldkey`, `big` rewritten or the placeholder), one LSN.
    fn key_change(&mut self, events: &mut Vec<Event>, old: i32, new: i32, rng: &mut StdRng) {
        let lsn = self.next_lsn(rng);
        self.delete_at(events, old, Some(new), lsn);
        let (_, old_big) = self.rows.remove(&old).expect("a live row");
        let v = rng.random_range(0..1000);
        let kept = !(self.avoid_known && self.partition(old) != self.partition(new));
        let big = (!kept || rng.random_bool(0.4)).then(|| big(rng));
        self.rows.insert(new, (v, big.clone().unwrap_or(old_big)));
        self.upsert(events, 'c', new, v, big, lsn, Some(old), "false");
    }

    fn delete(&mut self, events: &mut Vec<Event>, id: i32, newkey: Option<i32>, rng: &mut StdRng) {
        let lsn = self.next_lsn(rng);
        self.delete_at(events, id, newkey, lsn);
        self.rows.remove(&id);
    }

    fn delete_at(&mut self, events: &mut Vec<Event>, id: i32, newkey: Option<i32>, lsn: i64) {
        let before = format!(r#"{{"id":{id},"v":null,"big":null}}"#);
        let value = self.envelope(&before, "null", 'd', lsn, "false");
        let mut headers = Vec::new();
        if let Some(new) = newkey {
            headers.push((
                "__debezium.newkey".to_owned(),
                format!(r#"{{"id":{new}}}"#).into_bytes(),
            ));
        }
        let partition = self.partition(id);
        self.push(
            events,
            partition,
            Some(id),
            Some(value),
            headers.clone(),
            Change::Delete { id, lsn, newkey },
        );
        self.push(
            events,
            partition,
            Some(id),
            None,
            headers,
            Change::Tombstone { id, newkey },
        );
    }

    /// A record that fails the replica (not a source operation).
    fn poison(&mut self, events: &mut Vec<Event>, live: i32, rng: &mut StdRng) {
        let lsn = self.next_lsn(rng);
        let (id, what, certain, value) = match rng.random_range(0..4) {
            0 => {
                let id = self.free(rng).unwrap_or(live);
                let after = format!(r#"{{"id":{id},"v":-1,"big":{}}}"#, json(&big(rng)));
                let value = self.envelope("null", &after, 'c', lsn, "false");
                (id, "c with v = -1", false, value)
            }
            1 => {
                let after = format!(r#"{{"id":{live},"v":-2,"big":{}}}"#, json(PLACEHOLDER));
                let value = self.envelope("null", &after, 'u', lsn, "false");
                (live, "u with v = -2, big the placeholder", false, value)
            }
            2 => {
                let after = format!(r#"{{"id":{live},"v":-3,"big":{}}}"#, json(&big(rng)));
                let value = self.envelope("null", &after, 'u', lsn, "false");
                (live, "u with v = -3", false, value)
            }
            _ => {
                let after = format!(r#"{{"id":{live},"v":4,"big":"x"}}"#);
                let mut value = self.envelope("null", &after, 'u', lsn, "false");
                value.truncate(value.len() / 2);
                (live, "an envelope cut in half", true, value)
            }
        };
        let partition = self.partition(id);
        self.push(
            events,
            partition,
            Some(id),
            Some(value),
            Vec::new(),
            Change::Poison { id, what, certain },
        );
    }

    #[allow(clippy::too_many_arguments, reason = "one record's fields")]
    fn upsert(
        &mut self,
        events: &mut Vec<Event>,
        op: char,
        id: i32,
        v: i32,
        big: Option<String>,
        lsn: i64,
        oldkey: Option<i32>,
        snapshot: &str,
    ) {
        let after = format!(
            r#"{{"id":{id},"v":{v},"big":{}}}"#,
            json(big.as_deref().unwrap_or(PLACEHOLDER))
        );
        let value = self.envelope("null", &after, op, lsn, snapshot);
        let headers = oldkey
            .map(|old| {
                vec![(
                    "__debezium.oldkey".to_owned(),
                    format!(r#"{{"id":{old}}}"#).into_bytes(),
                )]
            })
            .unwrap_or_default();
        let partition = self.partition(id);
        self.push(
            events,
            partition,
            Some(id),
            Some(value),
            headers,
            Change::Upsert {
                op,
                id,
                v,
                big,
                lsn,
                oldkey,
            },
        );
    }

    /// Appends a record: the key's JSON, the context headers after the extra ones.
    fn push(
        &mut self,
        events: &mut Vec<Event>,
        partition: i32,
        id: Option<i32>,
        value: Option<String>,
        mut headers: Vec<(String, Vec<u8>)>,
        change: Change,
    ) {
        for (name, value) in [
            ("connectorLogicalName", "dbzsamples"),
            ("taskId", "0"),
            ("connectorName", "postgresql"),
            ("runId", RUN_ID),
        ] {
            headers.push((
                format!("__debezium.context.{name}"),
                value.as_bytes().to_vec(),
            ));
        }
        let offset = self.offsets[partition as usize];
        self.offsets[partition as usize] += 1;
        events.push(Event {
            partition,
            offset,
            key: id.map(|id| key(id).into_bytes()),
            value: value.map(String::into_bytes),
            headers,
            change,
        });
    }

    /// Where the connector's producer puts a key's records: a stable hash of the key's bytes.
    fn partition(&self, id: i32) -> i32 {
        let hash = key(id).bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        (hash % self.partitions as u64) as i32
    }

    /// The change event's value, as the fixtures have it.
    fn envelope(&self, before: &str, after: &str, op: char, lsn: i64, snapshot: &str) -> String {
        let (ts, source_ts, tx) = (self.ts_ms + 200, self.ts_ms, self.tx);
        let committed = self.committed_lsn;
        format!(
            concat!(
                r#"{{"schema":{schema},"payload":{{"before":{before},"after":{after},"source":{{"#,
                r#""version":"3.6.1.Final","connector":"postgresql","name":"dbzsamples","#,
                r#""ts_ms":{source_ts},"snapshot":"{snapshot}","db":"dbz_samples","#,
                r#""sequence":"[\"{committed}\",\"{lsn}\"]","ts_us":{source_ts}000,"#,
                r#""ts_ns":{source_ts}000000,"schema":"public","table":"items","txId":{tx},"#,
                r#""lsn":{lsn},"xmin":null,"origin":null,"origin_lsn":null}},"#,
                r#""transaction":null,"op":"{op}","ts_ms":{ts},"ts_us":{ts}000,"#,
                r#""ts_ns":{ts}000000}}}}"#
            ),
            schema = self.value_schema,
            before = before,
            after = after,
            source_ts = source_ts,
            snapshot = snapshot,
            committed = committed,
            lsn = lsn,
            tx = tx,
            op = op,
            ts = ts,
        )
    }
}

/// The key record of `id`, as the connector writes it.
fn key(id: i32) -> String {
    format!(r#"{{"schema":{KEY_SCHEMA},"payload":{{"id":{id}}}}}"#)
}

fn json(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// A `big` value: 32 to 2,400 hex digits (past 2 kB PostgreSQL stores it out of line).
fn big(rng: &mut StdRng) -> String {
    let len = if rng.random_bool(0.2) {
        rng.random_range(2_040..2_400)
    } else {
        rng.random_range(32..400)
    };
    (0..len)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect()
}

/// The fixtures' envelope schema (`01-create-id2.value.json`) with this table's columns.
fn value_schema() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/debezium/01-create-id2.value.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).expect("a fixture's JSON");
    let columns = serde_json::json!([
        {"type": "int32", "optional": false, "field": "id"},
        {"type": "int32", "optional": true, "field": "v"},
        {"type": "string", "optional": true, "field": "big"},
    ]);
    let fields = value["schema"]["fields"]
        .as_array_mut()
        .expect("the envelope's fields");
    for field in fields.iter_mut().take(2) {
        assert!(field["field"] == "before" || field["field"] == "after");
        field["fields"] = columns.clone();
    }
    value["schema"].to_string()
}

/// The replica the sink must make: the changes applied one by one in source order.
#[derive(Debug, Clone, Default)]
pub struct Replica {
    pub rows: BTreeMap<i32, Row>,
    /// What a key change's `d` set aside for its `c`, by their `source.lsn`.
    aside: BTreeMap<i64, Row>,
}

/// What the model says of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    DeadLetter,
    /// A dead letter, or no trace at all (a refused record superseded in its batch).
    MaybeDeadLetter,
}

impl Replica {
    /// Applies one record's change under `policy`.
    pub fn apply(&mut self, change: &Change, policy: Policy) -> Outcome {
        match change {
            Change::Upsert {
                id,
                v,
                big,
                lsn,
                oldkey,
                ..
            } => {
                let kept = match oldkey {
                    Some(old) => self
                        .aside
                        .remove(lsn)
                        .or_else(|| self.rows.get(old).cloned()),
                    None => self.rows.get(id).cloned(),
                };
                let big = match (big, kept) {
                    (Some(big), _) => big.clone(),
                    (None, Some(kept)) => kept.big,
                    // A key change's c with nowhere to take its value from: a dead letter.
                    (None, None) if oldkey.is_some() => return Outcome::DeadLetter,
                    // An update of a row not stored: nothing to keep, nothing changes.
                    (None, None) => return Outcome::Applied,
                };
                let new = Row {
                    v: *v,
                    big,
                    lsn: *lsn,
                };
                match self.rows.get_mut(id) {
                    None => {
                        self.rows.insert(*id, new);
                    }
                    Some(row) => match policy {
                        Policy::AlwaysUpdate => *row = new,
                        Policy::InsertIgnore => {}
                        Policy::NewestWinsLsn if new.lsn > row.lsn => *row = new,
                        Policy::NewestWinsLsn => {}
                    },
                }
                Outcome::Applied
            }
            Change::Delete { id, lsn, newkey } => {
                let newer = self
                    .rows
                    .get(id)
                    .is_some_and(|row| policy == Policy::NewestWinsLsn && row.lsn > *lsn);
                if !newer
                    && let Some(row) = self.rows.remove(id)
                    && newkey.is_some()
                {
                    self.aside.insert(*lsn, row);
                }
                Outcome::Applied
            }
            Change::Tombstone { .. } | Change::Truncate { .. } => Outcome::Applied,
            Change::Poison { certain: true, .. } => Outcome::DeadLetter,
            Change::Poison { .. } => Outcome::MaybeDeadLetter,
        }
    }
}
