//! The page templates, compiled into the binary. Every template is `.html`, so MiniJinja
//! escapes every value it prints; nothing is marked safe.

use minijinja::{Environment, Value};
use serde::Serialize;

/// The loaded templates.
pub struct Templates {
    env: Environment<'static>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Templates")
    }
}

const PAGES: [(&str, &str); 9] = [
    ("base.html", include_str!("templates/base.html")),
    ("pipelines.html", include_str!("templates/pipelines.html")),
    (
        "dead_letters.html",
        include_str!("templates/dead_letters.html"),
    ),
    (
        "dead_letter.html",
        include_str!("templates/dead_letter.html"),
    ),
    ("replay.html", include_str!("templates/replay.html")),
    ("outbox.html", include_str!("templates/outbox.html")),
    ("slots.html", include_str!("templates/slots.html")),
    ("login.html", include_str!("templates/login.html")),
    ("message.html", include_str!("templates/message.html")),
];

impl Templates {
    /// Loads (and so checks) every template.
    pub fn new() -> Result<Self, minijinja::Error> {
        let mut env = Environment::new();
        // Auto-escaping is keyed on the name: every template ends in `.html`.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        for (name, source) in PAGES {
            env.add_template(name, source)?;
        }
        Ok(Self { env })
    }

    /// Renders `name` with `context`.
    pub fn render<S: Serialize>(&self, name: &str, context: S) -> Result<String, minijinja::Error> {
        self.env
            .get_template(name)?
            .render(Value::from_serialize(&context))
    }
}
