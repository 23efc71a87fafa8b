use super::*;

/// A valid `DATABASE_URL` and `pairs` (which may replace it).
fn settings(pairs: &[(&str, &str)]) -> Result<OutboxSettings, SettingsError> {
    let mut map: BTreeMap<String, String> = [(
        "DATABASE_URL".to_owned(),
        "postgres://u@127.0.0.1:5432/db".to_owned(),
    )]
    .into();
    for (k, v) in pairs {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    OutboxSettings::from_map(&map, "host-1")
}

#[test]
fn defaults() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.kafka.bootstrap_servers, "127.0.0.1:9092");
    assert_eq!(s.batch_size, 100);
    assert_eq!(s.poll_interval, Duration::from_millis(1000));
    assert_eq!(s.max_attempts, 10);
    assert_eq!(s.backoff_base, Duration::from_millis(500));
    assert_eq!(s.stale_dispatch, Duration::from_secs(60));
    assert_eq!(s.delivery_timeout, Duration::from_secs(30));
    assert_eq!(s.send_window(), Duration::from_secs(29));
    assert_eq!(s.retention, Duration::from_secs(7 * 86_400));
    assert_eq!(s.dispatcher_id, "host-1");
    let s = settings(&[("OUTBOX_DISPATCHER_ID", " d2 "), ("OUTBOX_BATCH_SIZE", "7")]).unwrap();
    assert_eq!(s.dispatcher_id, "d2");
    assert_eq!(s.batch_size, 7);
}

#[test]
fn each_invalid_value_names_its_variable() {
    for (name, value) in [
        ("OUTBOX_BATCH_SIZE", "0"),
        ("OUTBOX_BATCH_SIZE", "99999999999"),
        ("OUTBOX_POLL_INTERVAL_MS", "soon"),
        ("OUTBOX_MAX_ATTEMPTS", "-1"),
        ("OUTBOX_BACKOFF_BASE_MS", "1.5"),
        ("OUTBOX_STALE_DISPATCH_SECONDS", "0"),
        ("OUTBOX_RETENTION_DAYS", "100000"),
        ("OUTBOX_DELIVERY_TIMEOUT_MS", "50"),
        ("OUTBOX_DELIVERY_TIMEOUT_MS", "ten"),
        ("DATABASE_URL", "mysql://x"),
        ("KAFKA_ACKS", "1"),
        ("KAFKA_BOOTSTRAP_SERVERS", "no-port"),
    ] {
        let error = settings(&[(name, value)]).unwrap_err();
        assert_eq!(error.variable(), name, "{name}={value}");
    }
    let missing = OutboxSettings::from_map(&BTreeMap::new(), "h").unwrap_err();
    assert_eq!(missing.variable(), "DATABASE_URL");
}

#[test]
fn stale_timeout_must_exceed_the_delivery_timeout() {
    // The old defaults (stale 60 s, producer timeout 120 s) are refused, naming both.
    let error = settings(&[("OUTBOX_DELIVERY_TIMEOUT_MS", "120000")]).unwrap_err();
    assert_eq!(error.variable(), "OUTBOX_STALE_DISPATCH_SECONDS");
    assert!(
        error.expected().contains("OUTBOX_DELIVERY_TIMEOUT_MS"),
        "{error:?}"
    );
    // Exactly delivery + margin + the shortest send window is accepted, 1 ms more is not.
    let ok = settings(&[
        ("OUTBOX_STALE_DISPATCH_SECONDS", "5"),
        ("OUTBOX_DELIVERY_TIMEOUT_MS", "3000"),
    ])
    .unwrap();
    assert_eq!(ok.send_window(), Duration::from_secs(1));
    let error = settings(&[
        ("OUTBOX_STALE_DISPATCH_SECONDS", "5"),
        ("OUTBOX_DELIVERY_TIMEOUT_MS", "3001"),
    ])
    .unwrap_err();
    assert_eq!(error.variable(), "OUTBOX_STALE_DISPATCH_SECONDS");
    // A stale timeout alone below the default delivery timeout is refused too.
    let error = settings(&[("OUTBOX_STALE_DISPATCH_SECONDS", "5")]).unwrap_err();
    assert_eq!(error.variable(), "OUTBOX_STALE_DISPATCH_SECONDS");
    // For every accepted pair, the send window plus the delivery timeout plus the margin
    // fits in the stale timeout.
    for stale in 1..=40_u64 {
        for delivery in (100..=40_000_u64).step_by(700) {
            if let Ok(s) = settings(&[
                ("OUTBOX_STALE_DISPATCH_SECONDS", &stale.to_string()),
                ("OUTBOX_DELIVERY_TIMEOUT_MS", &delivery.to_string()),
            ]) {
                assert!(s.send_window() >= MIN_SEND_WINDOW);
                assert!(s.send_window() + s.delivery_timeout + STALE_MARGIN <= s.stale_dispatch);
            }
        }
    }
}

