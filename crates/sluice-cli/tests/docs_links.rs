//! Every link of the docs leads somewhere: in `README.md` and every `docs/*.md`, each relative
//! markdown link `[x](path)` / `[x](path#anchor)` / `[x](#anchor)` (images too) names a file
//! that exists, and each anchor is a heading of its target (GitHub's slugs); each repository
//! path a doc names in backticks (`crates/…`, `deploy/…`, …) exists; and each
//! `docs/<doc>.md#<anchor>` (or `README.md#<anchor>`) a source file cites names a heading of
//! that doc. Needs no stack.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `README.md` and every `docs/*.md`, as paths relative to the repository's root.
fn docs() -> Vec<String> {
    let mut docs = vec!["README.md".to_owned()];
    let mut more: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// A doc's lines outside fenced code blocks, with their 1-based numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => lines.push((i + 1, line)),
            _ => {}
        }
    }
    lines
}

/// GitHub's anchor of a heading: the text as rendered (code, emphasis and link markup
/// dropped), lower case, every character but letters, digits, `-`, `_` and spaces dropped,
/// spaces turned into `-`.
fn slug(heading: &str) -> String {
    let text = unlink(heading).replace(['`', '*'], "");
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `[text](target)` → `text`.
fn unlink(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(mid) = out.find("](") {
        let (Some(open), Some(close)) = (out[..mid].rfind('['), out[mid..].find(')')) else {
            break;
        };
        out = format!(
            "{}{}{}",
            &out[..open],
            &out[open + 1..mid],
            &out[mid + close + 1..]
        );
    }
    out
}

/// The anchors of a doc: its headings' slugs (a repeated one gets `-1`, `-2`, … as on
/// GitHub) and any `id="…"` of inline HTML.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let heading = line[hashes..].trim().trim_end_matches('#').trim_end();
            let base = slug(heading);
            let n = seen.entry(base.clone()).or_insert(0);
            anchors.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for part in line.split("id=\"").skip(1) {
            if let Some(end) = part.find('"') {
                anchors.insert(part[..end].to_owned());
            }
        }
    }
    anchors
}

/// Byte ranges of the code spans of a paragraph: a run of N backticks up to the next run of
/// exactly N (an unmatched run is literal).
fn code_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let run = |at: usize| bytes[at..].iter().take_while(|b| **b == b'`').count();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let m = run(j);
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                spans.push((i, end));
                i = end;
            }
            None => i += n,
        }
    }
    spans
}

/// The paragraphs of a doc's prose (code spans may run over lines, never over a blank one),
/// each with the number of its first line.
fn paragraphs(text: &str) -> Vec<(usize, String)> {
    let mut paragraphs: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    let mut last = 0;
    for (number, line) in prose(text) {
        // A blank line or a fenced block ends a paragraph.
        if line.trim().is_empty() || number != last + 1 {
            open = false;
        }
        last = number;
        if line.trim().is_empty() {
            continue;
        }
        match paragraphs.last_mut() {
            Some((_, text)) if open => {
                text.push('\n');
                text.push_str(line);
            }
            _ => {
                paragraphs.push((number, line.to_owned()));
                open = true;
            }
        }
    }
    paragraphs
}

/// The markdown links of a doc outside code: (line, target).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    for (first, paragraph) in paragraphs(text) {
        let spans = code_spans(&paragraph);
        let in_code = |at: usize| spans.iter().any(|(s, e)| (*s..*e).contains(&at));
        let mut from = 0;
        while let Some(found) = paragraph[from..].find("](") {
            let at = from + found;
            from = at + 2;
            if in_code(at) || !paragraph[..at].contains('[') {
                continue;
            }
            let rest = &paragraph[at + 2..];
            let mut depth = 0;
            let end = rest
                .char_indices()
                .find(|(_, c)| match c {
                    '(' => {
                        depth += 1;
                        false
                    }
                    ')' if depth == 0 => true,
                    ')' => {
                        depth -= 1;
                        false
                    }
                    c => c.is_whitespace(),
                })
                .map_or(rest.len(), |(i, _)| i);
            let line = first + paragraph[..at].matches('\n').count();
            links.push((line, rest[..end].to_owned()));
        }
    }
    links
}

/// Where a link leads: the target file relative to the root (the doc itself for `#x`) and
/// its anchor; `None` for a link off this repository.
fn resolve(doc: &str, target: &str) -> Option<(String, Option<String>)> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor.to_owned())),
        None => (target, None),
    };
    if path.is_empty() {
        return Some((doc.to_owned(), anchor));
    }
    let dir = Path::new(doc).parent().unwrap_or(Path::new(""));
    let mut parts: Vec<String> = Vec::new();
    for part in dir.join(path).components() {
        match part.as_os_str().to_str().unwrap() {
            ".." => {
                parts.pop();
            }
            "." => {}
            part => parts.push(part.to_owned()),
        }
    }
    Some((parts.join("/"), anchor))
}

/// What is wrong with a link to `file#anchor`, if anything.
fn check(
    file: &str,
    anchor: Option<&str>,
    cache: &mut BTreeMap<String, BTreeSet<String>>,
) -> Option<String> {
    let path = root().join(file);
    if !path.exists() {
        return Some(format!("{file} does not exist"));
    }
    let anchor = anchor?;
    if !file.ends_with(".md") {
        return Some(format!("{file} is not markdown: no anchor `{anchor}`"));
    }
    let anchors = cache
        .entry(file.to_owned())
        .or_insert_with(|| anchors(&read(&path)));
    (!anchors.contains(anchor)).then(|| format!("no heading `#{anchor}` in {file}"))
}

