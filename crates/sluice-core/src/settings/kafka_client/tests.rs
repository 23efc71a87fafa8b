use super::*;

fn read(pairs: &[(&str, &str)]) -> Result<KafkaClientSettings, SettingsError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    KafkaClientSettings::from_vars(&|n| map.get(n).cloned(), map.keys().map(String::as_str))
}

#[test]
fn kafka_variables_become_properties() {
    let s = read(&[
        ("KAFKA_BOOTSTRAP_SERVERS", "b1:9093,b2:9093"),
        ("KAFKA_SECURITY_PROTOCOL", "SASL_SSL"),
        ("KAFKA_SASL_MECHANISM", "SCRAM-SHA-512"),
        ("KAFKA_SSL_CA_LOCATION", "/etc/ca.pem"),
        ("KAFKA_SASL_PASSWORD", " pw "),
        ("KAFKA_LINGER_MS", ""),
        ("KAFKA_HEAP_OPTS", "-Xmx1g"),
        ("STORAGE_PIPELINES", "reviews"),
    ])
    .unwrap();
    assert_eq!(s.bootstrap_servers, "b1:9093,b2:9093");
    let props: Vec<(&str, &str)> = s
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        props,
        vec![
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.password", "pw"),
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", "/etc/ca.pem"),
        ]
    );
    assert_eq!(
        read(&[]).unwrap(),
        KafkaClientSettings::new("127.0.0.1:9092")
    );
}

#[test]
fn guarantees_cannot_be_overridden() {
    for (property, _) in REFUSED {
        let variable = match variable_of(property) {
            // KAFKA_BOOTSTRAP_SERVERS is the bootstrap setting itself.
            v if v == "KAFKA_BOOTSTRAP_SERVERS" => "KAFKA_bootstrap_servers".to_owned(),
            v => v,
        };
        let err = read(&[(variable.as_str(), "x")]).unwrap_err();
        assert_eq!(err.variable(), variable);
        assert!(err.expected().contains(property), "{err}");
    }
    let err = read(&[("KAFKA_ENABLE_AUTO_COMMIT", "true")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid setting KAFKA_ENABLE_AUTO_COMMIT=\"true\": not settable \
         (enable.auto.commit): sluice commits an offset only after the database \
         transaction that holds its effect"
    );
    assert_eq!(
        read(&[("KAFKA_BOOTSTRAP_SERVERS", "nohost")])
            .unwrap_err()
            .variable(),
        "KAFKA_BOOTSTRAP_SERVERS"
    );
}

#[test]
fn secrets_are_redacted() {
    for secret in [
        "sasl.password",
        "ssl.key.password",
        "ssl.key.pem",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.jaas.config",
    ] {
        assert!(is_secret(secret), "{secret}");
    }
    for public in [
        "ssl.key.location",
        "ssl.keystore.location",
        "sasl.username",
        "ssl.ca.location",
    ] {
        assert!(!is_secret(public), "{public}");
    }
    let s = read(&[
        ("KAFKA_SASL_PASSWORD", "hunter2"),
        ("KAFKA_SASL_USERNAME", "alice"),
    ])
    .unwrap();
    let debug = format!("{s:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("alice") && debug.contains("***"), "{debug}");
    let err = read(&[("KAFKA_SSL_KEY_PASSWORD", "k"), ("KAFKA_ACKS", "1")]).unwrap_err();
    assert_eq!(err.variable(), "KAFKA_ACKS");
}

#[test]
fn variable_and_property_names_map_both_ways() {
    assert_eq!(
        property_of("KAFKA_SSL_CA_LOCATION").as_deref(),
        Some("ssl.ca.location")
    );
    assert_eq!(variable_of("ssl.ca.location"), "KAFKA_SSL_CA_LOCATION");
    assert_eq!(property_of("KAFKA_BOOTSTRAP_SERVERS"), None);
    assert_eq!(property_of("KAFKA_"), None);
    assert_eq!(property_of("SLUICE_KAFKA_DEBUG"), None);
}

#[test]
fn a_producer_queue_smaller_than_the_largest_record_is_refused() {
    let base = ("KAFKA_BOOTSTRAP_SERVERS", "b1:9093");
    let small = read(&[base, ("KAFKA_QUEUE_BUFFERING_MAX_KBYTES", "512")]).unwrap_err();
    let text = small.to_string();
    assert!(text.contains("KAFKA_QUEUE_BUFFERING_MAX_KBYTES"), "{text}");
    assert!(text.contains("977"), "{text}");
    assert!(read(&[base, ("KAFKA_QUEUE_BUFFERING_MAX_KBYTES", "977")]).is_ok());
    assert!(read(&[base, ("KAFKA_QUEUE_BUFFERING_MAX_KBYTES", "lots")]).is_err());
    // Against the client's own largest record.
    let larger = [
        base,
        ("KAFKA_QUEUE_BUFFERING_MAX_KBYTES", "4096"),
        ("KAFKA_MESSAGE_MAX_BYTES", "8000000"),
    ];
    assert!(read(&larger).is_err());
    assert!(read(&[base, ("KAFKA_MESSAGE_MAX_BYTES", "8000000")]).is_ok());
}