#[test]
fn the_table_lists_every_variable_the_parser_reads_and_no_other() {
    let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let map: BTreeMap<String, String> = [
        ("DATABASE_URL", "postgres://u@127.0.0.1:5432/db"),
        ("KAFKA_SECURITY_PROTOCOL", "SSL"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    let lookup = |name: &str| {
        asked.borrow_mut().insert(name.to_owned());
        map.get(name).cloned()
    };
    let s = OutboxSettings::from_vars(&lookup, map.keys().map(String::as_str), "h").unwrap();
    let (table, asked) = (variables(), asked.into_inner());
    for name in &asked {
        assert!(
            table.iter().any(|row| row.matches(name)),
            "{name} is not in the table"
        );
    }
    for row in &table {
        assert!(
            asked.iter().any(|name| row.matches(name)),
            "{} never read",
            row.name
        );
    }
    let default = |var: &str| {
        let row = table.iter().find(|row| row.name == var).unwrap();
        row.default.to_string()
    };
    assert_eq!(default("OUTBOX_BATCH_SIZE"), s.batch_size.to_string());
    let delivery = s.delivery_timeout.as_millis().to_string();
    assert_eq!(default("OUTBOX_DELIVERY_TIMEOUT_MS"), delivery);
    assert!(
        table
            .iter()
            .any(|row| row.name == "DATABASE_URL" && row.secret)
    );
}

#[test]
fn backoff_doubles_and_is_capped() {
    let s = settings(&[]).unwrap();
    let delays: Vec<_> = (1..=4).map(|a| s.backoff(a).as_millis()).collect();
    assert_eq!(delays, vec![500, 1000, 2000, 4000]);
    assert_eq!(s.backoff(20), MAX_BACKOFF);
    assert_eq!(s.backoff(u32::MAX), MAX_BACKOFF);
}

#[test]
fn failure_after_the_attempt_limit() {
    let s = settings(&[("OUTBOX_MAX_ATTEMPTS", "3")]).unwrap();
    assert_eq!(
        s.after_failed_publish(0, 0.0),
        AfterFailedPublish::Retry {
            attempts: 1,
            delay: Duration::from_millis(500)
        }
    );
    assert_eq!(
        s.after_failed_publish(1, 0.0),
        AfterFailedPublish::Retry {
            attempts: 2,
            delay: Duration::from_millis(1000)
        }
    );
    assert_eq!(
        s.after_failed_publish(2, 0.0),
        AfterFailedPublish::GiveUp { attempts: 3 }
    );
    assert_eq!(
        s.after_failed_publish(1, 0.5),
        AfterFailedPublish::Retry {
            attempts: 2,
            delay: Duration::from_millis(950)
        },
        "jitter takes up to a tenth off"
    );
    let once = settings(&[("OUTBOX_MAX_ATTEMPTS", "1")]).unwrap();
    assert_eq!(
        once.after_failed_publish(0, 0.0),
        AfterFailedPublish::GiveUp { attempts: 1 }
    );
}

#[test]
fn a_misspelt_outbox_variable_is_an_error_naming_it() {
    let error = settings(&[("OUTBOX_RETENTIONDAYS", "30")]).unwrap_err();
    let said = error.to_string();
    assert!(
        said.contains("OUTBOX_RETENTIONDAYS") && said.contains("OUTBOX_RETENTION_DAYS"),
        "{said}"
    );
    // Empty counts as unset; every variable the dispatcher reads is accepted.
    assert!(settings(&[("OUTBOX_RETENTIONDAYS", " ")]).is_ok());
    let all: Vec<(&str, &str)> = vec![
        ("OUTBOX_BATCH_SIZE", "10"),
        ("OUTBOX_BATCH_BYTES", "1048576"),
        ("OUTBOX_POLL_INTERVAL_MS", "100"),
        ("OUTBOX_MAX_ATTEMPTS", "3"),
        ("OUTBOX_BACKOFF_BASE_MS", "100"),
        ("OUTBOX_STALE_DISPATCH_SECONDS", "60"),
        ("OUTBOX_DELIVERY_TIMEOUT_MS", "30000"),
        ("OUTBOX_RETENTION_DAYS", "7"),
        ("OUTBOX_DISPATCHER_ID", "d1"),
    ];
    assert!(settings(&all).is_ok());
}