/// Every broken link of the docs.
fn broken_doc_links() -> Vec<String> {
    let mut cache = BTreeMap::new();
    let mut broken = Vec::new();
    for doc in docs() {
        for (line, target) in links(&read(&root().join(&doc))) {
            let Some((file, anchor)) = resolve(&doc, &target) else {
                continue;
            };
            if let Some(why) = check(&file, anchor.as_deref(), &mut cache) {
                broken.push(format!("{doc}:{line}: ({target}): {why}"));
            }
        }
    }
    broken
}

#[test]
fn every_link_of_the_docs_leads_to_a_file_and_a_heading() {
    let broken = broken_doc_links();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The top folders whose paths a doc may name in backticks.
const TOP: [&str; 8] = [
    "crates/",
    "deploy/",
    "docs/",
    "examples/",
    "migrations/",
    "scripts/",
    "fixtures/",
    "tools/",
];

/// The header of docs/ARCHITECTURE.md's table of the paths that applied migrations (never
/// edited) still name, beside where each is now.
const MIGRATIONS_SAY: &str = "| migration says | now |";

#[test]
fn every_repository_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    for doc in docs() {
        for (first, paragraph) in paragraphs(&read(&root().join(&doc))) {
            // The migrations' table names the paths their comments say, which are gone.
            if paragraph.starts_with(MIGRATIONS_SAY) {
                continue;
            }
            for (start, end) in code_spans(&paragraph) {
                let code = paragraph[start..end].trim_matches('`').trim();
                // A path, not a command or a pattern: one word, no placeholder or glob.
                let is_path = TOP.iter().any(|top| code.starts_with(top))
                    && !code.contains(char::is_whitespace)
                    && !code.contains(['*', '<', '{', '…'])
                    && !code.contains("NNNN");
                let path = code.split_once(':').map_or(code, |(path, _)| path);
                if is_path && !root().join(path).exists() {
                    let line = first + paragraph[..start].matches('\n').count();
                    missing.push(format!("{doc}:{line}: `{code}`"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// A cited doc section: the citing file and line, the doc, the anchor.
type Citation = (String, usize, String, String);

/// Every `docs/<doc>.md#<anchor>` and `README.md#<anchor>` in the text files under `path`.
fn citations(path: &Path, found: &mut Vec<Citation>) {
    if path.is_dir() {
        if path.file_name().is_some_and(|name| name == "target") {
            return;
        }
        for entry in std::fs::read_dir(path).unwrap() {
            citations(&entry.unwrap().path(), found);
        }
        return;
    }
    // Binary files (and other non-UTF-8 ones) cite nothing.
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let name = path
        .strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string();
    // This file's examples are not citations.
    if name.ends_with("tests/docs_links.rs") {
        return;
    }
    for (i, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(found_at) = line[from..].find(".md#") {
            let at = from + found_at;
            from = at + 4;
            let start = line[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
                .map_or(0, |i| i + 1);
            let doc = format!("{}.md", &line[start..at]);
            let anchor: String = line[at + 4..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            if (doc.starts_with("docs/") || doc == "README.md") && !anchor.is_empty() {
                found.push((name.clone(), i + 1, doc, anchor));
            }
        }
    }
}

#[test]
fn every_doc_anchor_the_code_cites_is_a_heading() {
    let mut found = Vec::new();
    for path in [
        "crates",
        "examples",
        "deploy",
        "scripts",
        "migrations",
        ".ci",
        "Makefile",
        "Containerfile",
    ] {
        citations(&root().join(path), &mut found);
    }
    assert!(
        found.len() > 50,
        "the code cites the docs' sections: {} citations found",
        found.len()
    );
    let mut cache = BTreeMap::new();
    let broken: Vec<String> = found
        .iter()
        .filter_map(|(file, line, doc, anchor)| {
            check(doc, Some(anchor), &mut cache)
                .map(|why| format!("{file}:{line}: {doc}#{anchor}: {why}"))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "broken citations:\n{}",
        broken.join("\n")
    );
}

#[test]
fn links_and_slugs_are_read_as_github_renders_them() {
    assert_eq!(
        slug("Configuration (`sluice run --help` lists them too)"),
        "configuration-sluice-run---help-lists-them-too"
    );
    assert_eq!(
        slug("The CDC option: Debezium instead of `sluice dispatch`"),
        "the-cdc-option-debezium-instead-of-sluice-dispatch"
    );
    assert_eq!(slug("batch-loop"), "batch-loop");
    assert_eq!(slug("A [linked](x.md) *word*"), "a-linked-word");
    let text = "# T\n## A b\n## A b\n```\n## not a heading\n```\n";
    assert_eq!(
        anchors(text),
        BTreeSet::from(["t".to_owned(), "a-b".to_owned(), "a-b-1".to_owned()])
    );
    let text = "See [`x`](docs/x.md#a-b) and `[not](a link)`, ![img](p.png)\n\
                over ``a `[c](d)` span``.\n\n```\n[code](block.md)\n```\n[last](#t)";
    assert_eq!(
        links(text),
        [
            (1, "docs/x.md#a-b".to_owned()),
            (1, "p.png".to_owned()),
            (7, "#t".to_owned())
        ]
    );
    assert_eq!(
        paragraphs("a\nb\n\nc\n```\nx\n```\nd"),
        [
            (1, "a\nb".to_owned()),
            (4, "c".to_owned()),
            (8, "d".to_owned())
        ]
    );
    assert_eq!(
        resolve("docs/a.md", "../README.md#x"),
        Some(("README.md".to_owned(), Some("x".to_owned())))
    );
    assert_eq!(
        resolve("docs/a.md", "#y"),
        Some(("docs/a.md".to_owned(), Some("y".to_owned())))
    );
    assert_eq!(resolve("README.md", "https://example.com/#z"), None);
}
