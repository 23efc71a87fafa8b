//! The process environment, as the settings readers ask it.

/// The names of the process environment's variables (to find the `KAFKA_*` properties).
pub fn env_names() -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect()
}

/// The process environment; `HOSTNAME`, which shells set without exporting, falls back to
/// the kernel's host name (the default static group member id).
pub fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok().or_else(|| {
        (name == "HOSTNAME")
            .then(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .flatten()
            .map(|h| h.trim().to_owned())
    })
}
