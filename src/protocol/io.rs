//! Storage primitives of the protocol: create-only writes that recognise their own
//! earlier (retried) write, reads and listings, all retried with exponential backoff
//! and jitter on transient errors (5xx, SlowDown, 409, timeouts, lost responses).
//! "Already exists", "precondition failed" and "not found" are answers, not errors to
//! retry.
use super::records::check_version;
use crate::clock::Entropy;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("storage error at {path}: {source}")]
    Store {
        path: String,
        source: object_store::Error,
    },
    #[error("corrupt record at {path}: {message}")]
    Corrupt { path: String, message: String },
    /// A listing still lacks objects that must exist (a lagging LIST); worth retrying.
    #[error("incomplete listing of {path}: {message}")]
    Incomplete { path: String, message: String },
    #[error(
        "store {store} does not refuse a second create of {path}: mdf needs conditional create (PUT with If-None-Match: *) for its leases and commits; use a store that supports it (AWS S3 does; older MinIO and Ceph releases do not)"
    )]
    NoConditionalCreate { store: String, path: String },
}

impl ProtoError {
    pub fn store(path: &Path, source: object_store::Error) -> Self {
        ProtoError::Store {
            path: path.to_string(),
            source,
        }
    }

    /// Whether another attempt may get past it. Storage failures may be one worker's
    /// (expired credentials, a skewed clock: S3's 403) and a record this build cannot
    /// decode may be a newer worker's, so both are retried on other workers; only a
    /// store without conditional create is the same for every worker.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, ProtoError::NoConditionalCreate { .. })
    }
}

/// Backoff for transient errors.
#[derive(Debug, Clone)]
pub struct Retry {
    pub attempts: u32,
    pub base: Duration,
    pub max: Duration,
    /// How long a request the store keeps asking to slow down is tried again
    /// ([`SLOW_DOWN_BUDGET`]; a lease's operations get less, see `WorkerCtx::lease`).
    pub slow_down_for: Duration,
    pub entropy: Entropy,
}

/// The tries of one request so far, for [`Retry::again`].
#[derive(Debug, Clone, Copy)]
pub struct Tries {
    /// Tries that failed, of any kind (the backoff grows with them).
    pub n: u32,
    /// Those that failed other than by the store asking to slow down (they count
    /// towards `attempts`).
    pub other: u32,
    pub started: tokio::time::Instant,
}

impl Tries {
    pub fn new() -> Self {
        Tries {
            n: 0,
            other: 0,
            started: tokio::time::Instant::now(),
        }
    }
}

impl Default for Tries {
    fn default() -> Self {
        Self::new()
    }
}

impl Retry {
    pub fn new(entropy: Entropy) -> Self {
        Retry {
            attempts: 8,
            base: Duration::from_millis(25),
            max: Duration::from_secs(5),
            slow_down_for: SLOW_DOWN_BUDGET,
            entropy,
        }
    }

    /// Full-jitter exponential backoff before retry number `n` (0-based).
    pub fn delay(&self, n: u32) -> Duration {
        self.delay_up_to(n, self.max)
    }

    /// [`Retry::delay`] with its growth capped at `max` instead of `self.max`.
    fn delay_up_to(&self, n: u32, max: Duration) -> Duration {
        let cap = self.base.saturating_mul(1 << n.min(20)).min(max);
        Duration::from_millis(self.entropy.below(cap.as_millis() as u64 + 1))
    }

    /// Runs `op` until it succeeds, fails permanently, or attempts run out.
    pub async fn run<T, F, Fut>(&self, mut op: F) -> object_store::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = object_store::Result<T>>,
    {
        let mut tries = Tries::new();
        loop {
            match op().await {
                Err(e) => match self.again(&e, &mut tries) {
                    Some(d) => {
                        tracing::debug!(error = %e, attempt = tries.n, "transient storage error, retrying");
                        tokio::time::sleep(d).await;
                    }
                    None => return Err(e),
                },
                r => return r,
            }
        }
    }

    /// How long to wait before trying again after `e` (and counts the failed try in
    /// `tries`); `None`: give up. A transient error gets `attempts` tries in all; a
    /// store asking to slow down (503 SlowDown, 429) gets as many as fit in
    /// `slow_down_for` from the first try, its backoff growing to 15 s, and they do
    /// not count towards `attempts`: S3 answers a prefix over its request rate with
    /// 503s until it has split the prefix, and a fleet whose creates gave up after a
    /// second or two would turn that into released tasks and failed submits
    /// (docs/SCALE.md).
    pub fn again(&self, e: &object_store::Error, tries: &mut Tries) -> Option<Duration> {
        if !is_transient(e) {
            return None;
        }
        let n = tries.n;
        tries.n += 1;
        if crate::store::is_slow_down(e) {
            if tries.started.elapsed() >= self.slow_down_for {
                return None;
            }
            return Some(self.delay_up_to(n, Duration::from_secs(15)));
        }
        tries.other += 1;
        (tries.other < self.attempts).then(|| self.delay(n))
    }
}

