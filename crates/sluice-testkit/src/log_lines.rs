//! The log lines a piece of code writes, captured for a unit test: every `tracing` event's
//! fields as text (and its `level`), in the order written.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata};

/// One captured line: field name → value as text, plus `level`.
pub type LogLine = BTreeMap<String, String>;

/// The lines `emit` writes (on this thread, through `tracing`).
pub fn log_lines(emit: impl FnOnce()) -> Vec<LogLine> {
    let lines = Lines::default();
    tracing::subscriber::with_default(lines.clone(), emit);
    let captured = lines.0.lock().unwrap_or_else(PoisonError::into_inner);
    captured.clone()
}

/// A subscriber keeping every event's fields.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<LogLine>>>);

struct Fields<'a>(&'a mut LogLine);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for Lines {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = LogLine::new();
        fields.insert("level".to_owned(), event.metadata().level().to_string());
        event.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
