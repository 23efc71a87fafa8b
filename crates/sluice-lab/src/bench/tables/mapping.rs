//! The two sides' mapping files (docs/sinks.md#many-tables, #auto-columns): A, one sink over
//! the run's 20 topics by a pattern, each record's table from its capture, the columns from
//! the table; B, a sink per topic and table with the same columns.

use super::TABLES;

/// A's sink (its group is `<prefix>.tables`).
pub(super) const ONE_SINK: &str = "tables";

/// The columns B's sinks list, each from the field of its name: every column of the tables.
pub(super) const FIELDS: [&str; 8] = [
    "id", "app", "rating", "title", "amount", "at", "helpful", "verified",
];

/// The topic and table names of table `k` (0-based) of run `id`: (`<id>.tables.tNN`, `tNN`).
pub(super) fn names(id: &str, k: usize) -> (String, String) {
    let table = format!("t{:02}", k + 1);
    (format!("{id}.tables.{table}"), table)
}

/// A: one sink, `topic_pattern` over run `id`'s topics, `table = "<schema>.{1}"`,
/// `columns = "auto"` (the key: each table's primary key).
pub(super) fn one_sink(id: &str, schema: &str) -> String {
    // A TOML basic string: `\\.` is the regex's escaped dot.
    let pattern = format!("{id}\\\\.tables\\\\.(t[0-9][0-9])");
    format!(
        "[[sink]]\nname = \"{ONE_SINK}\"\ntopic_pattern = \"{pattern}\"\n\
         table = \"{schema}.{{1}}\"\ncolumns = \"auto\"\n"
    )
}

/// B: a sink per topic and table (named like the table), its columns listed with
/// `key = ["id"]`, or `columns = "auto"` when `columns` is `auto`.
pub(super) fn many_sinks(id: &str, schema: &str, columns: &str) -> String {
    let listed: String = FIELDS
        .iter()
        .map(|f| format!("{f} = {{ field = \"{f}\" }}\n"))
        .collect();
    let mut text = String::new();
    for k in 0..TABLES {
        let (topic, table) = names(id, k);
        text.push_str(&format!(
            "[[sink]]\nname = \"{table}\"\ntopic = \"{topic}\"\ntable = \"{schema}.{table}\"\n"
        ));
        if columns == "auto" {
            text.push_str("columns = \"auto\"\n\n");
        } else {
            text.push_str(&format!("key = [\"id\"]\n[sink.columns]\n{listed}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sinks::parse_sinks;

    fn topics() -> Vec<String> {
        (0..TABLES).map(|k| names("bench7", k).0).collect()
    }

    #[test]
    fn one_sink_covers_every_topic_and_names_its_table_by_the_capture() {
        let sinks = parse_sinks("one.toml", &one_sink("bench7", "bench7"))
            .unwrap_or_else(|e| panic!("A's file does not parse: {e}"));
        assert_eq!(sinks.len(), 1);
        let mut others = topics();
        others.push("bench7.tables.t1".to_owned());
        others.push("bench70.tables.t01".to_owned());
        assert_eq!(
            sinks[0].topics.select(others.iter().map(String::as_str)),
            topics()
        );
        assert!(sinks[0].table_template.is_some(), "the table is a template");
    }

    #[test]
    fn many_sinks_read_a_topic_each_into_its_table_with_every_column() {
        for columns in ["listed", "auto"] {
            let sinks = parse_sinks("many.toml", &many_sinks("bench7", "bench7", columns))
                .unwrap_or_else(|e| panic!("B's file ({columns}) does not parse: {e}"));
            assert_eq!(sinks.len(), TABLES);
            for (k, sink) in sinks.iter().enumerate() {
                let (topic, table) = names("bench7", k);
                assert_eq!(sink.topics.select([]), vec![topic]);
                assert_eq!(sink.table, format!("bench7.{table}"));
                let expected = if columns == "auto" { 0 } else { FIELDS.len() };
                assert_eq!(sink.columns.len(), expected, "{columns}");
            }
        }
    }
}
