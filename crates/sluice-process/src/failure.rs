//! A failure and its exit code: 1 when something failed at run time, 2 when the
//! configuration or the usage was bad (nothing was consumed).

/// A failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl Failure {
    /// Bad configuration or usage: exit 2.
    pub fn config(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }

    /// The exit code: 1 or 2.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The error.
    pub fn error(&self) -> &anyhow::Error {
        &self.error
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    /// Exit 1, or 2 when a setting was found unusable on the way
    /// ([`UnusableSetting`](sluice_core::settings::UnusableSetting) among the causes).
    fn from(error: E) -> Self {
        let error = error.into();
        let unusable = error.chain().any(|cause| {
            cause
                .downcast_ref::<sluice_core::settings::UnusableSetting>()
                .is_some()
        });
        Self {
            code: if unusable { 2 } else { 1 },
            error,
        }
    }
}

/// The error and its causes, each cause once: our error types already print their source
/// inline, so anyhow's `{:#}` would repeat it.
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Inline(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Apart(#[source] std::io::Error);

    fn io(text: &str) -> std::io::Error {
        std::io::Error::other(text.to_owned())
    }

    #[test]
    fn a_setting_found_unusable_on_the_way_exits_2() {
        let unusable = sluice_core::settings::UnusableSetting("sslkey".into());
        let failure = Failure::from(anyhow::Error::new(Apart2(Box::new(unusable))).context("x"));
        assert_eq!(failure.code(), 2);
        assert_eq!(Failure::from(io("disk full")).code(), 1);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("connecting")]
    struct Apart2(#[source] Box<dyn std::error::Error + Send + Sync>);

    #[test]
    fn a_cause_printed_inline_is_not_repeated() {
        let error = anyhow::Error::new(Inline(io("disk full")));
        assert_eq!(describe(&error), "outer: disk full");
    }

    #[test]
    fn a_cause_not_printed_inline_is_appended() {
        let error = anyhow::Error::new(Apart(io("disk full")));
        assert_eq!(describe(&error), "outer: disk full");
        let error = anyhow::Error::new(Apart(io("disk full"))).context("writing");
        assert_eq!(describe(&error), "writing: outer: disk full");
    }

    #[test]
    fn configuration_is_exit_2_and_anything_else_exit_1() {
        assert_eq!(Failure::config(io("bad")).code(), 2);
        assert_eq!(Failure::from(io("broke")).code(), 1);
        assert_eq!(Failure::from(io("broke")).error().to_string(), "broke");
    }
}
