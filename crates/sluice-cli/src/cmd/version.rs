//! `sluice version`: what this binary can talk to — sluice's version, librdkafka's version
//! and its `builtin.features` (TLS, SASL mechanisms, compression codecs).

use sluice_process::Failure;

/// Entry point.
pub fn run() -> Result<(), Failure> {
    let (librdkafka, features) = sluice_kafka::config::librdkafka_build()?;
    println!("sluice {}", env!("CARGO_PKG_VERSION"));
    println!("librdkafka {librdkafka}");
    println!("builtin.features {}", features.join(","));
    Ok(())
}
