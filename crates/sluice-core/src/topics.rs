//! The topics a sink reads: named ones, or every topic whose name matches a pattern — the
//! ones that exist now and the ones created later.
//!
//! Invariant: one matching rule everywhere. The consumer, `sluice lag`, `sluice replay` and
//! `sluice verify` all select topics with [`Topics::select`], so they agree on which topics a
//! pattern covers (a pattern matches the *whole* name, as Kafka's Java clients' pattern
//! subscription does; Kafka's internal topics, whose names start with `__`, never match).

use std::fmt;

/// The longest pattern accepted (a pattern is compiled every few seconds by the consumer).
pub const MAX_PATTERN_CHARS: usize = 1000;

/// The topics of a sink (as JSON: `{"named": [...]}` or `{"pattern": "..."}`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Topics {
    /// These topics, one or more, in the file's order.
    Named(Vec<String>),
    /// Every topic whose whole name matches this regular expression (Rust `regex` syntax).
    Pattern(String),
}

impl Topics {
    /// One named topic.
    pub fn one(topic: impl Into<String>) -> Self {
        Self::Named(vec![topic.into()])
    }

    /// The named topics (none for a pattern).
    pub fn named(&self) -> &[String] {
        match self {
            Self::Named(topics) => topics,
            Self::Pattern(_) => &[],
        }
    }

    /// Whether it is a pattern (the topics it covers change while running).
    pub fn is_pattern(&self) -> bool {
        matches!(self, Self::Pattern(_))
    }

    /// The pattern compiled to match whole names; `Err` names what is wrong with it.
    pub fn compile(pattern: &str) -> Result<regex::Regex, String> {
        if pattern.is_empty() || pattern.chars().count() > MAX_PATTERN_CHARS {
            return Err(format!("a pattern has 1–{MAX_PATTERN_CHARS} characters"));
        }
        regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| e.to_string())
    }

    /// Whether `topic` is one of them.
    pub fn covers(&self, topic: &str) -> bool {
        match self {
            Self::Named(topics) => topics.iter().any(|t| t == topic),
            Self::Pattern(pattern) => {
                !topic.starts_with("__")
                    && Self::compile(pattern).is_ok_and(|re| re.is_match(topic))
            }
        }
    }

    /// Of `existing` topic names, the ones it covers, sorted and without repeats. Named topics
    /// are returned whether or not they exist (the caller reports the missing ones).
    pub fn select<'a>(&self, existing: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut out: Vec<String> = match self {
            Self::Named(topics) => topics.clone(),
            Self::Pattern(pattern) => match Self::compile(pattern) {
                Ok(re) => existing
                    .into_iter()
                    .filter(|t| !t.starts_with("__") && re.is_match(t))
                    .map(str::to_owned)
                    .collect(),
                Err(_) => Vec::new(),
            },
        };
        out.sort();
        out.dedup();
        out
    }
}

impl fmt::Display for Topics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Named(topics) => f.write_str(&topics.join(", ")),
            Self::Pattern(pattern) => write!(f, "topics matching /{pattern}/"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_names_and_never_an_internal_topic() {
        let cdc = Topics::Pattern(r"cdc\.public\..*".into());
        let existing = [
            "cdc.public.orders",
            "cdc.public.items",
            "xcdc.public.orders",
            "cdc.publicx",
            "__consumer_offsets",
        ];
        assert_eq!(
            cdc.select(existing),
            ["cdc.public.items", "cdc.public.orders"]
        );
        assert!(cdc.covers("cdc.public.new") && !cdc.covers("cdc.public"));
        // `^…$` written by the user are harmless; `__` topics stay out even if matched.
        let all = Topics::Pattern("^.*$".into());
        assert_eq!(all.select(existing).len(), 4);
        assert!(!all.covers("__consumer_offsets"));
    }

    #[test]
    fn named_topics_are_selected_whether_or_not_they_exist() {
        let named = Topics::Named(vec!["b".into(), "a".into(), "b".into()]);
        assert_eq!(named.select(["a"]), ["a", "b"]);
        assert!(named.covers("a") && !named.covers("c"));
        assert_eq!(named.to_string(), "b, a, b");
        assert_eq!(Topics::one("x").named(), ["x"]);
    }

    #[test]
    fn a_bad_pattern_is_refused_with_the_reason() {
        assert!(Topics::compile("(").unwrap_err().contains("unclosed"));
        assert!(Topics::compile("").is_err());
        assert!(Topics::compile(&"a".repeat(MAX_PATTERN_CHARS + 1)).is_err());
        assert!(Topics::compile("a|b").unwrap().is_match("b"));
        assert!(!Topics::compile("a|b").unwrap().is_match("ab"), "anchored");
    }
}
