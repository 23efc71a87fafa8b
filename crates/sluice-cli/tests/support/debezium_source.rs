//! A source database streamed by the Debezium PostgreSQL connector in a Kafka Connect
//! standalone worker (`scripts/stack connect`), for the replication tests that stream a whole
//! schema (`tests/replicate_schema.rs`, which includes this file by path; it is not part of
//! `support/mod.rs`, which other crates' tests include too).
//!
//! The database is made for the test; the publication is the test's own (`FOR TABLE …`
//! with `publish_via_partition_root = true`, so a partitioned table's changes carry its root's
//! name), `publication.autocreate.mode=disabled`. Dropping a [`Source`] (also while
//! unwinding) stops the worker, drops the replication slot (a leftover slot pins WAL for the
//! whole cluster) and then the database with its publication.

use crate::support::Env;
use sqlx::{Connection, Executor, PgConnection};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `url` with its database replaced by `database` (query kept).
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').unwrap();
    match query {
        Some(query) => format!("{server}/{database}?{query}"),
        None => format!("{server}/{database}"),
    }
}

/// (host, port) of a `postgres://user@host:port/db` URL.
fn pg_host_port(url: &str) -> (String, String) {
    let rest = url.split("://").nth(1).unwrap();
    let rest = rest.rsplit('@').next().unwrap();
    let authority = rest.split(['/', '?']).next().unwrap();
    let (host, port) = authority.split_once(':').unwrap_or((authority, "5432"));
    (host.to_owned(), port.to_owned())
}

/// The source database and the Connect worker streaming it.
pub struct Source {
    pub database: String,
    pub url: String,
    admin_url: String,
    stack_script: String,
    pub slot: String,
    pub publication: String,
    /// The connector's `topic.prefix`: a table's topic is `<prefix>.<schema>.<table>`.
    pub topic_prefix: String,
    worker: Option<Child>,
    log: PathBuf,
}

