//! How sluice connects, against the real server (which offers TLS: `scripts/stack` runs it
//! with `ssl=on`): `sslmode=prefer` (libpq's default) never settles for plaintext when TLS is
//! offered, `disable` really is plaintext, every connection carries its `sluice-<role>` name,
//! and a Unix-socket URL works.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sluice_postgres::connect::connect;
use std::path::PathBuf;

fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

async fn ssl_and_name(url: &str, role: &str) -> (bool, String) {
    let mut conn = connect(url, role)
        .await
        .unwrap_or_else(|e| panic!("connect {role}: {e}"));
    sqlx::query_as(
        "SELECT s.ssl, a.application_name FROM pg_stat_ssl s
         JOIN pg_stat_activity a USING (pid) WHERE pid = pg_backend_pid()",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn prefer_encrypts_when_the_server_offers_tls_and_disable_does_not() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let url = &stack.database_url;
    assert!(
        !url.contains("sslmode"),
        "the plaintext test URL sets no sslmode: {url}"
    );
    // No sslmode at all means prefer, as with libpq.
    assert_eq!(
        ssl_and_name(url, "probe").await,
        (true, "sluice-probe".to_owned())
    );
    let prefer = with_param(url, "sslmode=prefer");
    assert_eq!(
        ssl_and_name(&prefer, "prefer").await,
        (true, "sluice-prefer".to_owned())
    );
    let disable = with_param(url, "sslmode=disable");
    assert_eq!(
        ssl_and_name(&disable, "disable").await,
        (false, "sluice-disable".to_owned())
    );
    let named = with_param(url, "application_name=billing");
    assert_eq!(ssl_and_name(&named, "x").await.1, "billing");
}

#[tokio::test]
async fn a_unix_socket_url_connects() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let script = PathBuf::from(
        std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)"),
    );
    let dir = script
        .parent()
        .and_then(|scripts| scripts.parent())
        .unwrap()
        .join(".stack/pg/run");
    let port = std::env::var("SLUICE_PG_PORT").expect("SLUICE_PG_PORT (from scripts/stack env)");
    let socket = dir.join(format!(".s.PGSQL.{port}"));
    // scripts/stack only puts the socket there when the path fits the kernel's limit.
    if dir.as_os_str().len() + 16 > 107 {
        eprintln!(
            "the stack has no socket directory (path too long): {}",
            dir.display()
        );
        return;
    }
    assert!(socket.exists(), "no socket at {}", socket.display());
    let database = stack.database_url.rsplit('/').next().unwrap();
    let url = format!(
        "postgres:///{database}?user=sluice&host={}&port={port}",
        dir.display()
    );
    let mut conn = connect(&url, "socket").await.unwrap();
    let over_socket: bool = sqlx::query_scalar("SELECT inet_server_addr() IS NULL")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(over_socket, "connected over the Unix socket, not TCP");
}
