//! The configuration tables of the docs (`| variable | default | meaning |`: the storage
//! consumer's and the console's in `docs/operations.md`, the dispatcher's in `docs/outbox.md`, the capture's in `docs/capture.md`)
//! agree with the components' tables of variables, the ones `--help` prints: every variable of
//! every component appears in a row with the same default, and every variable a row names is
//! declared by some component. Needs no stack.
//!
//! A row may name several variables: `A` / `B` with defaults `a` / `b` (one each, or one
//! for all), or a precedence chain `A` › `B` › (text) whose default is each one's. Defaults
//! compare without backticks, outer parentheses and the spaces around `/`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sluice_core::settings::Variable;
use std::path::PathBuf;

/// Every component's table: the storage consumer's and the dispatcher's.
fn components() -> Vec<(&'static str, Vec<Variable>)> {
    vec![
        ("sluice run", sluice_storage::settings::variables()),
        ("sluice dispatch", sluice_dispatch::settings::variables()),
        ("sluice capture", sluice_capture::settings::variables()),
    ]
}

/// Variables of the process shell and of the CLI's options, which no component declares.
const OUTSIDE_COMPONENTS: [&str; 4] = [
    sluice_process::endpoint::ADDR_VARIABLE,
    sluice_cli::cmd::pipelines::SINKS_FILE_VAR,
    sluice_console::settings::ADDR_VAR,
    sluice_console::settings::TOKEN_VAR,
];

/// The docs that hold configuration tables, each with at least one.
const DOCS: [&str; 3] = ["docs/operations.md", "docs/outbox.md", "docs/capture.md"];

/// One table row: where it is, the variables it names, each one's default.
#[derive(Debug)]
struct Row {
    at: String,
    variables: Vec<(String, String)>,
}

fn read(doc: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(doc);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of every configuration table of every doc; each doc must have a table.
fn all_rows() -> Vec<Row> {
    let mut all = Vec::new();
    for doc in DOCS {
        let (tables, rows) = rows(doc, &read(doc));
        assert!(tables >= 1, "{doc}: no configuration table");
        all.extend(rows);
    }
    all
}

/// The rows of every configuration table of one doc.
fn rows(doc: &str, text: &str) -> (usize, Vec<Row>) {
    let mut tables = 0;
    let mut rows = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((_, line)) = lines.next() {
        if line.trim() != "| variable | default | meaning |" {
            continue;
        }
        tables += 1;
        lines.next(); // |---|---|---|
        for (i, line) in lines.by_ref() {
            if !line.starts_with('|') {
                break;
            }
            rows.push(row(&format!("{doc}:{}", i + 1), line));
        }
    }
    (tables, rows)
}

fn row(at: &str, text: &str) -> Row {
    let text = text.replace("\\|", "\u{0}");
    let cells: Vec<&str> = text.split('|').map(str::trim).collect();
    let (names_cell, default_cell) = (cells[1], cells[2]);
    let names: Vec<String> = names_cell
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "_<>".contains(c))
        })
        .map(str::to_owned)
        .collect();
    assert!(!names.is_empty(), "{at}: no variable in {names_cell:?}");
    let defaults: Vec<String> = if names_cell.contains('›') || !names_cell.contains(" / ") {
        vec![normal(default_cell); names.len()]
    } else {
        let parts: Vec<String> = default_cell.split(" / ").map(normal).collect();
        match parts.len() {
            1 => vec![parts[0].clone(); names.len()],
            n if n == names.len() => parts,
            n => panic!(
                "{at}: {} variables but {n} defaults: {default_cell:?}",
                names.len()
            ),
        }
    };
    Row {
        at: at.to_owned(),
        variables: names.into_iter().zip(defaults).collect(),
    }
}

/// A default as compared: no backticks, single spaces, no spaces around `/`, no outer
/// parentheses.
fn normal(text: &str) -> String {
    let text = text.replace('`', "");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = text.replace(" / ", "/");
    let bytes = text.as_bytes();
    if bytes.first() == Some(&b'(') && bytes.last() == Some(&b')') {
        // Strip only a pair that encloses everything: `(a) or (b)` stays.
        let mut depth = 0;
        for (i, c) in text.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                return if i == text.len() - 1 {
                    text[1..i].to_owned()
                } else {
                    text
                };
            }
        }
    }
    text
}

#[test]
fn every_components_variable_is_in_the_docs_with_its_default() {
    let rows = all_rows();
    let mut wrong = Vec::new();
    for (component, variables) in components() {
        for variable in variables {
            let want = normal(&variable.default);
            let found: Vec<(&str, &str)> = rows
                .iter()
                .flat_map(|row| {
                    row.variables
                        .iter()
                        .filter(|(name, _)| *name == variable.name)
                        .map(|(_, default)| (row.at.as_str(), default.as_str()))
                })
                .collect();
            if found.is_empty() {
                wrong.push(format!(
                    "{component}: {} (default {want:?}) is in no configuration table",
                    variable.name
                ));
            }
            for (at, default) in found {
                if default != want {
                    wrong.push(format!(
                        "{at}: {} has default {default:?}, {component} says {want:?}",
                        variable.name
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn every_variable_in_the_docs_tables_is_declared() {
    let declared: Vec<String> = components()
        .into_iter()
        .flat_map(|(_, variables)| variables)
        .map(|variable| variable.name.into_owned())
        .collect();
    let rows = all_rows();
    let mut unknown = Vec::new();
    for row in &rows {
        for (name, _) in &row.variables {
            if !declared.contains(name) && !OUTSIDE_COMPONENTS.contains(&name.as_str()) {
                unknown.push(format!("{}: {name}", row.at));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "declared by no component:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn rows_are_read_as_the_docs_lay_them_out() {
    let chain = row(
        "x.md:1",
        "| `STORAGE_WRITERS_<PIPELINE>` › `STORAGE_WRITERS` › default | 2 | writers \\| x |",
    );
    assert_eq!(
        chain.variables,
        [
            ("STORAGE_WRITERS_<PIPELINE>".to_owned(), "2".to_owned()),
            ("STORAGE_WRITERS".to_owned(), "2".to_owned()),
        ]
    );
    let list = row("x.md:2", "| `A_MS` / `B_MS` | 5 / `1000` | |");
    assert_eq!(
        list.variables,
        [
            ("A_MS".to_owned(), "5".to_owned()),
            ("B_MS".to_owned(), "1000".to_owned())
        ]
    );
    assert_eq!(normal("`200` / 500 / 50"), "200/500/50");
    assert_eq!(normal("(required)"), "required");
    assert_eq!(normal("(a) or (b)"), "(a) or (b)");
}
