//! The dispatch loop ([`Dispatcher::run`]): a pipeline of claims while a backlog lasts, a
//! wait for work otherwise.
//!
//! The loop's state is [`DispatchLoop`]; each round takes the first step that applies, in
//! this order: settle every batch whose records are resolved, run recovery and retention
//! when due (after the batches in flight drain), claim and start publishing the next batch
//! when there is room, or wait for a resolved batch, a NOTIFY, the poll interval or the
//! stop.

use super::Dispatcher;
use super::batch::Published;
use super::in_flight::InFlight;
use crate::error::DispatchError;
use crate::events::{BatchSettled, ClaimFailed, DispatcherStopped, SettleFailed};
#[cfg(feature = "failpoints")]
use crate::failpoint::Failpoint;
use crate::report::{DispatchReport, DispatchTotals};
use sqlx::postgres::PgListener;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often stale dispatch recovery runs (at most; it also waits for the stale timeout).
const RECOVERY_EVERY: Duration = Duration::from_secs(30);
/// How often retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);

impl Dispatcher {
    /// Runs until `stop` is cancelled; the batches in flight are finished first. Database and
    /// broker failures are logged and retried after the poll interval; only a failure to
    /// create the clients is returned.
    ///
    /// The loop keeps up to [`PIPELINE_DEPTH`](super::PIPELINE_DEPTH) claims in flight: a
    /// claim's records go to the producer as soon as it commits, and while they wait for
    /// their acknowledgements the connection settles the batch before it and claims the next
    /// one. It claims the next batch while one is in flight only after a full claim (a
    /// backlog): a short claim means the work is caught up, and claiming again at every
    /// NOTIFY while a few events are in flight costs a statement per handful of events
    /// (measured: more database CPU per event and no better latency). Otherwise it claims
    /// after a settled batch (its keys are free again), a NOTIFY or the poll interval.
    pub async fn run(self, stop: CancellationToken) -> Result<DispatchTotals, DispatchError> {
        tracing::info!(dispatcher = %self.settings.dispatcher_id, "outbox dispatcher started");
        let mut state = DispatchLoop::new(self, stop);
        loop {
            state.dispatcher.metrics.tick();
            let stopping = state.stop.is_cancelled();
            if stopping && state.drained() {
                break;
            }
            if !stopping {
                state.keep_listening().await;
            }
            state.settle_resolved().await;
            let now = Instant::now();
            if !stopping && state.maintenance_due(now) {
                state.maintain(now).await;
            } else if !stopping && state.may_claim() {
                state.claim_next().await;
            } else if state.done.is_empty() {
                state.wait(stopping).await;
            }
        }
        Ok(state.finish())
    }
}

/// The dispatch loop's state between two rounds.
struct DispatchLoop {
    dispatcher: Dispatcher,
    stop: CancellationToken,
    /// What the settled batches did so far.
    totals: DispatchTotals,
    /// The NOTIFY listener; `None` until it (re)connects, and the loop polls meanwhile.
    listener: Option<PgListener>,
    /// When stale dispatch recovery runs next.
    next_recovery: Instant,
    /// When retention runs next.
    next_retention: Instant,
    /// The batches being published.
    in_flight: InFlight,
    /// Batches whose every record is resolved, to be settled next.
    done: Vec<Published>,
    /// Work is likely waiting: claim as soon as there is room.
    more: bool,
    /// The last claim was full: the next one may start while it is in flight.
    backlog: bool,
    /// After a database error, no claim before this instant.
    resume_at: Option<Instant>,
}

impl DispatchLoop {
    fn new(dispatcher: Dispatcher, stop: CancellationToken) -> Self {
        let now = Instant::now();
        let next_recovery = now + dispatcher.settings.stale_dispatch.min(RECOVERY_EVERY);
        Self {
            dispatcher,
            stop,
            totals: DispatchTotals::default(),
            listener: None,
            next_recovery,
            next_retention: now,
            in_flight: InFlight::default(),
            done: vec![],
            // Work is likely waiting: claim as soon as there is room.
            more: true,
            backlog: false,
            resume_at: None,
        }
    }

