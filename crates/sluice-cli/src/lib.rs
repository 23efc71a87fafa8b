//! The commands of the `sluice` binary, as a library: `main.rs` dispatches to them, and
//! `sluice-lab` (demo, load generators, benchmarks) reuses the settings, migrations and lag
//! helpers without being part of the production binary. The process shell (`.env`, logging,
//! stop signals, the HTTP endpoint, exit codes) is `sluice-process`.
//!
//! Exit codes: 0 success; 1 runtime failure (a pipeline died, a step failed); 2 bad
//! configuration or usage (nothing was consumed).

pub mod cmd;
