//! The savepoint isolation without a database: a fake store fails every statement that
//! holds a "bad" row, as PostgreSQL fails a whole statement for one row.

use super::*;
use std::collections::BTreeSet;

/// A fake row: its record, its resolved application id and its message.
#[derive(Debug, Clone)]
struct Resolved<M> {
    record: usize,
    application_id: i64,
    message: M,
}

/// A message: its package name and whether (with which SQLSTATE) it breaks a constraint.
#[derive(Debug, Clone)]
struct Msg {
    package: &'static str,
    fails: Option<&'static str>,
}

/// The fake: rows fail by their message, or by a stale application id (23503).
#[derive(Default)]
struct FakeRows {
    /// Application ids that no longer exist (a row bound to one breaks the foreign key).
    deleted_ids: BTreeSet<i64>,
    /// What re-resolving a package name finds now.
    current_ids: HashMap<&'static str, i64>,
    /// Records written, in order.
    written: Vec<usize>,
    /// Statements run.
    statements: usize,
    /// Whether package names are the table's key: a statement holding one twice fails with
    /// 21000, as `ON CONFLICT DO UPDATE` meeting a row twice does.
    packages_are_keys: bool,
}

impl RowStore<Resolved<Msg>> for FakeRows {
    async fn upsert(
        &mut self,
        rows: &[Resolved<Msg>],
    ) -> Result<Result<WriteOutcome, RowError>, sqlx::Error> {
        self.statements += 1;
        let failure = rows.iter().find_map(|r| {
            r.message.fails.or_else(|| {
                self.deleted_ids
                    .contains(&r.application_id)
                    .then_some(FOREIGN_KEY_VIOLATION)
            })
        });
        let mut packages: Vec<&str> = rows.iter().map(|r| r.message.package).collect();
        packages.sort_unstable();
        let twice = packages.windows(2).any(|w| w[0] == w[1]);
        let failure =
            failure.or((self.packages_are_keys && twice).then_some(CARDINALITY_VIOLATION));
        if let Some(code) = failure {
            return Ok(Err(RowError {
                sqlstate: code.to_owned(),
                message: "violates a constraint".to_owned(),
            }));
        }
        self.written.extend(rows.iter().map(|r| r.record));
        Ok(Ok(WriteOutcome {
            inserted: rows.len() as u64,
            ..WriteOutcome::default()
        }))
    }

    async fn recheck(
        &mut self,
        row: &Resolved<Msg>,
    ) -> Result<Recheck<Resolved<Msg>>, sqlx::Error> {
        Ok(match self.current_ids.get(row.message.package) {
            Some(&id) if id != row.application_id => Recheck::Rebound(Resolved {
                application_id: id,
                ..row.clone()
            }),
            Some(_) => Recheck::Unchanged,
            None => Recheck::Gone(Rejection {
                record: row.record,
                kind: DeadLetterKind::UnknownApplication,
                reason: "deleted".into(),
            }),
        })
    }
}

fn row(
    record: usize,
    application_id: i64,
    package: &'static str,
    fails: Option<&'static str>,
) -> Resolved<Msg> {
    Resolved {
        record,
        application_id,
        message: Msg { package, fails },
    }
}

/// `n` good rows, records 0..n, one per key.
fn good(n: usize) -> Vec<Resolved<Msg>> {
    (0..n).map(|i| row(i, 1, "com.a", None)).collect()
}

fn run(store: &mut FakeRows, deduped: Deduped<Resolved<Msg>>) -> Isolated {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime
        .block_on(isolate(store, |r: &Resolved<Msg>| r.record, deduped))
        .expect("the fake store never fails")
}

