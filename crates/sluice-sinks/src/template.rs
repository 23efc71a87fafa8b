//! A sink's table named by each record (docs/sinks.md#many-tables): `table = "{topic}"`, a
//! capture of the sink's `topic_pattern` (`"{1}"`, `"raw_{2}"`), or — for a `debezium` sink —
//! the change event's source block (`"{source.schema}.{source.table}"`). Text outside the
//! braces is kept as it is; `{{` and `}}` are a brace.

use std::fmt;

use regex::Regex;

use crate::messages::fields::echo;
use crate::names::is_table_name;

/// A table name with placeholders, parsed from a sink's `table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTemplate {
    parts: Vec<Part>,
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Topic,
    Capture(usize),
    SourceSchema,
    SourceTable,
}

/// What a record gives a template: its topic, the sink's pattern (for captures) and, for a
/// change event, its source block's schema and table.
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    /// The record's topic.
    pub topic: &'a str,
    /// The sink's `topic_pattern`, compiled.
    pub pattern: Option<&'a Regex>,
    /// The change event's `source.schema` and `source.table`.
    pub source: Option<(&'a str, &'a str)>,
}

impl TableTemplate {
    /// The template of `table`; `Ok(None)` when it has no placeholder (a fixed table).
    pub fn parse(table: &str) -> Result<Option<Self>, String> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = table.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(placeholder(&name)?);
                }
                '}' => return Err("a `}` without its `{` (write `}}` for a brace)".into()),
                other => text.push(other),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        if parts.iter().all(|p| matches!(p, Part::Text(_))) {
            return Ok(None);
        }
        Ok(Some(Self { parts }))
    }

    /// The template of one fixed table: every record names `table`.
    pub fn literal(table: &str) -> Self {
        Self {
            parts: vec![Part::Text(table.to_owned())],
        }
    }

    /// Whether it reads a change event's source block.
    pub fn reads_source(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::SourceSchema | Part::SourceTable))
    }

    /// The highest capture group it reads (0: none).
    pub fn highest_capture(&self) -> usize {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Capture(n) => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// The table a record names, or why it names none (a capture the topic does not have, no
    /// source block, a name that is not `[schema.]table`).
    pub fn resolve(&self, named: &Named<'_>) -> Result<String, String> {
        let captures = match (self.highest_capture(), named.pattern) {
            (0, _) => None,
            (_, Some(pattern)) => Some(pattern.captures(named.topic).ok_or_else(|| {
                format!("topic `{}` does not match `topic_pattern`", named.topic)
            })?),
            (_, None) => return Err("a capture without `topic_pattern`".into()),
        };
        let mut table = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => table.push_str(text),
                Part::Topic => table.push_str(named.topic),
                Part::Capture(n) => {
                    let group = captures.as_ref().and_then(|c| c.get(*n));
                    table.push_str(
                        group
                            .ok_or_else(|| {
                                format!("topic `{}` has no capture {{{n}}}", named.topic)
                            })?
                            .as_str(),
                    );
                }
                Part::SourceSchema | Part::SourceTable => {
                    let (schema, name) = named
                        .source
                        .ok_or("the change event has no `source.schema` and `source.table`")?;
                    table.push_str(if *part == Part::SourceSchema {
                        schema
                    } else {
                        name
                    });
                }
            }
        }
        if !is_table_name(&table) {
            return Err(format!(
                "{} is not a table name ([schema.]table, each name 1–63 bytes without '.')",
                echo(&table)
            ));
        }
        Ok(table)
    }
}

/// The part a `{name}` stands for.
fn placeholder(name: &str) -> Result<Part, String> {
    match name {
        "topic" => Ok(Part::Topic),
        "source.schema" => Ok(Part::SourceSchema),
        "source.table" => Ok(Part::SourceTable),
        digits if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) => {
            match digits.parse::<usize>() {
                Ok(n) if (1..=99).contains(&n) => Ok(Part::Capture(n)),
                _ => Err(format!("`{{{name}}}`: captures are numbered 1–99")),
            }
        }
        other => Err(format!(
            "`{{{other}}}` is not a placeholder (`{{topic}}`, `{{1}}`…, `{{source.schema}}`, `{{source.table}}`)"
        )),
    }
}

impl fmt::Display for TableTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Text(text) => f.write_str(&text.replace('{', "{{").replace('}', "}}"))?,
                Part::Topic => f.write_str("{topic}")?,
                Part::Capture(n) => write!(f, "{{{n}}}")?,
                Part::SourceSchema => f.write_str("{source.schema}")?,
                Part::SourceTable => f.write_str("{source.table}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn named<'a>(topic: &'a str, pattern: Option<&'a Regex>) -> Named<'a> {
        Named {
            topic,
            pattern,
            source: None,
        }
    }

    #[test]
    fn a_table_without_placeholders_is_fixed_and_braces_are_doubled() {
        assert_eq!(TableTemplate::parse("public.orders").unwrap(), None);
        assert_eq!(TableTemplate::parse("a{{b}}").unwrap(), None);
        let t = TableTemplate::parse("raw_{topic}").unwrap().unwrap();
        assert_eq!(t.to_string(), "raw_{topic}");
        assert_eq!(t.resolve(&named("orders", None)).unwrap(), "raw_orders");
    }

    #[test]
    fn captures_come_from_the_pattern_and_the_source_block_from_the_event() {
        let pattern = regex::Regex::new(r"^(?:cdc\.([a-z]+)\.([a-z_]+))$").unwrap();
        let t = TableTemplate::parse("{1}.{2}").unwrap().unwrap();
        assert_eq!(t.highest_capture(), 2);
        assert_eq!(
            t.resolve(&named("cdc.shop.order_lines", Some(&pattern)))
                .unwrap(),
            "shop.order_lines"
        );
        let error = t.resolve(&named("other", Some(&pattern))).unwrap_err();
        assert!(error.contains("does not match"), "{error}");
        let source = TableTemplate::parse("{source.schema}.{source.table}")
            .unwrap()
            .unwrap();
        assert!(source.reads_source());
        let event = Named {
            source: Some(("inventory", "Select")),
            ..named("t", None)
        };
        assert_eq!(source.resolve(&event).unwrap(), "inventory.Select");
        let error = source.resolve(&named("t", None)).unwrap_err();
        assert!(error.contains("source.schema"), "{error}");
    }

    #[test]
    fn what_names_no_table_says_why() {
        for (bad, why) in [
            ("{nope}", "not a placeholder"),
            ("{0}", "1–99"),
            ("a}", "without its `{`"),
        ] {
            let error = TableTemplate::parse(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
        let t = TableTemplate::parse("{topic}").unwrap().unwrap();
        let error = t.resolve(&named("cdc.public.orders", None)).unwrap_err();
        assert!(error.contains("not a table name"), "{error}");
        let error = t.resolve(&named(&"x".repeat(70), None)).unwrap_err();
        assert!(error.contains("not a table name"), "{error}");
    }
}