/// How long a request the store keeps asking to slow down is tried again.
pub const SLOW_DOWN_BUDGET: Duration = Duration::from_secs(180);

/// Errors worth retrying (defined with the store, re-exported for protocol callers).
pub use crate::store::is_transient;

/// Result of a create-only write.
#[derive(Debug)]
pub enum Created {
    /// This write (possibly an earlier retry of it) created the object.
    Mine,
    /// Another writer's object was there first. Its bytes when they were read back
    /// (always for writes without a `write_id`); empty when the first try already
    /// found the object, which proves it is not ours. Use [`read_theirs`] to get them.
    Theirs(Bytes),
}

/// The bytes of another writer's object, reading them if [`create_bytes`] did not.
pub async fn read_theirs(
    store: &dyn ObjectStore,
    path: &Path,
    b: Bytes,
    retry: &Retry,
) -> Result<Bytes, ProtoError> {
    if !b.is_empty() {
        return Ok(b);
    }
    get_bytes(store, path, retry)
        .await?
        .ok_or_else(|| ProtoError::Corrupt {
            path: path.to_string(),
            message: "reported as existing but cannot be read".into(),
        })
}

/// Creates `path` with `value` only if absent. `write_id` must be unique to this
/// write and present in `value`: an "already exists" whose object carries our
/// `write_id` means an earlier retry of this very write landed.
pub async fn create_json<T: Serialize>(
    store: &dyn ObjectStore,
    path: &Path,
    value: &T,
    write_id: &str,
    retry: &Retry,
) -> Result<Created, ProtoError> {
    let body = Bytes::from(serde_json::to_vec_pretty(value).expect("records serialize"));
    create_bytes(store, path, body, Some(write_id), retry).await
}

/// Create-only write of raw bytes; without a `write_id`, an existing object with
/// identical bytes counts as ours (deterministic content such as task manifests).
pub async fn create_bytes(
    store: &dyn ObjectStore,
    path: &Path,
    body: Bytes,
    write_id: Option<&str>,
    retry: &Retry,
) -> Result<Created, ProtoError> {
    // Whether an earlier try may have landed although it reported an error: only then
    // can an "already exists" be our own write, and only then is a read-back needed.
    let mut maybe_landed = false;
    let mut tries = Tries::new();
    let r = loop {
        let payload = PutPayload::from(body.clone());
        match store
            .put_opts(path, payload, PutOptions::from(PutMode::Create))
            .await
        {
            Err(e) => match retry.again(&e, &mut tries) {
                Some(d) => {
                    tracing::debug!(error = %e, attempt = tries.n, "transient error on create, retrying");
                    maybe_landed = true;
                    tokio::time::sleep(d).await;
                }
                None => break Err(e),
            },
            r => break r,
        }
    };
    match r {
        Ok(_) => Ok(Created::Mine),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => {
            if !maybe_landed && write_id.is_some() {
                return Ok(Created::Theirs(Bytes::new()));
            }
            let existing =
                get_bytes(store, path, retry)
                    .await?
                    .ok_or_else(|| ProtoError::Corrupt {
                        path: path.to_string(),
                        message: "reported as existing but cannot be read".into(),
                    })?;
            let mine = match write_id {
                Some(id) => serde_json::from_slice::<serde_json::Value>(&existing)
                    .ok()
                    .and_then(|v| {
                        v.get("write_id")
                            .and_then(|w| w.as_str().map(str::to_owned))
                    })
                    .is_some_and(|w| w == id),
                None => existing == body,
            };
            Ok(if mine {
                Created::Mine
            } else {
                Created::Theirs(existing)
            })
        }
        Err(e) => Err(ProtoError::store(path, e)),
    }
}

/// Writes `path` unconditionally (objects owned by one writer, or deterministic).
pub async fn put_json<T: Serialize>(
    store: &dyn ObjectStore,
    path: &Path,
    value: &T,
    retry: &Retry,
) -> Result<(), ProtoError> {
    let body = Bytes::from(serde_json::to_vec_pretty(value).expect("records serialize"));
    retry
        .run(|| {
            let p = PutPayload::from(body.clone());
            async move { store.put(path, p).await }
        })
        .await
        .map(|_| ())
        .map_err(|e| ProtoError::store(path, e))
}