    /// Nothing in flight and nothing left to settle.
    fn drained(&self) -> bool {
        self.in_flight.is_empty() && self.done.is_empty()
    }

    /// (Re)connects the NOTIFY listener when there is none.
    async fn keep_listening(&mut self) {
        if self.listener.is_none() {
            self.listener = listen(&self.dispatcher.settings.database_url).await;
        }
    }

    /// Step 1: records the outcomes of every batch whose records are all resolved (and of
    /// those that resolve meanwhile).
    async fn settle_resolved(&mut self) {
        while let Some(published) = self.done.pop() {
            let settle = self.dispatcher.settle(published);
            let result = self.in_flight.alongside(settle, &mut self.done).await;
            self.count_settled(result);
            self.more = true;
        }
    }

    /// Counts and logs a settled batch (one INFO line with every counter and where its time
    /// went), or logs its failure; the rows of a failed settle stay DISPATCHING for stale
    /// recovery.
    fn count_settled(&mut self, result: Result<DispatchReport, DispatchError>) {
        let dispatcher = &mut self.dispatcher;
        match result {
            Ok(report) => {
                self.totals.add(&report);
                BatchSettled {
                    metrics: &dispatcher.metrics,
                    dispatcher: &dispatcher.settings.dispatcher_id,
                    report: &report,
                }
                .emit();
            }
            Err(error) => {
                SettleFailed {
                    metrics: &dispatcher.metrics,
                    dispatcher: &dispatcher.settings.dispatcher_id,
                    error: &error,
                }
                .emit();
                dispatcher.conn = None;
            }
        }
    }

    /// Whether stale dispatch recovery or retention is due.
    fn maintenance_due(&self, now: Instant) -> bool {
        now >= self.next_recovery || now >= self.next_retention
    }

    /// Step 2: recovery and retention run between batches. With batches in flight it only
    /// waits for one to resolve (no new claim meanwhile, so the pipeline drains); then it
    /// runs each round that is due.
    async fn maintain(&mut self, now: Instant) {
        if !self.in_flight.is_empty() {
            self.done.push(self.in_flight.next().await);
            return;
        }
        if now >= self.next_recovery {
            self.next_recovery = now + self.dispatcher.settings.stale_dispatch.min(RECOVERY_EVERY);
            self.dispatcher.recovery_round().await;
        }
        if now >= self.next_retention {
            self.next_retention = now + RETENTION_EVERY;
            self.dispatcher.retention_round().await;
        }
    }

    /// Whether the next claim may start: work is likely waiting, there is room, the last
    /// claim was full or nothing is in flight, and no database error asks for a pause.
    fn may_claim(&self) -> bool {
        self.more
            && self.in_flight.has_room()
            && (self.backlog || self.in_flight.is_empty())
            && self.resume_at.is_none_or(|at| Instant::now() >= at)
    }

    /// Step 3: claims the next batch (settling nothing meanwhile, but collecting the batches
    /// that resolve) and starts its publish at once. A failed claim drops the connection
    /// and pauses claims for the poll interval.
    async fn claim_next(&mut self) {
        let claim = self.dispatcher.claim();
        match self.in_flight.alongside(claim, &mut self.done).await {
            Ok(claimed) if claimed.events.is_empty() => {
                self.more = false;
                self.backlog = false;
            }
            Ok(claimed) => {
                self.backlog = claimed.cut
                    || claimed.events.len() >= self.dispatcher.settings.batch_size as usize;
                self.more = self.backlog;
                #[cfg(feature = "failpoints")]
                self.crash_after_next_claim().await;
                let publishing = self.dispatcher.publish(claimed);
                self.in_flight.push(publishing);
            }
            Err(error) => {
                ClaimFailed {
                    metrics: &self.dispatcher.metrics,
                    error: &error,
                }
                .emit();
                self.dispatcher.conn = None;
                self.more = true;
                self.resume_at = Some(Instant::now() + self.dispatcher.settings.poll_interval);
            }
        }
    }

