//! The build-information metric every command's endpoint serves.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    librdkafka: String,
}

/// Registers `sluice_build_info{version,librdkafka}` (always 1).
pub fn register_build_info(registry: &mut Registry) {
    let info = Family::<BuildLabels, Gauge>::default();
    let librdkafka = sluice_kafka::config::librdkafka_build()
        .map(|(version, _)| version)
        .unwrap_or_else(|_| "unknown".into());
    info.get_or_create(&BuildLabels {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        librdkafka,
    })
    .set(1);
    registry.register(
        "sluice_build_info",
        "sluice's version and the librdkafka it was built with (always 1)",
        info,
    );
}
