//! The storage topics: one module per topic, registered in ONE list (docs/ARCHITECTURE.md#topics).
//!
//! A topic module holds everything that differs between topics: the message type and its
//! decoder, the natural key and the survivor rule of de-duplication, the upsert statement
//! (`<topic>.sql` beside it) with the columns it binds, and the defaults (pipeline name,
//! table, batch size). The [`registry!`] line below makes it a pipeline: [`PipelineKind`],
//! the pipeline names, the `STORAGE_*` variables, the row counts of the operations commands
//! and the pipeline dispatch ([`PipelineKind::visit`]) are all derived from it.
//!
//! Forgetting a piece fails the build or a unit test: a topic module names its
//! `PipelineKind` variant (which only the registry line creates), its SQL is
//! `include_str!`ed, an unregistered `*.rs` file in this folder fails
//! `every_topic_module_is_registered`, and a table no migration creates fails the
//! migration tests of `sluice-postgres`.

use crate::dedupe::Deduped;
use crate::messages::DecodeError;
use crate::resolved::Resolved;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What makes a pipeline of a topic.
pub trait Topic: Send + Sync + 'static {
    /// The decoded message.
    type Message: Send + Sync + Clone + std::fmt::Debug;
    /// Its entry in the registry.
    const KIND: PipelineKind;
    /// The pipeline's name, table and defaults.
    const SPEC: TopicSpec;
    /// The upsert: one statement per batch over `UNNEST` of [`Topic::columns`] (`$1`, `$2`,
    /// … in order), `ON CONFLICT` on the natural key, returning one boolean per row it
    /// wrote: true inserted, false updated (a row not returned was skipped).
    const UPSERT_SQL: &'static str;
    /// Decodes one record value (`None`: a tombstone).
    fn decode(payload: Option<&[u8]>) -> Result<Self::Message, DecodeError>;
    /// The message's package name, resolved to `application_id`.
    fn package_name(message: &Self::Message) -> &str;
    /// Keeps one row per natural key, by the same survivor rule as the upsert's
    /// `ON CONFLICT` (first delivery wins, or the newest version wins).
    fn dedupe(rows: Vec<Resolved<Self::Message>>) -> Deduped<Resolved<Self::Message>>;
    /// The statement's parameters, one column per `$n`.
    fn columns(rows: &[Resolved<Self::Message>]) -> Vec<Column<'_>>;
}

/// A pipeline's name, table and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicSpec {
    /// The pipeline's name: `STORAGE_PIPELINES`, group names, metric labels, the CLI; and
    /// the default topic.
    pub name: &'static str,
    /// The table it writes.
    pub table: &'static str,
    /// The upper-case suffix of its variables (`STORAGE_TOPIC_<SUFFIX>`).
    pub env_suffix: &'static str,
    /// Records per poll = per transaction, unless a setting says otherwise.
    pub default_batch_size: usize,
}

/// One column of a batch: one `UNNEST($n::type[])` parameter. The PostgreSQL adapter binds
/// each variant as the array type its name says (a new variant is a compile error there
/// until it is bound).
#[derive(Debug, Clone, PartialEq)]
pub enum Column<'a> {
    /// `varchar[]` / `text[]`.
    Text(Vec<&'a str>),
    /// `varchar[]` / `text[]` with NULLs.
    OptText(Vec<Option<&'a str>>),
    /// `smallint[]`.
    SmallInt(Vec<i16>),
    /// `int[]`.
    Int(Vec<i32>),
    /// `int[]` with NULLs.
    OptInt(Vec<Option<i32>>),
    /// `bigint[]`.
    BigInt(Vec<i64>),
    /// `bigint[]` with NULLs.
    OptBigInt(Vec<Option<i64>>),
    /// `float8[]`.
    Double(Vec<f64>),
    /// `float8[]` with NULLs.
    OptDouble(Vec<Option<f64>>),
    /// `bool[]` with NULLs.
    OptBool(Vec<Option<bool>>),
    /// `timestamptz[]`.
    Timestamp(Vec<DateTime<Utc>>),
    /// `timestamptz[]` with NULLs.
    OptTimestamp(Vec<Option<DateTime<Utc>>>),
    /// `uuid[]`.
    Uuid(Vec<Uuid>),
    /// `jsonb[]` with NULLs (a ragged array per row: `UNNEST` cannot carry one).
    OptJson(Vec<Option<serde_json::Value>>),
}

/// One column from a field of every row.
pub fn column<'a, M, T>(rows: &'a [Resolved<M>], field: impl Fn(&'a Resolved<M>) -> T) -> Vec<T> {
    rows.iter().map(field).collect()
}

/// Runs code generic over a topic for a [`PipelineKind`] ([`PipelineKind::visit`]).
pub trait TopicVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the pipeline's topic type.
    fn visit<T: Topic>(self) -> Self::Output;
}