    /// The `after-next-claim` fault: with an earlier batch in flight or unsettled, waits
    /// until its records are all acknowledged (none marked), then stops the process — this
    /// claim committed, nothing of it sent.
    #[cfg(feature = "failpoints")]
    async fn crash_after_next_claim(&mut self) {
        if self.dispatcher.failpoint == Some(Failpoint::AfterNextClaim) && !self.drained() {
            while !self.in_flight.is_empty() {
                self.done.push(self.in_flight.next().await);
            }
            Failpoint::AfterNextClaim.trigger();
        }
    }

    /// Step 4: waits. With no room for a claim (or stopping, or caught up with a batch in
    /// flight), only a resolved batch is worth waking for (NOTIFYs wait in the listener's
    /// buffer); otherwise also a NOTIFY, the poll interval, or the stop.
    async fn wait(&mut self, stopping: bool) {
        let caught_up_in_flight = !self.backlog && !self.in_flight.is_empty();
        if stopping || !self.in_flight.has_room() || caught_up_in_flight {
            self.wait_for_resolved(stopping).await;
        } else {
            self.wait_for_work().await;
        }
    }

    /// Waits for a batch in flight to resolve (or for the stop, unless already stopping).
    /// With none in flight (stopping, the last one settled this round) there is nothing to
    /// wait for: the loop ends at its next turn. (Waiting on the empty set never woke, and
    /// with the stop no longer watched a SIGTERM under load hung the process.)
    async fn wait_for_resolved(&mut self, stopping: bool) {
        if self.in_flight.is_empty() {
            return;
        }
        tokio::select! {
            published = self.in_flight.next() => self.done.push(published),
            () = self.stop.cancelled(), if !stopping => {}
        }
    }

    /// Waits for a batch in flight to resolve, a NOTIFY, the poll interval (or the end of a
    /// pause after a database error), or the stop.
    async fn wait_for_work(&mut self) {
        let wait = match self.resume_at {
            Some(at) => tokio::time::sleep_until(at),
            None => tokio::time::sleep(self.dispatcher.settings.poll_interval),
        };
        let listener = &mut self.listener;
        let notified = async {
            match listener.as_mut() {
                Some(l) => {
                    let received = l.recv().await;
                    // One claim answers every NOTIFY already here.
                    while l.next_buffered().is_some() {}
                    received.map(|_| ())
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            published = self.in_flight.next(), if !self.in_flight.is_empty() => {
                self.done.push(published)
            }
            () = self.stop.cancelled() => {}
            () = wait => {
                self.resume_at = None;
                self.more = true;
            }
            received = notified => match received {
                Ok(()) => self.more = true,
                Err(error) => {
                    tracing::warn!(%error, "outbox listener lost; polling until it reconnects");
                    self.listener = None;
                }
            },
        }
    }

    /// Flushes the producer and logs the run's totals.
    fn finish(self) -> DispatchTotals {
        if let Err(error) = self.dispatcher.producer.flush(Duration::from_secs(10)) {
            tracing::warn!(%error, "producer flush at stop failed");
        }
        let totals = self.totals;
        DispatcherStopped { totals: &totals }.emit();
        totals
    }
}

/// A listener on the outbox's NOTIFY channel, or `None` (logged) if it cannot connect or
/// listen: the loop then polls until the next round tries again.
async fn listen(url: &str) -> Option<PgListener> {
    let mut listener = match sluice_postgres::connect::listener(url, "dispatch").await {
        Ok(l) => l,
        Err(error) => {
            tracing::warn!(%error, "cannot LISTEN for outbox events; polling only");
            return None;
        }
    };
    match listener.listen(sluice_outbox::NOTIFY_CHANNEL).await {
        Ok(()) => Some(listener),
        Err(error) => {
            tracing::warn!(%error, "cannot LISTEN for outbox events; polling only");
            None
        }
    }
}