/// Reads an object; `None` if it does not exist.
pub async fn get_bytes(
    store: &dyn ObjectStore,
    path: &Path,
    retry: &Retry,
) -> Result<Option<Bytes>, ProtoError> {
    let r = retry
        .run(|| async move { store.get(path).await?.bytes().await })
        .await;
    match r {
        Ok(b) => Ok(Some(b)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(ProtoError::store(path, e)),
    }
}

/// Reads and decodes a versioned record; `None` if it does not exist.
pub async fn get_json<T: DeserializeOwned>(
    store: &dyn ObjectStore,
    path: &Path,
    retry: &Retry,
) -> Result<Option<T>, ProtoError> {
    match get_bytes(store, path, retry).await? {
        None => Ok(None),
        Some(b) => decode(path, &b).map(Some),
    }
}

pub fn decode<T: DeserializeOwned>(path: &Path, b: &[u8]) -> Result<T, ProtoError> {
    let corrupt = |message: String| ProtoError::Corrupt {
        path: path.to_string(),
        message,
    };
    check_version(path.as_ref(), b).map_err(|e| corrupt(e.to_string()))?;
    serde_json::from_slice(b).map_err(|e| corrupt(e.to_string()))
}

/// Every object under `prefix`, sorted by location.
pub async fn list_all(
    store: &dyn ObjectStore,
    prefix: &Path,
    retry: &Retry,
) -> Result<Vec<ObjectMeta>, ProtoError> {
    let mut v = retry
        .run(|| async move { store.list(Some(prefix)).try_collect::<Vec<_>>().await })
        .await
        .map_err(|e| ProtoError::store(prefix, e))?;
    v.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(v)
}

/// Every record under `prefix`, in location order (one that vanished after the listing
/// is skipped).
pub async fn get_all_json<T: DeserializeOwned>(
    store: &dyn ObjectStore,
    prefix: &Path,
    retry: &Retry,
) -> Result<Vec<T>, ProtoError> {
    let mut out = Vec::new();
    for m in list_all(store, prefix, retry).await? {
        if let Some(x) = get_json(store, &m.location, retry).await? {
            out.push(x);
        }
    }
    Ok(out)
}

/// The names of the immediate "directories" under `prefix`, sorted.
pub async fn list_dirs(
    store: &dyn ObjectStore,
    prefix: &Path,
    retry: &Retry,
) -> Result<Vec<String>, ProtoError> {
    let r = retry
        .run(|| async move { store.list_with_delimiter(Some(prefix)).await })
        .await
        .map_err(|e| ProtoError::store(prefix, e))?;
    let mut v: Vec<String> = r
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename().map(str::to_string))
        .collect();
    v.sort();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(msg: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "test",
            source: msg.to_string().into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn slow_downs_are_waited_out_for_the_budget_and_do_not_use_up_attempts() {
        let r = Retry::new(Entropy::seeded(3));
        let slow = err("503 SlowDown: please reduce your request rate");
        let other = err("500 InternalError");
        let mut t = Tries::new();
        // Many more slow-downs than `attempts`, all retried while within the budget.
        for _ in 0..20 {
            let d = r.again(&slow, &mut t).expect("retried");
            assert!(d <= Duration::from_secs(15));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // Other transient errors still get `attempts` tries of their own.
        for _ in 0..r.attempts - 1 {
            assert!(r.again(&other, &mut t).is_some());
        }
        assert!(r.again(&other, &mut t).is_none());
        // Past the budget a slow-down is given up on; a lease's retry has less.
        let mut t = Tries::new();
        tokio::time::sleep(SLOW_DOWN_BUDGET).await;
        assert!(r.again(&slow, &mut t).is_none());
        let lease = Retry {
            slow_down_for: Duration::from_secs(15),
            ..r.clone()
        };
        let mut t = Tries::new();
        assert!(lease.again(&slow, &mut t).is_some());
        tokio::time::sleep(Duration::from_secs(15)).await;
        assert!(lease.again(&slow, &mut t).is_none());
        // Definite answers are never retried; a key named like a slow-down is not one.
        let gone = object_store::Error::NotFound {
            path: "x".into(),
            source: "no".into(),
        };
        assert!(r.again(&gone, &mut Tries::new()).is_none());
        assert!(!crate::store::is_slow_down(&err(
            "500 InternalError on jobs/SlowDown-job/x"
        )));
        assert!(crate::store::is_slow_down(&err(
            "Server returned non-2xx status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>"
        )));
        // A HEAD's 503 comes without a body.
        assert!(crate::store::is_slow_down(&err(
            "Error performing HEAD https://b.s3.amazonaws.com/k in 20ms - Server returned non-2xx status code: 503 Service Unavailable: "
        )));
        assert!(!crate::store::is_slow_down(&err(
            "Server returned non-2xx status code: 500 Internal Server Error: "
        )));
    }
}
