//! What `sluice dlq` (the dead-letter table) and `sluice dlt` (the dead-letter topic) share:
//! bytes as printed, JSON output, the replay limit and the replay report.
//!
//! Keys, payloads, headers and reasons hold bytes from the message: the text output escapes
//! their control characters (an ANSI or OSC sequence, a newline) and the JSON output escapes
//! the ones a JSON serializer leaves raw, so printing a dead letter cannot drive the terminal.

use anyhow::anyhow;
use serde::Serialize;
use sluice_core::untrusted::{escape_controls, escape_json_text};
use sluice_process::Failure;

/// Bytes as printed: UTF-8 text, or hex when they are not valid UTF-8.
#[derive(Debug, Serialize)]
#[serde(tag = "encoding", content = "data", rename_all = "lowercase")]
pub(super) enum Payload {
    Utf8(String),
    Hex(String),
}

impl Payload {
    /// `bytes` as text, or as hex when they are not valid UTF-8.
    pub(super) fn of(bytes: &[u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => Payload::Utf8(text.to_owned()),
            Err(_) => Payload::Hex(bytes.iter().map(|b| format!("{b:02x}")).collect()),
        }
    }

    /// On one line: the escaped text, or `(hex) …`.
    pub(super) fn text(&self) -> String {
        match self {
            Payload::Utf8(text) => escape_controls(text).into_owned(),
            Payload::Hex(hex) => format!("(hex) {hex}"),
        }
    }
}

/// Prints the headers of `show` in order, one a line: `  name: value` (`(null)` for a header
/// without a value, `(hex) …` for one that is not UTF-8), under a `headers:` line
/// (`headers: (none)` without any).
pub(super) fn print_headers(headers: &[(String, Option<Payload>)]) {
    if headers.is_empty() {
        println!("headers: (none)");
        return;
    }
    println!("headers:");
    for (name, value) in headers {
        println!(
            "  {}: {}",
            escape_controls(name),
            value
                .as_ref()
                .map_or_else(|| "(null)".to_owned(), Payload::text)
        );
    }
}

/// Prints the key and the payload of `show`, each under its own label line.
pub(super) fn print_key_and_payload(key: Option<&Payload>, payload: Option<&Payload>) {
    for (label, value) in [("key", key), ("payload", payload)] {
        match value {
            None => println!("{label}: (null)"),
            Some(Payload::Utf8(text)) => println!("{label} (utf-8):\n{}", escape_controls(text)),
            Some(Payload::Hex(hex)) => println!("{label} (hex, not valid UTF-8):\n{hex}"),
        }
    }
}

/// Prints a value as pretty JSON with no raw control character.
pub(super) fn print_json<T: Serialize>(value: &T) -> Result<(), Failure> {
    let json = serde_json::to_string_pretty(value)?;
    println!("{}", escape_json_text(&json));
    Ok(())
}

pub(super) use sluice_core::dead_letter::replay_limit_refusal;

/// The action of a dry run: where a dead letter would be re-published, as which replay.
pub(super) fn would_republish(topic: &str, replay: i32) -> String {
    format!("would re-publish to {topic} (replay {replay})")
}

/// The lines of a replay, one per chosen dead letter, and how many of them were refused.
#[derive(Debug)]
pub(super) struct ReplayReport<L> {
    /// One line per chosen dead letter.
    pub lines: Vec<L>,
    /// How many were refused.
    pub refused: usize,
}

impl<L: Serialize> ReplayReport<L> {
    /// An empty report with room for `chosen` lines.
    pub(super) fn with_capacity(chosen: usize) -> Self {
        ReplayReport {
            lines: Vec::with_capacity(chosen),
            refused: 0,
        }
    }

    /// The action of a refused dead letter (counted).
    pub(super) fn refuse(&mut self, why: &str) -> String {
        self.refused += 1;
        format!("refused: {why}")
    }

    /// Prints the lines (JSON, or `text` of each line, `empty` when there are none, and the
    /// dry-run note); fails when every chosen dead letter was refused (`what` names them).
    pub(super) fn print(
        &self,
        json: bool,
        execute: bool,
        text: impl Fn(&L) -> String,
        empty: Option<&str>,
        what: &str,
    ) -> Result<(), Failure> {
        if json {
            print_json(&self.lines)?;
        } else {
            for line in &self.lines {
                println!("{}", text(line));
            }
            if let Some(empty) = empty.filter(|_| self.lines.is_empty()) {
                println!("{empty}");
            }
            if !execute {
                println!("dry run: nothing published; add --execute");
            }
        }
        if self.refused > 0 && self.refused == self.lines.len() {
            return Err(anyhow!("every chosen {what} was refused").into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_print_as_text_or_hex() {
        assert!(matches!(Payload::of(b"ok"), Payload::Utf8(t) if t == "ok"));
        let hex = Payload::of(&[0xff, 0x00, 0x1b]);
        assert!(matches!(&hex, Payload::Hex(h) if h == "ff001b"));
        assert_eq!(hex.text(), "(hex) ff001b");
        assert_eq!(
            Payload::of(b"a\x1b[31m").text(),
            escape_controls("a\x1b[31m")
        );
    }

    #[test]
    fn a_replay_fails_only_when_every_chosen_one_was_refused() {
        let mut report = ReplayReport::with_capacity(2);
        let refused = report.refuse("no");
        report.lines.push(refused);
        report.lines.push("ok".to_owned());
        assert!(report.print(true, false, Clone::clone, None, "x").is_ok());
        let mut all = ReplayReport::<String>::with_capacity(1);
        let refused = all.refuse("no");
        all.lines.push(refused);
        assert!(all.print(true, false, Clone::clone, None, "x").is_err());
        let none = ReplayReport::<String>::with_capacity(0);
        assert!(none.print(true, false, Clone::clone, None, "x").is_ok());
    }
}
