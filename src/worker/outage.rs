//! Riding out storage outages. A storage error that outlasts the per-request retries
//! (`job.retry_attempts`) is an outage, not a reason to stop: the worker backs off
//! (exponential, jittered, capped at 30 s), tries again, and logs the outage with its
//! duration when the store answers again. Only `--give-up-after` bounds the wait.
//! Definite answers (not found, access denied, a corrupt record) are never treated as
//! an outage: they surface as before. Nothing here touches the store itself.
use super::WorkerError;
use crate::clock::{Clock, Entropy};
use crate::protocol::io::{ProtoError, is_transient};
use crate::protocol::job::JobError;
use crate::store::StoreError;
use std::sync::Arc;
use std::time::Duration;

/// The first backoff of an outage; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Whether `e` is a storage error worth waiting out (the store did not answer).
pub fn is_outage(e: &WorkerError) -> bool {
    match e {
        WorkerError::Proto(p) | WorkerError::Job(JobError::Proto(p)) => proto_is_outage(p),
        WorkerError::Job(JobError::Store(StoreError::Io(s))) => is_transient(s),
        _ => false,
    }
}

fn proto_is_outage(e: &ProtoError) -> bool {
    matches!(e, ProtoError::Store { source, .. } if is_transient(source))
}

/// One worker's view of the store's availability.
pub struct Outage {
    clock: Arc<dyn Clock>,
    entropy: Entropy,
    give_up_after: Option<Duration>,
    /// When the current outage began (clock ms), and backoffs since.
    since_ms: Option<u64>,
    backoffs: u32,
}

impl Outage {
    pub fn new(clock: Arc<dyn Clock>, entropy: Entropy, give_up_after: Option<Duration>) -> Self {
        Outage {
            clock,
            entropy,
            give_up_after,
            since_ms: None,
            backoffs: 0,
        }
    }

    /// The wait before the next try after `n` backoffs: equal jitter, so a fleet that
    /// lost the store at the same moment does not come back in lockstep.
    pub fn delay(&self, n: u32) -> Duration {
        let cap = FIRST_BACKOFF
            .saturating_mul(1 << n.min(16))
            .min(MAX_BACKOFF);
        let half = cap.as_millis() as u64 / 2;
        Duration::from_millis(half + self.entropy.below(half + 1))
    }

    /// Waits out `e` if it is an outage (and the give-up deadline has not passed);
    /// returns it otherwise.
    pub async fn back_off(&mut self, e: WorkerError) -> Result<(), WorkerError> {
        if !is_outage(&e) {
            return Err(e);
        }
        let now = self.clock.now_ms();
        let since = *self.since_ms.get_or_insert(now);
        let down = Duration::from_millis(now.saturating_sub(since));
        if let Some(limit) = self.give_up_after
            && down >= limit
        {
            tracing::error!(secs = down.as_secs_f64(), error = %e, "storage outage: giving up");
            return Err(WorkerError::Outage {
                secs: down.as_secs(),
                last: e.to_string(),
            });
        }
        let wait = self.delay(self.backoffs);
        if self.backoffs == 0 {
            tracing::warn!(error = %e, "storage outage: backing off and retrying");
        } else {
            tracing::info!(
                error = %e,
                down_secs = down.as_secs_f64(),
                wait_secs = wait.as_secs_f64(),
                "storage still unavailable"
            );
        }
        self.backoffs += 1;
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// A request succeeded: an outage in progress is over.
    pub fn over(&mut self) {
        if let Some(since) = self.since_ms.take() {
            let secs = self.clock.now_ms().saturating_sub(since) as f64 / 1000.0;
            tracing::warn!(
                secs,
                backoffs = self.backoffs,
                "storage outage over after {secs:.1} s"
            );
            self.backoffs = 0;
        }
    }
}

impl Outage {
    /// Reads `job.json` at `uri`, waiting out an outage (and reporting it) as every
    /// other request does; a missing job or denied access is the error.
    pub async fn load_job(
        &mut self,
        reg: &crate::store::Registry,
        uri: &str,
        retry: &crate::protocol::io::Retry,
    ) -> Result<crate::protocol::job::LoadedJob, WorkerError> {
        loop {
            match crate::protocol::job::load_job(reg, uri, retry).await {
                Ok(j) => return Ok(j),
                Err(e) => self.back_off(e.into()).await?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::MockClock;

    fn unavailable() -> WorkerError {
        WorkerError::Proto(ProtoError::Store {
            path: "jobs/j/leases".into(),
            source: object_store::Error::Generic {
                store: "test",
                source: "503 Service Unavailable".into(),
            },
        })
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_thirty_seconds() {
        let o = Outage::new(Arc::new(MockClock::new(0)), Entropy::seeded(7), None);
        for n in 0..40 {
            let cap = FIRST_BACKOFF
                .saturating_mul(1 << n.min(16))
                .min(MAX_BACKOFF);
            let d = o.delay(n);
            assert!(d >= cap / 2 && d <= cap, "{n}: {d:?} vs {cap:?}");
        }
    }

    #[tokio::test]
    async fn outages_are_waited_out_until_the_deadline_answers_are_not() {
        let clock = Arc::new(MockClock::new(1_000));
        let mut o = Outage::new(
            clock.clone(),
            Entropy::seeded(1),
            Some(Duration::from_secs(60)),
        );
        o.back_off(unavailable()).await.unwrap();
        clock.advance_ms(59_000);
        o.back_off(unavailable()).await.unwrap();
        // The store answered: the next outage starts its own clock.
        o.over();
        clock.advance_ms(30_000);
        o.back_off(unavailable()).await.unwrap();
        clock.advance_ms(60_000);
        let e = o.back_off(unavailable()).await.unwrap_err();
        assert!(e.to_string().contains("unavailable for 60 s"), "{e}");
        // Definite answers are not outages.
        let denied = WorkerError::Proto(ProtoError::Store {
            path: "in/a".into(),
            source: object_store::Error::PermissionDenied {
                path: "in/a".into(),
                source: "403".into(),
            },
        });
        assert!(o.back_off(denied).await.is_err());
        let missing = WorkerError::Job(JobError::NotFound("memory://x/jobs/j".into()));
        assert!(!is_outage(&missing));
    }
}
