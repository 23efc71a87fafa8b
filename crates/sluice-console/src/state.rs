//! What every request shares: the sources, the connection pool, the Kafka admin client and
//! producer, the sessions, the rate samples and the templates. Nothing here is shared with
//! a sluice process: the console only reads the same database and cluster.

use crate::auth::Sessions;
use crate::error::ConsoleError;
use crate::kafka_view::{PipelineKafka, read_pipeline};
use crate::sampler::Samples;
use crate::sources::Sources;
use crate::templates::Templates;
use chrono::{DateTime, Utc};
use sluice_kafka::{Admin, ResilientProducer};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most database connections the console holds.
const POOL_SIZE: u32 = 4;
/// How long a Kafka admin call may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// A read of every pipeline's lag and members: when (monotonic and wall clock), and what.
type LatestRead = (Instant, DateTime<Utc>, Vec<PipelineKafka>);

/// The console's shared state.
#[derive(Debug)]
pub struct Console {
    /// What to read.
    pub sources: Sources,
    /// PostgreSQL.
    pub pool: PgPool,
    /// Kafka's admin client (blocking: use it on the blocking pool).
    pub admin: Arc<Admin>,
    /// The replay producer; `None` when the console is read-only.
    pub producer: Option<ResilientProducer>,
    /// Sessions and the token.
    pub sessions: Sessions,
    /// Rows/s samples.
    samples: Mutex<Samples>,
    /// The sampler's latest read of every pipeline's lag and members, and when.
    latest: Mutex<Option<LatestRead>>,
    /// The page templates.
    pub templates: Templates,
}

impl Console {
    /// Builds the state; connects lazily (a database that is down shows on the pages).
    pub fn new(sources: Sources, token: Option<String>) -> Result<Arc<Self>, ConsoleError> {
        let options = sluice_postgres::connect_options(&sources.database_url, "console")?;
        let pool = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(options);
        let admin = Arc::new(Admin::new(&sources.kafka, KAFKA_TIMEOUT)?);
        let producer = match token {
            Some(_) => Some(ResilientProducer::new(
                &sources.kafka,
                "sluice-console-replay",
            )?),
            None => None,
        };
        Ok(Arc::new(Self {
            sources,
            pool,
            admin,
            producer,
            sessions: Sessions::new(token),
            samples: Mutex::new(Samples::default()),
            latest: Mutex::new(None),
            templates: Templates::new()?,
        }))
    }

    /// The rate samples.
    pub fn samples(&self) -> MutexGuard<'_, Samples> {
        // A panic while holding the lock leaves samples that are still consistent.
        self.samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps a read of every pipeline's lag and members (in the order of the sources).
    pub fn keep_latest(&self, views: Vec<PipelineKafka>) {
        let mut latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *latest = Some((Instant::now(), Utc::now(), views));
    }

    /// The latest read, if it is younger than `max_age`: (when, views).
    pub fn latest(&self, max_age: Duration) -> Option<(DateTime<Utc>, Vec<PipelineKafka>)> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        latest
            .as_ref()
            .filter(|(at, ..)| at.elapsed() < max_age)
            .map(|(_, when, views)| (*when, views.clone()))
    }

    /// Every pipeline's lag and members: the sampler's read when it is fresh, else a new
    /// read (kept for the next page).
    pub async fn pipelines_kafka(
        &self,
    ) -> Result<(DateTime<Utc>, Vec<PipelineKafka>), ConsoleError> {
        if let Some(latest) = self.latest(crate::sampler::INTERVAL * 3) {
            return Ok(latest);
        }
        let pipelines = self.sources.pipelines.clone();
        let views = self
            .kafka(move |admin| {
                pipelines
                    .iter()
                    .map(|p| read_pipeline(admin, p))
                    .collect::<Vec<_>>()
            })
            .await?;
        self.keep_latest(views.clone());
        Ok((Utc::now(), views))
    }

    /// Runs a blocking Kafka call on the blocking pool.
    pub async fn kafka<T, F>(&self, call: F) -> Result<T, ConsoleError>
    where
        T: Send + 'static,
        F: FnOnce(&Admin) -> T + Send + 'static,
    {
        let admin = Arc::clone(&self.admin);
        Ok(tokio::task::spawn_blocking(move || call(&admin)).await?)
    }
}