fn single(rows: Vec<Resolved<Msg>>) -> Deduped<Resolved<Msg>> {
    let superseded = rows.iter().map(|_| Vec::new()).collect();
    Deduped { rows, superseded }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

#[test]
fn rows_that_break_a_constraint_are_rejected_alone_and_the_rest_written() {
    // (rows, failing records, expected statements at most)
    let cases: &[(usize, &[usize])] = &[
        (1, &[]),
        (8, &[]),
        (1, &[0]),
        (8, &[5]),
        (8, &[0, 7]),
        (7, &[1, 2, 3]),
        (5, &[0, 1, 2, 3, 4]),
        (16, &[3, 4, 11]),
    ];
    for &(n, failing) in cases {
        let mut rows = good(n);
        for &f in failing {
            rows[f].message.fails = Some("23514");
        }
        let mut store = FakeRows::default();
        let out = run(&mut store, single(rows));
        let rejected: Vec<usize> = out.rejected.iter().map(|r| r.record).collect();
        assert_eq!(
            sorted(rejected),
            failing.to_vec(),
            "{n} rows, {failing:?} failing"
        );
        let written: Vec<usize> = (0..n).filter(|i| !failing.contains(i)).collect();
        assert_eq!(
            sorted(store.written.clone()),
            written,
            "{n} rows, {failing:?}"
        );
        assert_eq!(out.outcome.inserted, written.len() as u64);
        assert_eq!(out.revived, 0);
        assert!(
            out.rejected
                .iter()
                .all(|r| r.kind == DeadLetterKind::ConstraintViolation
                    && r.reason == "SQLSTATE 23514: violates a constraint")
        );
        // Bisection: each failing row costs at most about 2·log2(n) statements.
        let bound = 1 + failing.len() * 2 * (usize::BITS - n.leading_zeros()) as usize;
        assert!(
            store.statements <= bound,
            "{n}/{failing:?}: {} statements",
            store.statements
        );
    }
}

#[test]
fn a_rejected_winner_is_replaced_by_its_runners_up_in_order() {
    // Key A: winner 0, runners-up 3 then 4. Key B: winner 1, no runner-up.
    // (winner fails, runner-up 3 fails) → (rejected, written, revived)
    /// (winner fails, first runner-up fails, rejected, written, revived)
    type Case = (bool, bool, &'static [usize], &'static [usize], u64);
    let cases: &[Case] = &[
        (false, false, &[], &[0, 1], 0),
        (true, false, &[0], &[1, 3], 1),
        (true, true, &[0, 3], &[1, 4], 2),
    ];
    for &(winner_fails, first_runner_up_fails, rejected, written, revived) in cases {
        let fail = |b: bool| b.then_some("23514");
        let deduped = Deduped {
            rows: vec![
                row(0, 1, "com.a", fail(winner_fails)),
                row(1, 1, "com.b", None),
            ],
            superseded: vec![
                vec![
                    row(3, 1, "com.a", fail(first_runner_up_fails)),
                    row(4, 1, "com.a", None),
                ],
                vec![],
            ],
        };
        let mut store = FakeRows::default();
        let out = run(&mut store, deduped);
        let got: Vec<usize> = out.rejected.iter().map(|r| r.record).collect();
        assert_eq!(
            got,
            rejected.to_vec(),
            "winner {winner_fails}, runner-up {first_runner_up_fails}"
        );
        assert_eq!(sorted(store.written.clone()), written.to_vec());
        assert_eq!(out.revived, revived);
    }
}

#[test]
fn a_stale_application_id_is_resolved_again_once() {
    // (id now in the registry) → (rejected kind, written)
    let cases: &[(Option<i64>, Option<DeadLetterKind>, &[usize])] = &[
        (Some(8), None, &[0, 1]),
        (None, Some(DeadLetterKind::UnknownApplication), &[1]),
        (Some(7), Some(DeadLetterKind::ConstraintViolation), &[1]),
    ];
    for &(now, kind, written) in cases {
        let mut store = FakeRows {
            deleted_ids: [7].into(),
            ..FakeRows::default()
        };
        if let Some(id) = now {
            store.current_ids.insert("com.gone", id);
        }
        let rows = vec![row(0, 7, "com.gone", None), row(1, 1, "com.a", None)];
        let out = run(&mut store, single(rows));
        let kinds: Vec<DeadLetterKind> = out.rejected.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, kind.into_iter().collect::<Vec<_>>(), "now {now:?}");
        assert_eq!(
            sorted(store.written.clone()),
            written.to_vec(),
            "now {now:?}"
        );
    }
    // A re-bound row that breaks the foreign key again is not resolved a second time.
    let mut store = FakeRows {
        deleted_ids: [7, 8].into(),
        ..FakeRows::default()
    };
    store.current_ids.insert("com.gone", 8);
    let out = run(&mut store, single(vec![row(0, 7, "com.gone", None)]));
    assert_eq!(out.rejected.len(), 1);
    assert_eq!(out.rejected[0].kind, DeadLetterKind::ConstraintViolation);
    assert!(out.rejected[0].reason.starts_with("SQLSTATE 23503"));
}

#[test]
fn rows_the_table_holds_as_one_key_are_written_one_by_one_in_record_order() {
    // De-duplication saw three keys (sorted by its own key order); the table sees two.
    let rows = vec![
        row(2, 1, "com.x", None),
        row(0, 1, "com.y", None),
        row(1, 1, "com.x", None),
        row(3, 1, "com.z", None),
    ];
    let mut store = FakeRows {
        packages_are_keys: true,
        ..FakeRows::default()
    };
    let out = run(&mut store, single(rows));
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    assert_eq!(
        store.written,
        [0, 1, 2, 3],
        "one statement each, in record order"
    );
    assert_eq!(out.outcome.inserted, 4);
}
