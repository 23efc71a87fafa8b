//! The mapping file: parsing, error messages naming the file, sink and key, and the checks
//! that need no database.

use crate::{
    ConflictPolicy, Constant, KafkaField, MappingError, MappingProblem, Sink, Source, Topics,
    check_sinks, parse_sinks,
};

const SEEDS: [(&str, &str); 3] = [
    (
        "reviews.toml",
        include_str!("../../../../deploy/sinks/reviews.toml"),
    ),
    (
        "app-stats.toml",
        include_str!("../../../../deploy/sinks/app-stats.toml"),
    ),
    (
        "network-metrics.toml",
        include_str!("../../../../deploy/sinks/network-metrics.toml"),
    ),
];

const TINY: &str = r#"
[[sink]]
name = "events"
table = "events"
key = ["id"]
conflict = "always-update"

[sink.columns]
id = { field = "meta.id" }
origin = { const = "crawler" }
at = { kafka = "timestamp" }
app = { lookup = { field = "package", table = "apps", key = "package_name", value = "id", unknown = "unknown_app" } }
"#;

fn parse(text: &str) -> Vec<Sink> {
    parse_sinks("m.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn problems(text: &str) -> Vec<String> {
    check_sinks("m.toml", &parse(text))
        .into_iter()
        .map(|e| e.to_string())
        .collect()
}

/// `TINY` with `from` replaced by `to`.
fn tiny_with(from: &str, to: &str) -> String {
    assert!(TINY.contains(from), "{from}");
    TINY.replacen(from, to, 1)
}

#[test]
fn a_sink_reads_with_defaults_and_columns_in_file_order() {
    let sinks = parse(TINY);
    assert_eq!(sinks.len(), 1);
    let sink = &sinks[0];
    assert_eq!(
        sink.topics,
        Topics::one("events"),
        "the topic defaults to the name"
    );
    assert_eq!(sink.group("storage-consumer"), "storage-consumer.events");
    assert_eq!(sink.batch_size, crate::DEFAULT_BATCH_SIZE);
    assert_eq!(sink.batch_bytes, crate::DEFAULT_BATCH_BYTES);
    assert_eq!(sink.conflict, ConflictPolicy::AlwaysUpdate);
    let order: Vec<&str> = sink.columns.iter().map(|c| c.column.as_str()).collect();
    assert_eq!(order, ["id", "origin", "at", "app"]);
    assert!(matches!(&sink.columns[0].source, Source::Field(p) if p.segments() == ["meta", "id"]));
    assert_eq!(
        sink.columns[1].source,
        Source::Const(Constant::Text("crawler".into()))
    );
    assert_eq!(sink.columns[2].source, Source::Kafka(KafkaField::Timestamp));
    assert!(
        matches!(&sink.columns[3].source, Source::Lookup(l) if l.unknown_kind == "unknown_app")
    );
    assert!(problems(TINY).is_empty());
}

#[test]
fn the_seed_mappings_read_and_pass_the_checks() {
    for (file, text) in SEEDS {
        let sinks = parse_sinks(file, text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sinks.len(), 1, "{file}");
        assert_eq!(check_sinks(file, &sinks), Vec::new(), "{file}");
    }
    let reviews = parse(SEEDS[0].1);
    assert_eq!(
        reviews[0].conflict,
        ConflictPolicy::NewestWins {
            column: "last_synced_at".into()
        }
    );
}

#[test]
fn parse_errors_name_the_file_the_sink_and_the_key() {
    let unknown_sink_key = parse_sinks("m.toml", &tiny_with("key = [", "tabel = \"x\"\nkey = ["))
        .unwrap_err()
        .to_string();
    assert!(
        unknown_sink_key.starts_with("m.toml: sink `events`: unknown field `tabel`"),
        "{unknown_sink_key}"
    );
    let unknown_column_key = parse_sinks(
        "m.toml",
        &tiny_with("field = \"meta.id\"", "field = \"meta.id\", maxx = 3"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        unknown_column_key
            .starts_with("m.toml: sink `events`, key `columns.id`: unknown field `maxx`"),
        "{unknown_column_key}"
    );
    let bad_policy = parse_sinks("m.toml", &tiny_with("always-update", "newest"))
        .unwrap_err()
        .to_string();
    assert!(
        bad_policy.starts_with("m.toml: sink `events`: unknown variant `newest`"),
        "{bad_policy}"
    );
    let two_sources = parse_sinks(
        "m.toml",
        &tiny_with("const = \"crawler\"", "const = 1, kafka = \"topic\""),
    )
    .unwrap_err();
    assert_eq!(
        two_sources,
        MappingError::Invalid {
            file: "m.toml".into(),
            sink: "events".into(),
            problem: MappingProblem::SourceCount {
                column: "origin".into()
            }
        }
    );
    let syntax = parse_sinks("m.toml", "[[sink]\n").unwrap_err();
    assert!(
        matches!(&syntax, MappingError::Syntax { file, .. } if file == "m.toml"),
        "{syntax}"
    );
    assert!(syntax.to_string().contains("line 1"), "{syntax}");
    let rules_on_const = parse_sinks(
        "m.toml",
        &tiny_with("const = \"crawler\"", "const = \"x\", max_length = 3"),
    )
    .unwrap_err();
    assert!(
        rules_on_const
            .to_string()
            .contains("column `origin`: value rules"),
        "{rules_on_const}"
    );
    let word_bound = parse_sinks(
        "m.toml",
        &tiny_with("field = \"meta.id\"", "field = \"meta.id\", min = \"abc\""),
    )
    .unwrap_err()
    .to_string();
    assert!(
        word_bound.contains("key `columns.id`: `min` and `max` are numbers"),
        "{word_bound}"
    );
    // `columns = "auto"` and a `[sink.columns]` table: TOML's bare "duplicate key", with how
    // to say it.
    let twice = parse_sinks(
        "m.toml",
        "[[sink]]\nname = \"x\"\ntable = \"x\"\ncolumns = \"auto\"\n[sink.columns]\na = { field = \"a\" }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        twice.contains("duplicate key")
            && twice.contains("write `\"*\" = \"auto\"` inside `[sink.columns]`"),
        "{twice}"
    );
}

#[test]
fn keys_must_be_mapped_and_unique_in_their_list() {
    let unmapped = problems(&tiny_with(
        "key = [\"id\"]",
        "key = [\"id\", \"missing\", \"id\"]",
    ));
    assert_eq!(
        unmapped,
        [
            "m.toml: sink `events`: column `id`: listed twice in `key`",
            "m.toml: sink `events`: column `missing`: a key column must have a source in `columns`",
        ]
    );
    let none = problems(&tiny_with("key = [\"id\"]", "key = []"));
    assert_eq!(
        none,
        ["m.toml: sink `events`: `key` must name at least one column"]
    );
}

#[test]
fn the_newest_wins_column_must_be_mapped_and_not_a_key() {
    let unmapped = problems(&tiny_with(
        "\"always-update\"",
        "{ newest-wins = \"synced\" }",
    ));
    assert_eq!(
        unmapped,
        [
            "m.toml: sink `events`: column `synced`: the newest-wins column must have a source in `columns`"
        ]
    );
    let key = problems(&tiny_with("\"always-update\"", "{ newest-wins = \"id\" }"));
    assert_eq!(
        key,
        ["m.toml: sink `events`: column `id`: the newest-wins column cannot be a key column"]
    );
    let mapped = problems(&tiny_with("\"always-update\"", "{ newest-wins = \"at\" }"));
    assert!(mapped.is_empty(), "{mapped:?}");
}

#[test]
fn never_written_columns_are_neither_keys_nor_mapped_and_insert_only_ones_are_mapped() {
    let listed = problems(&tiny_with(
        "conflict =",
        "never_written = [\"id\", \"origin\", \"first_seen_at\"]\ninsert_only = [\"nope\", \"at\"]\nconflict =",
    ));
    assert_eq!(
        listed,
        [
            "m.toml: sink `events`: column `id`: a key column cannot be never-written",
            "m.toml: sink `events`: column `origin`: a never-written column cannot have a source in `columns`",
            "m.toml: sink `events`: column `nope`: an insert-only column must have a source and not be a key",
        ]
    );
    let nothing_left = problems(&tiny_with(
        "conflict =",
        "insert_only = [\"origin\", \"at\", \"app\"]\nconflict =",
    ));
    assert_eq!(
        nothing_left,
        [
            "m.toml: sink `events`: `conflict = always-update` but every mapped column is a key or insert-only"
        ]
    );
}

#[test]
fn names_must_be_legal_and_sinks_distinct() {
    // Any name the table has is legal (it is quoted); only what no identifier can be is not.
    assert!(problems(&tiny_with("table = \"events\"", "table = \"Events; DROP\"")).is_empty());
    let illegal = problems(&tiny_with("table = \"events\"", "table = \"a.b.c\""));
    assert_eq!(illegal.len(), 1, "{illegal:?}");
    assert!(
        illegal[0].contains("table `a.b.c` is not legal"),
        "{illegal:?}"
    );
    assert!(problems(&tiny_with("origin =", "\"Origin\" =")).is_empty());
    let column = problems(&tiny_with("origin =", &format!("\"{}\" =", "x".repeat(64))));
    assert!(column[0].contains("is not legal"), "{column:?}");
    let kind = problems(&tiny_with("unknown_app", "Unknown App"));
    assert!(
        kind[0].contains("dead-letter kind `Unknown App` is not legal"),
        "{kind:?}"
    );

    let twice = format!(
        "{TINY}\n{}",
        TINY.replace("name = \"events\"", "name = \"other\"\ntopic = \"events\"")
    );
    let twice = format!("{twice}\n{TINY}");
    assert_eq!(
        problems(&twice),
        [
            "m.toml: sink `other`: topic `events` is read by sink `events` too",
            "m.toml: sink `events`: the name is used by another sink too",
            "m.toml: sink `events`: topic `events` is read by sink `other` too",
        ]
    );
}

#[test]
fn a_sink_reads_a_list_of_topics_or_a_pattern_named_once() {
    let listed = parse(&tiny_with(
        "name = \"events\"",
        "name = \"events\"\ntopics = [\"a\", \"b.c\"]",
    ));
    assert_eq!(
        listed[0].topics,
        Topics::Named(vec!["a".into(), "b.c".into()])
    );
    let pattern = parse(&tiny_with(
        "name = \"events\"",
        "name = \"events\"\ntopic_pattern = '^cdc\\.public\\..*'",
    ));
    assert_eq!(
        pattern[0].topics,
        Topics::Pattern(r"^cdc\.public\..*".into())
    );
    assert!(pattern[0].topics.covers("cdc.public.orders"));

    let refused = |extra: &str| {
        parse_sinks(
            "m.toml",
            &tiny_with("name = \"events\"", &format!("name = \"events\"\n{extra}")),
        )
        .unwrap_err()
        .to_string()
    };
    for twice in [
        "topic = \"a\"\ntopics = [\"b\"]",
        "topic = \"a\"\ntopic_pattern = \"b.*\"",
        "topics = []",
    ] {
        assert!(
            refused(twice).contains("name the topics once"),
            "{twice}: {}",
            refused(twice)
        );
    }
    let bad = refused("topic_pattern = \"cdc.(\"");
    assert!(
        bad.starts_with("m.toml: sink `events`: topic_pattern `cdc.(` is not a regular expression"),
        "{bad}"
    );
    let illegal = problems(&tiny_with(
        "name = \"events\"",
        "name = \"events\"\ntopics = [\"ok\", \"no way\"]",
    ));
    assert!(
        illegal[0].contains("topic `no way` is not legal"),
        "{illegal:?}"
    );

    // A named topic another sink's pattern covers is read twice; two patterns cannot be
    // compared without the cluster.
    let covered = format!(
        "{}\n{}",
        tiny_with(
            "name = \"events\"",
            "name = \"events\"\ntopic_pattern = \"ev.*\""
        ),
        tiny_with(
            "name = \"events\"",
            "name = \"other\"\ntopics = [\"x\", \"evil\"]"
        ),
    );
    assert_eq!(
        problems(&covered),
        ["m.toml: sink `other`: topic `evil` is read by sink `events` too"]
    );
}

#[test]
fn contradicting_rules_are_refused() {
    let rules = problems(&tiny_with(
        "field = \"meta.id\"",
        "field = \"meta.id\", min = 5, max = 1, min_length = 3, max_length = 2",
    ));
    assert_eq!(
        rules,
        [
            "m.toml: sink `events`: column `id`: `min` 5 is above `max` 1",
            "m.toml: sink `events`: column `id`: `min_length` 3 is above `max_length` 2",
        ]
    );
    let nan = problems(&tiny_with(
        "field = \"meta.id\"",
        "field = \"meta.id\", min = nan, max = inf",
    ));
    assert_eq!(
        nan,
        [
            "m.toml: sink `events`: column `id`: `min` NaN is not a finite number",
            "m.toml: sink `events`: column `id`: `max` inf is not a finite number",
        ]
    );
    let zero = problems(&tiny_with("conflict =", "batch_size = 0\nconflict ="));
    assert_eq!(
        zero,
        ["m.toml: sink `events`: `batch_size` must be at least 1"]
    );
    let zero = problems(&tiny_with("conflict =", "batch_bytes = 0\nconflict ="));
    assert_eq!(
        zero,
        ["m.toml: sink `events`: `batch_bytes` must be at least 1"]
    );
    let sinks = parse(&tiny_with("conflict =", "batch_bytes = 65536\nconflict ="));
    assert_eq!(sinks[0].batch_bytes, 65_536);
}

#[test]
fn conflict_defaults_to_the_upsert_or_to_first_wins_when_nothing_is_updated() {
    let updating = tiny_with("conflict = \"always-update\"\n", "");
    assert_eq!(parse(&updating)[0].conflict, ConflictPolicy::AlwaysUpdate);
    assert!(problems(&updating).is_empty(), "{:?}", problems(&updating));
    // A join table: every mapped column is the key, so an upsert has nothing to update.
    let keys_only = "[[sink]]\nname = \"tags\"\ntable = \"tags\"\nkey = [\"item\", \"tag\"]\n\
                     [sink.columns]\nitem = { field = \"item\" }\ntag = { field = \"tag\" }\n";
    assert_eq!(parse(keys_only)[0].conflict, ConflictPolicy::InsertIgnore);
    assert!(problems(keys_only).is_empty(), "{:?}", problems(keys_only));
    // Written out, the policy is the user's, and a policy that cannot update is refused.
    let written = keys_only.replace("key = [", "conflict = \"always-update\"\nkey = [");
    assert_eq!(parse(&written)[0].conflict, ConflictPolicy::AlwaysUpdate);
    assert!(
        problems(&written)
            .iter()
            .any(|p| p.contains("always-update")),
        "{:?}",
        problems(&written)
    );
}