impl Source {
    /// Creates the database (named after the test's schema) and runs `ddl` in it.
    pub async fn create(env: &Env, ddl: &str) -> Source {
        let database = format!("{}_src", env.schema.name);
        let admin_url = env.stack.database_url.clone();
        let mut admin = PgConnection::connect(&admin_url).await.unwrap();
        admin
            .execute(format!("CREATE DATABASE {database}").as_str())
            .await
            .unwrap();
        let source = Source {
            url: with_database(&admin_url, &database),
            slot: format!("{database}_slot"),
            publication: format!("{database}_pub"),
            topic_prefix: format!("{}-dbz", env.prefix),
            database,
            admin_url,
            stack_script: std::env::var("SLUICE_STACK")
                .expect("SLUICE_STACK (from scripts/stack env)"),
            worker: None,
            log: env.dir.join("connect.log"),
        };
        let mut conn = source.connect().await;
        sqlx::raw_sql(ddl)
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("source DDL: {e}"));
        source
    }

    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url))
    }

    /// The topic of `schema.table`.
    pub fn topic(&self, schema: &str, table: &str) -> String {
        format!("{}.{schema}.{table}", self.topic_prefix)
    }

    /// `sluice capture` of this source's publication into its topic prefix (its slot made at
    /// the first start), its stderr in `<name>.log` under the test's folder.
    #[allow(
        dead_code,
        reason = "the capture tests' only; replicate_schema.rs includes this file too"
    )]
    pub fn spawn_capture(
        &self,
        env: &Env,
        name: &str,
        extra: &[(&str, &str)],
    ) -> crate::support::Running {
        let log = env.dir.join(format!("{name}.log"));
        let mut cmd = env.sluice(&["capture"]);
        cmd.envs([
            ("DATABASE_URL", self.url.as_str()),
            ("CAPTURE_SLOT", self.slot.as_str()),
            ("CAPTURE_PUBLICATION", self.publication.as_str()),
            ("CAPTURE_TOPIC_PREFIX", self.topic_prefix.as_str()),
            ("CAPTURE_STATUS_INTERVAL_MS", "100"),
        ])
        .envs(extra.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
        crate::support::Running {
            child: cmd.spawn().unwrap(),
            log,
        }
    }

    /// Starts the worker with the JsonConverter (schemas on), the connector reading the
    /// tables `include` matches (Debezium's `table.include.list`, a regular expression) with
    /// `extra` connector properties, and waits until its slot is active.
    pub async fn start_connector(&mut self, env: &Env, include: &str, extra: &str) {
        let (host, port) = pg_host_port(&self.admin_url);
        let worker_file = env.dir.join("worker.properties");
        std::fs::write(
            &worker_file,
            format!(
                "bootstrap.servers={bootstrap}\n\
                 key.converter=org.apache.kafka.connect.json.JsonConverter\n\
                 key.converter.schemas.enable=true\n\
                 value.converter=org.apache.kafka.connect.json.JsonConverter\n\
                 value.converter.schemas.enable=true\n\
                 offset.storage.file.filename={offsets}\n\
                 offset.flush.interval.ms=1000\n\
                 listeners=http://127.0.0.1:{rest}\n",
                bootstrap = env.stack.bootstrap,
                offsets = env.dir.join("offsets.dat").display(),
                rest = crate::support::http::free_port(),
            ),
        )
        .unwrap();
        let connector_file = env.dir.join("connector.properties");
        std::fs::write(
            &connector_file,
            format!(
                "name={database}\n\
                 connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
                 tasks.max=1\n\
                 plugin.name=pgoutput\n\
                 database.hostname={host}\n\
                 database.port={port}\n\
                 database.user=sluice\n\
                 database.password=unused\n\
                 database.dbname={database}\n\
                 topic.prefix={prefix}\n\
                 slot.name={slot}\n\
                 publication.name={publication}\n\
                 publication.autocreate.mode=disabled\n\
                 table.include.list={include}\n\
                 snapshot.mode=initial\n\
                 {extra}",
                database = self.database,
                prefix = self.topic_prefix,
                slot = self.slot,
                publication = self.publication,
            ),
        )
        .unwrap();
        self.worker = Some(
            Command::new(&self.stack_script)
                .arg("connect")
                .args([&worker_file, &connector_file])
                .stdout(std::fs::File::create(&self.log).unwrap())
                .stderr(std::fs::File::create(env.dir.join("connect.err")).unwrap())
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut admin = PgConnection::connect(&self.admin_url).await.unwrap();
        let slot = self.slot.clone();
        crate::support::slots::wait_active(&mut admin, &slot, Duration::from_secs(180), || {
            self.assert_alive();
            self.tail()
        })
        .await;
    }

    /// The last lines of the worker's log.
    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Panics with the worker's log if it has exited.
    pub fn assert_alive(&mut self) {
        if let Some(worker) = &mut self.worker
            && let Some(status) = worker.try_wait().unwrap()
        {
            panic!("the Connect worker exited with {status}:\n{}", self.tail());
        }
    }

    fn psql(&self, sql: &str) -> String {
        crate::support::slots::psql(&self.stack_script, &self.admin_url, sql)
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        if let Some(mut worker) = self.worker.take() {
            let _ = worker.kill();
            let _ = worker.wait();
        }
        crate::support::slots::drop_slot(&self.stack_script, &self.admin_url, &self.slot);
        // The publication goes with the database.
        self.psql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.database
        ));
    }
}

/// Records at the end offsets of `topics` (a topic that does not exist counts 0).
pub fn records_in(bootstrap: &str, topics: &[String]) -> i64 {
    let admin = sluice_kafka::Admin::new(
        &sluice_core::KafkaClientSettings::new(bootstrap),
        Duration::from_secs(10),
    )
    .unwrap();
    topics
        .iter()
        .map(|topic| {
            admin
                .watermarks(topic)
                .map(|marks| marks.iter().map(|m| m.high - m.low).sum::<i64>())
                .unwrap_or(0)
        })
        .sum()
}
