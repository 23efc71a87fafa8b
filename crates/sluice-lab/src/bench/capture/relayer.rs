//! The two relayers as child processes: `sluice capture`, and the Debezium connector in a
//! Connect standalone worker (`scripts/stack connect`, which execs the JVM, so the child's
//! pid is the JVM's). Each has a slot of its own, made at its start with no snapshot, and a
//! topic prefix of its own; stopping one drops its slot.

use super::{CaptureBenchArgs, Env};
use crate::Failure;
use anyhow::{Context, anyhow};
use sqlx::PgConnection;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which relayer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    /// The Debezium PostgreSQL connector in Kafka Connect.
    Debezium,
    /// `sluice capture`.
    Sluice,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Debezium => "debezium",
            Kind::Sluice => "sluice",
        }
    }

    /// The topic prefix's suffix and the slot's.
    pub(super) fn short(self) -> &'static str {
        match self {
            Kind::Debezium => "dbz",
            Kind::Sluice => "cap",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A running relayer.
pub(super) struct Relayer {
    pub(super) kind: Kind,
    child: Child,
    log: PathBuf,
    slot: String,
}

/// The topic prefix of `kind` in this run: its table's topic is `<prefix>.<schema>.items`.
pub(super) fn prefix(env: &Env, kind: Kind) -> String {
    format!("{}{}", env.id, kind.short())
}

impl Relayer {
    /// Starts `kind` on a slot of its own (made at its start), its output in the run's folder.
    pub(super) fn start(
        env: &Env,
        kind: Kind,
        args: &CaptureBenchArgs,
    ) -> Result<Relayer, Failure> {
        let slot = format!("{}_{}", env.id, kind.short());
        let log = env.dir.join(format!("{kind}.log"));
        let mut cmd = match kind {
            Kind::Sluice => capture_command(env, &slot),
            Kind::Debezium => connect_command(env, &slot, args)?,
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(env.dir.join(format!("{kind}.out")))?)
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {kind}"))?;
        Ok(Relayer {
            kind,
            child,
            log,
            slot,
        })
    }

    /// An error with the end of its log if it has exited.
    pub(super) fn check_alive(&mut self) -> Result<(), Failure> {
        match self.child.try_wait()? {
            Some(status) => Err(anyhow!(
                "{} exited with {status}; its log ({}) ends:\n{}",
                self.kind,
                self.log.display(),
                self.tail()
            )
            .into()),
            None => Ok(()),
        }
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn signal(&self, signal: &str) -> Result<(), Failure> {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()?;
        if !status.success() {
            return Err(anyhow!("kill {signal} {} failed: {status}", self.kind).into());
        }
        Ok(())
    }

    /// Stops the process (SIGSTOP): its slot keeps the changes committed meanwhile.
    pub(super) fn pause(&mut self) -> Result<(), Failure> {
        self.check_alive()?;
        self.signal("-STOP")
    }

    /// Continues it (SIGCONT); the wall-clock time of the resume, milliseconds since the epoch.
    pub(super) fn resume(&mut self) -> Result<f64, Failure> {
        // Taken before the signal: the window is not shortened by the time `kill` takes.
        let at = now_ms();
        self.signal("-CONT")?;
        Ok(at)
    }

    /// CPU seconds (user + system) it has used so far.
    pub(super) fn cpu_seconds(&mut self) -> Result<f64, Failure> {
        self.check_alive()?;
        super::super::drain::cpu_seconds(self.child.id())
            .ok_or_else(|| anyhow!("no /proc/{}/stat for {}", self.child.id(), self.kind).into())
    }

    /// Its peak resident set (VmHWM), MiB.
    pub(super) fn peak_rss_mib(&mut self) -> Result<f64, Failure> {
        self.check_alive()?;
        crate::demo::peak_rss_kb(self.child.id())
            .map(|kb| kb as f64 / 1024.0)
            .ok_or_else(|| anyhow!("no VmHWM for {}", self.kind).into())
    }

    /// SIGTERM (SIGKILL after 30 s), then drops its slot once no session holds it.
    pub(super) async fn stop(mut self, env: &Env) -> Result<(), Failure> {
        // A paused process gets SIGTERM only once it runs again.
        let _ = self.signal("-CONT");
        let _ = self.signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                self.child.kill()?;
                self.child.wait()?;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop_slot(env, &self.slot).await
    }
}

impl Drop for Relayer {
    fn drop(&mut self) {
        // Unwinding or an early return: never leave a JVM or a paused process behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Wall-clock milliseconds since the epoch (the clock the broker stamps records with).
pub(super) fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Drops `slot`, waiting (at most 30 s) until the session that held it has ended.
async fn drop_slot(env: &Env, slot: &str) -> Result<(), Failure> {
    let mut conn: PgConnection = sluice_postgres::connect(&env.url, "bench").await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let dropped = sqlx::query(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE slot_name = $1 AND NOT active",
        )
        .bind(slot)
        .execute(&mut conn)
        .await;
        let left: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1)",
        )
        .bind(slot)
        .fetch_one(&mut conn)
        .await?;
        if !left {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "slot {slot} still held 30 s after its relayer stopped ({dropped:?})"
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `sluice capture` of the run's publication, no snapshot.
fn capture_command(env: &Env, slot: &str) -> Command {
    let mut cmd = Command::new(&env.sluice);
    cmd.arg("capture")
        .env("DATABASE_URL", &env.url)
        .env("CAPTURE_SLOT", slot)
        .env("CAPTURE_PUBLICATION", env.publication())
        .env("CAPTURE_TOPIC_PREFIX", prefix(env, Kind::Sluice))
        .env("CAPTURE_SNAPSHOT", "never");
    cmd
}

/// The parts of a `postgres://user[:password]@host[:port]/database` URL Debezium needs.
struct PgAddress {
    host: String,
    port: String,
    user: String,
    password: String,
    database: String,
}

fn pg_address(url: &str) -> Result<PgAddress, Failure> {
    let bad = || {
        Failure::config(anyhow!(
            "DATABASE_URL: expected postgres://user@host:port/database"
        ))
    };
    let rest = url.split_once("://").ok_or_else(bad)?.1;
    let (authority, path) = rest.split_once('/').ok_or_else(bad)?;
    let (credentials, server) = authority.rsplit_once('@').ok_or_else(bad)?;
    let (user, password) = credentials
        .split_once(':')
        .unwrap_or((credentials, "unused"));
    let (host, port) = server.split_once(':').unwrap_or((server, "5432"));
    let database = path.split('?').next().unwrap_or_default();
    Ok(PgAddress {
        host: host.to_owned(),
        port: port.to_owned(),
        user: user.to_owned(),
        password: password.to_owned(),
        database: database.to_owned(),
    })
}

/// The Connect worker (JSON converters with schemas, as `sluice capture`'s default) and the
/// connector on the run's publication, no snapshot, its other settings Debezium's defaults.
fn connect_command(env: &Env, slot: &str, args: &CaptureBenchArgs) -> Result<Command, Failure> {
    let pg = pg_address(&env.url)?;
    let rest = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let worker = env.dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={bootstrap}\n\
             key.converter=org.apache.kafka.connect.json.JsonConverter\n\
             key.converter.schemas.enable=true\n\
             value.converter=org.apache.kafka.connect.json.JsonConverter\n\
             value.converter.schemas.enable=true\n\
             offset.storage.file.filename={offsets}\n\
             listeners=http://127.0.0.1:{rest}\n\
             {extra}",
            bootstrap = env.kafka.bootstrap_servers,
            offsets = env.dir.join("offsets.dat").display(),
            extra = lines(&args.worker),
        ),
    )?;
    let connector = env.dir.join("connector.properties");
    std::fs::write(
        &connector,
        format!(
            "name={id}\n\
             connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             tasks.max=1\n\
             plugin.name=pgoutput\n\
             database.hostname={host}\n\
             database.port={port}\n\
             database.user={user}\n\
             database.password={password}\n\
             database.dbname={database}\n\
             topic.prefix={prefix}\n\
             slot.name={slot}\n\
             publication.name={publication}\n\
             publication.autocreate.mode=disabled\n\
             table.include.list={table}\n\
             snapshot.mode=no_data\n\
             {extra}",
            id = env.id,
            host = pg.host,
            port = pg.port,
            user = pg.user,
            password = pg.password,
            database = pg.database,
            prefix = prefix(env, Kind::Debezium),
            publication = env.publication(),
            // A regular expression; its `.` also matches the dot (a `\.` would need escaping
            // again in a properties file).
            table = env.table(),
            extra = lines(&args.connector),
        ),
    )?;
    let mut cmd = Command::new(&env.stack);
    cmd.arg("connect")
        .args([&worker, &connector])
        .env("SLUICE_CONNECT_JVM_OPTS", &args.connect_jvm);
    Ok(cmd)
}

/// `key=value` properties as lines of a properties file.
fn lines(properties: &[String]) -> String {
    properties.iter().map(|p| format!("{p}\n")).collect()
}
