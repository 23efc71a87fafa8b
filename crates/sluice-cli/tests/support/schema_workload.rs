//! The workload of `tests/replicate_schema.rs` (which includes this file by path): writers
//! that insert, update, delete and re-insert rows of the source schema's tables, each in its
//! own key range, and count the records Debezium writes for them.

use crate::schema_tables::{LATE_TABLE, TABLES, Table};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::{Connection, PgConnection};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Rows a writer inserts in each table before the connector starts (the snapshot).
pub const INITIAL_ROWS: usize = 10;

/// What a writer does to one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Update,
    Delete,
    /// A deleted key comes back.
    Reinsert,
}

impl Op {
    /// Records Debezium writes for it: a delete is `d` + tombstone.
    pub fn records(self) -> usize {
        if self == Op::Delete { 2 } else { 1 }
    }
}

/// A writer's keys in one table: the live ones, the deleted ones, the next new one.
pub struct Keys {
    live: Vec<i64>,
    deleted: Vec<i64>,
    next: i64,
}

impl Keys {
    /// Writer `w`'s key range (row numbers; a two-column key takes `n / 8` and `n % 8`).
    pub fn new(w: usize) -> Keys {
        Keys {
            live: vec![],
            deleted: vec![],
            next: (w as i64 + 1) * 10_000_000,
        }
    }

    pub fn choose(&self, rng: &mut StdRng) -> Op {
        if self.live.len() < 5 {
            return Op::Insert;
        }
        match rng.random_range(0..100) {
            0..30 => Op::Insert,
            30..65 => Op::Update,
            65..85 => Op::Delete,
            _ if self.deleted.is_empty() => Op::Insert,
            _ => Op::Reinsert,
        }
    }

    /// Applies `op` to one of these keys; the records Debezium writes for it.
    pub async fn apply(
        &mut self,
        op: Op,
        table: &Table,
        conn: &mut PgConnection,
        schema: &str,
        rng: &mut StdRng,
    ) -> usize {
        match op {
            Op::Insert | Op::Reinsert => {
                let n = if op == Op::Insert {
                    self.next += 1;
                    self.next
                } else {
                    let i = rng.random_range(0..self.deleted.len());
                    self.deleted.swap_remove(i)
                };
                table.insert(conn, schema, n, rng).await;
                self.live.push(n);
            }
            Op::Update => {
                let n = self.live[rng.random_range(0..self.live.len())];
                table.update(conn, schema, n, rng).await;
            }
            Op::Delete => {
                let i = rng.random_range(0..self.live.len());
                let n = self.live.swap_remove(i);
                table.delete(conn, schema, n).await;
                self.deleted.push(n);
            }
        }
        op.records()
    }
}

/// Writer `w`'s state: its keys in each table.
pub struct Writer {
    keys: Vec<Keys>,
    rng: StdRng,
}

impl Writer {
    pub fn new(w: usize, seed: u64) -> Writer {
        Writer {
            keys: TABLES.iter().map(|_| Keys::new(w)).collect(),
            rng: StdRng::seed_from_u64(seed.wrapping_add(w as u64)),
        }
    }

    /// The snapshot's rows: `INITIAL_ROWS` in each table.
    pub async fn initial(&mut self, conn: &mut PgConnection, schema: &str) -> usize {
        let mut records = 0;
        for (t, table) in TABLES.iter().enumerate() {
            for _ in 0..INITIAL_ROWS {
                records += self.keys[t]
                    .apply(Op::Insert, table, conn, schema, &mut self.rng)
                    .await;
            }
        }
        records
    }

    /// `operations` random operations in transactions of 1-4, each on a random table;
    /// `done` counts them for the test. The records Debezium writes for them.
    pub async fn run(
        mut self,
        url: String,
        schema: String,
        operations: usize,
        done: Arc<AtomicUsize>,
    ) -> usize {
        let mut conn = PgConnection::connect(&url).await.unwrap();
        let mut records = 0;
        let mut ops = 0;
        while ops < operations {
            let mut tx = conn.begin().await.unwrap();
            let n = self.rng.random_range(1..=4).min(operations - ops);
            for _ in 0..n {
                let t = self.rng.random_range(0..TABLES.len());
                let op = self.keys[t].choose(&mut self.rng);
                records += self.keys[t]
                    .apply(op, &TABLES[t], &mut tx, &schema, &mut self.rng)
                    .await;
            }
            tx.commit().await.unwrap();
            ops += n;
            done.fetch_add(n, Ordering::Relaxed);
        }
        records
    }
}

/// `operations` random operations on the 21st table in transactions of 1-3; the records
/// Debezium writes for them.
pub async fn write_late(
    conn: &mut PgConnection,
    schema: &str,
    keys: &mut Keys,
    rng: &mut StdRng,
    operations: usize,
) -> (usize, usize) {
    let (mut records, mut deletes, mut ops) = (0, 0, 0);
    while ops < operations {
        let mut tx = conn.begin().await.unwrap();
        let n = rng.random_range(1..=3).min(operations - ops);
        for _ in 0..n {
            let op = keys.choose(rng);
            deletes += usize::from(op == Op::Delete);
            records += keys.apply(op, &LATE_TABLE, &mut tx, schema, rng).await;
        }
        tx.commit().await.unwrap();
        ops += n;
    }
    (records, deletes)
}

/// The workload's seed: `REPLICATE_SEED` to repeat a run, else a new one (printed).
pub fn seed() -> u64 {
    std::env::var("REPLICATE_SEED")
        .ok()
        .map(|s| s.parse().expect("REPLICATE_SEED is a u64"))
        .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0)
}