/// The one list of topics: `Variant => module::Type`. Declares the modules, the
/// [`PipelineKind`] enum and everything derived from the list.
macro_rules! registry {
    ($($variant:ident => $module:ident :: $topic:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// One storage pipeline: one topic, one consumer group, one table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum PipelineKind {
            $(
                #[doc = concat!("[`", stringify!($module), "::", stringify!($topic), "`].")]
                $variant,
            )+
        }

        impl PipelineKind {
            /// All pipelines, in the order they are started and reported.
            pub const ALL: [PipelineKind; [$(stringify!($variant)),+].len()] =
                [$(Self::$variant),+];

            /// The pipeline's name, table and defaults.
            pub const fn spec(self) -> &'static TopicSpec {
                match self {
                    $(Self::$variant => &<$module::$topic as Topic>::SPEC,)+
                }
            }

            /// Runs `visitor` with this pipeline's topic type.
            pub fn visit<V: TopicVisitor>(self, visitor: V) -> V::Output {
                match self {
                    $(Self::$variant => visitor.visit::<$module::$topic>(),)+
                }
            }
        }

        /// The module names of the registry, for the test that every module is registered.
        #[cfg(test)]
        const MODULES: &[&str] = &[$(stringify!($module)),+];
    };
}

registry! {
    AppStats => app_stats::AppStatsTopic,
    Reviews => reviews::ReviewsTopic,
    NetworkMetrics => network_metrics::NetworkMetricsTopic,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The topic type the registry maps a kind to.
    struct KindOf;
    impl TopicVisitor for KindOf {
        type Output = (PipelineKind, &'static TopicSpec);
        fn visit<T: Topic>(self) -> Self::Output {
            (T::KIND, &T::SPEC)
        }
    }

    #[test]
    fn every_topic_module_is_registered() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/topics");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .expect("the topics folder")
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".rs") && name != "mod.rs")
            .map(|name| name.trim_end_matches(".rs").to_owned())
            .collect();
        files.sort();
        let mut registered: Vec<String> = MODULES.iter().map(|m| (*m).to_owned()).collect();
        registered.sort();
        assert_eq!(
            files, registered,
            "a topic module without its registry line"
        );
    }

    #[test]
    fn specs_are_consistent_and_unique() {
        for kind in PipelineKind::ALL {
            let spec = kind.spec();
            assert_eq!(kind.visit(KindOf), (kind, spec));
            assert_eq!(
                spec.env_suffix,
                spec.name.to_ascii_uppercase().replace('-', "_"),
                "{}",
                spec.name
            );
            assert!(crate::settings::is_topic_name(spec.name));
            assert!(crate::settings::is_identifier(spec.table));
            assert!(spec.default_batch_size > 0);
            let others = PipelineKind::ALL.iter().filter(|k| **k != kind);
            for other in others {
                assert_ne!(other.spec().name, spec.name);
                assert_ne!(other.spec().table, spec.table);
            }
        }
    }

    // The survivor rule of each topic, in a batch.

    use super::app_stats::AppStatsTopic;
    use super::network_metrics::NetworkMetricsTopic;
    use super::reviews::ReviewsTopic;

    fn resolved<K: Topic>(record: usize, json: serde_json::Value) -> Resolved<K::Message> {
        let payload = json.to_string();
        Resolved {
            record,
            application_id: 7,
            message: K::decode(Some(payload.as_bytes())).expect("valid message"),
        }
    }

    fn stats(record: usize, ratings: i64) -> Resolved<crate::messages::AppStats> {
        resolved::<AppStatsTopic>(
            record,
            serde_json::json!({"package_name": "com.a", "crawled_at": "2026-11-01T00:00:00Z",
                               "ratings": ratings}),
        )
    }

    fn review(record: usize, synced: &str, thumbs: i64) -> Resolved<crate::messages::Review> {
        resolved::<ReviewsTopic>(
            record,
            serde_json::json!({"review_id": "r1", "package_name": "com.a", "score": 3,
                               "thumbs_up_count": thumbs, "at": "2026-11-01T00:00:00Z",
                               "last_synced_at": synced}),
        )
    }

    #[test]
    fn app_stats_keep_the_first_delivery_in_a_batch() {
        let out = AppStatsTopic::dedupe(vec![stats(0, 1), stats(1, 2), stats(2, 3)]);
        assert_eq!(out.rows.len(), 1);
        assert_eq!(out.rows[0].record, 0, "the first delivery wins");
        let runners_up: Vec<usize> = out.superseded[0].iter().map(|r| r.record).collect();
        assert_eq!(runners_up, vec![1, 2], "runners-up in delivery order");
    }

    #[test]
    fn network_metrics_keep_the_first_delivery_in_a_batch() {
        let metrics = |record: usize, packets: i64| {
            resolved::<NetworkMetricsTopic>(
                record,
                serde_json::json!({"analysis_id": "7d1b2a5e-7c1f-4a35-9d0b-3f1c2b4a5e6f",
                    "package_name": "com.a", "captured_at": "2026-11-01T00:00:00Z",
                    "duration_seconds": 1.0, "packet_count": packets, "total_bytes": 10}),
            )
        };
        let out = NetworkMetricsTopic::dedupe(vec![metrics(0, 1), metrics(1, 2)]);
        assert_eq!(out.rows.len(), 1);
        assert_eq!(out.rows[0].record, 0, "the first delivery wins");
    }

    #[test]
    fn reviews_keep_the_newest_version_and_ties_go_to_the_later_record() {
        let out = ReviewsTopic::dedupe(vec![
            review(0, "2026-11-03T00:00:00Z", 1),
            review(1, "2026-11-02T00:00:00Z", 2),
            review(2, "2026-11-03T00:00:00Z", 3),
        ]);
        assert_eq!(out.rows.len(), 1);
        assert_eq!(
            out.rows[0].record, 2,
            "newest last_synced_at, tie: the later record"
        );
        let runners_up: Vec<usize> = out.superseded[0].iter().map(|r| r.record).collect();
        assert_eq!(runners_up, vec![0, 1]);
    }

    #[test]
    fn every_statement_takes_one_parameter_per_column() {
        struct Params;
        impl TopicVisitor for Params {
            type Output = (usize, &'static str);
            fn visit<T: Topic>(self) -> Self::Output {
                let highest = (1..100)
                    .take_while(|n| T::UPSERT_SQL.contains(&format!("${n}::")))
                    .count();
                (highest, T::SPEC.name)
            }
        }
        let columns = [
            AppStatsTopic::columns(&[stats(0, 1)]).len(),
            ReviewsTopic::columns(&[review(0, "2026-11-03T00:00:00Z", 1)]).len(),
            NetworkMetricsTopic::columns(&[]).len(),
        ];
        for (kind, count) in PipelineKind::ALL.into_iter().zip(columns) {
            assert_eq!(kind.visit(Params), (count, kind.name()));
        }
    }
}
