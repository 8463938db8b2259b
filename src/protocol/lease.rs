//! The lease state machine (docs/PROTOCOL.md §4) over create-only writes: claim,
//! renew, release and commit. Works on every object_store backend (no compare-and-swap
//! needed). Time comes only from the injected [`Clock`], ids only from [`Entropy`], so
//! every transition is tested on a mock clock (tests/lease_conformance.rs).
use super::io::{Created, ProtoError, Retry, create_json, decode, get_json, list_all, read_theirs};
use super::records::{CommitRecord, LeaseKind, LeaseRecord, VERSION};
use crate::clock::{Clock, Entropy};
use object_store::ObjectStore;
use object_store::path::Path;

/// Everything a lease operation needs.
#[derive(Debug, Clone)]
pub struct LeaseCtx<'a> {
    pub store: &'a dyn ObjectStore,
    pub clock: &'a dyn Clock,
    pub entropy: &'a Entropy,
    pub worker: &'a str,
    pub ttl_ms: u64,
    pub retry: &'a Retry,
    /// What this claimant has seen of other attempts' leases, and since when on its
    /// own clock: expiry is decided from these observations, never by comparing the
    /// local clock with a time another machine wrote.
    pub observed: &'a Observations,
}

/// A claimant's observations of lease records held by others: per lease directory,
/// the top record's `(seq, write_id)` and the local time it was first seen.
///
/// A lease is expired for a claimant when the claimant itself has seen the same top
/// record, unchanged, for at least that record's TTL (its `expires_at_ms -
/// written_ms`, a difference on the holder's clock, so no offset between the two
/// clocks enters). A live holder renews well within its TTL, so its record changes
/// before any claimant's observation reaches the TTL, however far apart their clocks
/// are; only rates matter. The cost: a claimant that first sees a dead lease waits
/// one TTL from then, not from the holder's last renewal.
#[derive(Debug, Default)]
pub struct Observations(std::sync::Mutex<std::collections::HashMap<String, (u64, String, u64)>>);

impl Observations {
    /// Records that the top of `dir` is `(seq, write_id)` at local time `now`; returns
    /// the local time it was first seen unchanged.
    fn seen(&self, dir: &Path, seq: u64, write_id: &str, now: u64) -> u64 {
        let mut m = self.0.lock().expect("observations");
        let e = m
            .entry(dir.to_string())
            .or_insert_with(|| (seq, write_id.to_string(), now));
        if e.0 != seq || e.1 != write_id {
            *e = (seq, write_id.to_string(), now);
        }
        e.2
    }
    fn forget(&self, dir: &Path) {
        self.0.lock().expect("observations").remove(dir.as_ref());
    }
}

/// A lease this worker holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The lease directory (`leases/<phase>/<task>` or a slot).
    pub dir: Path,
    pub seq: u64,
    pub attempt: String,
    pub epoch: u64,
    pub expires_at_ms: u64,
    pub failures: u32,
    pub last_error: Option<String>,
    pub lost: u32,
    /// When this attempt claimed the lease, on the local clock (written into every
    /// record of the attempt as `since_ms`).
    pub since_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    Acquired(Held),
    /// Someone else holds it (until about `until_ms`) or won the race.
    Busy {
        until_ms: u64,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease {dir} was taken over (seq {seq} written by another attempt)")]
    Fenced { dir: String, seq: u64 },
    #[error(transparent)]
    Proto(#[from] ProtoError),
}

#[derive(Debug)]
pub enum CommitOutcome {
    /// Our record is the task's commit.
    Committed,
    /// Another attempt committed first; its record.
    AlreadyCommitted(Box<CommitRecord>),
}

pub fn seq_path(dir: &Path, seq: u64) -> Path {
    dir.clone().join(format!("{seq:010}.json"))
}

impl LeaseCtx<'_> {
    fn record(&self, held_like: &Held, seq: u64, kind: LeaseKind, write_id: &str) -> LeaseRecord {
        let now = self.clock.now_ms();
        LeaseRecord {
            version: VERSION,
            seq,
            kind,
            attempt: held_like.attempt.clone(),
            worker: self.worker.to_string(),
            epoch: held_like.epoch,
            expires_at_ms: if kind == LeaseKind::Lease {
                now + self.ttl_ms
            } else {
                now
            },
            written_ms: now,
            write_id: write_id.to_string(),
            failures: held_like.failures,
            last_error: held_like.last_error.clone(),
            lost: held_like.lost,
            since_ms: Some(held_like.since_ms),
        }
    }

    /// The highest-numbered lease record in `dir`, if any.
    pub async fn latest(&self, dir: &Path) -> Result<Option<LeaseRecord>, ProtoError> {
        let objs = list_all(self.store, dir, self.retry).await?;
        let Some(last) = objs
            .iter()
            .rev()
            .find(|m| m.location.as_ref().ends_with(".json"))
        else {
            return Ok(None);
        };
        get_json(self.store, &last.location, self.retry).await
    }

    /// Tries to take the lease in `dir`. With `fresh`, first tries `seq 0` (one
    /// request when nobody ever held it).
    pub async fn claim(&self, dir: &Path, fresh: bool) -> Result<Claim, ProtoError> {
        let now = self.clock.now_ms();
        let new_attempt = |epoch, failures, last_error, lost| Held {
            dir: dir.clone(),
            seq: 0,
            attempt: self.entropy.hex_id(8),
            epoch,
            expires_at_ms: 0,
            failures,
            last_error,
            lost,
            since_ms: now,
        };
        if fresh {
            let h = new_attempt(0, 0, None, 0);
            if let Some(held) = self.try_create(h, 0).await? {
                return Ok(Claim::Acquired(held));
            }
            // Somebody claimed it since the caller last looked: almost surely a live
            // lease. Come back when it would have expired (then with `fresh = false`).
            return Ok(Claim::Busy {
                until_ms: now + self.ttl_ms,
            });
        }
        let top = self.latest(dir).await?;
        // Observed now, after the listing and read (which retries may stretch): an
        // observation is never dated before the record could have been seen.
        let now = self.clock.now_ms();
        let Some(top) = top else {
            let h = new_attempt(0, 0, None, 0);
            return Ok(match self.try_create(h, 0).await? {
                Some(held) => Claim::Acquired(held),
                None => Claim::Busy { until_ms: now },
            });
        };
        if top.kind == LeaseKind::Lease {
            // The holder's TTL as it wrote it (a difference on one clock); a record
            // without a sane one counts with ours.
            let ttl = top
                .expires_at_ms
                .checked_sub(top.written_ms)
                .filter(|t| *t > 0 && *t <= 10 * self.ttl_ms.max(1))
                .unwrap_or(self.ttl_ms);
            let since = self.observed.seen(dir, top.seq, &top.write_id, now);
            if now < since.saturating_add(ttl) {
                return Ok(Claim::Busy {
                    until_ms: since.saturating_add(ttl),
                });
            }
        }
        self.observed.forget(dir);
        let lost = top.lost + u32::from(top.kind == LeaseKind::Lease);
        let h = new_attempt(top.epoch + 1, top.failures, top.last_error.clone(), lost);
        Ok(match self.try_create(h, top.seq + 1).await? {
            Some(held) => Claim::Acquired(held),
            None => Claim::Busy { until_ms: now },
        })
    }

    async fn try_create(&self, mut h: Held, seq: u64) -> Result<Option<Held>, ProtoError> {
        h.since_ms = self.clock.now_ms();
        let write_id = self.entropy.hex_id(8);
        let rec = self.record(&h, seq, LeaseKind::Lease, &write_id);
        match create_json(
            self.store,
            &seq_path(&h.dir, seq),
            &rec,
            &write_id,
            self.retry,
        )
        .await?
        {
            Created::Mine => {
                h.seq = seq;
                h.expires_at_ms = rec.expires_at_ms;
                Ok(Some(h))
            }
            Created::Theirs(_) => Ok(None),
        }
    }

    /// Extends the lease by writing `seq + 1`; fenced if another attempt wrote it.
    pub async fn renew(&self, held: &mut Held) -> Result<(), LeaseError> {
        let seq = held.seq + 1;
        let write_id = self.entropy.hex_id(8);
        let rec = self.record(held, seq, LeaseKind::Lease, &write_id);
        let path = seq_path(&held.dir, seq);
        match create_json(self.store, &path, &rec, &write_id, self.retry).await? {
            Created::Mine => {
                held.seq = seq;
                held.expires_at_ms = rec.expires_at_ms;
                Ok(())
            }
            Created::Theirs(b) => {
                // A renewal of ours that reported failure after its retries may have
                // landed: the record then names our attempt.
                let b = read_theirs(self.store, &path, b, self.retry).await?;
                let other: LeaseRecord = decode(&path, &b)?;
                if other.attempt == held.attempt && other.kind == LeaseKind::Lease {
                    held.seq = seq;
                    held.expires_at_ms = other.expires_at_ms;
                    return Box::pin(self.renew(held)).await;
                }
                Err(LeaseError::Fenced {
                    dir: held.dir.to_string(),
                    seq,
                })
            }
        }
    }

    /// Hands the lease back (optionally recording why the attempt gave up), so the
    /// next claim need not wait for expiry.
    pub async fn release(
        &self,
        held: &Held,
        error: Option<(String, u32)>,
    ) -> Result<(), LeaseError> {
        let seq = held.seq + 1;
        let write_id = self.entropy.hex_id(8);
        let mut h = held.clone();
        if let Some((e, failures)) = error {
            h.last_error = Some(e);
            h.failures = failures;
        }
        let rec = self.record(&h, seq, LeaseKind::Release, &write_id);
        match create_json(
            self.store,
            &seq_path(&held.dir, seq),
            &rec,
            &write_id,
            self.retry,
        )
        .await?
        {
            Created::Mine => Ok(()),
            Created::Theirs(_) => Err(LeaseError::Fenced {
                dir: held.dir.to_string(),
                seq,
            }),
        }
    }

    /// Ends whatever attempt holds the lease in `dir` by writing its next record, a
    /// `release` whose error is `reason`, on behalf of `by` (a backup attempt that
    /// committed the task): the holder's next renewal finds it and stops (fenced).
    /// Retries while the holder's renewals win the race; gives up after a few rounds
    /// (the holder's commit then finds the task committed instead). Returns whether
    /// the fence landed.
    pub async fn fence(&self, dir: &Path, by: &str, reason: &str) -> Result<bool, ProtoError> {
        for _ in 0..5 {
            let Some(top) = self.latest(dir).await? else {
                return Ok(false);
            };
            if top.kind != LeaseKind::Lease {
                // Already released (or fenced): nobody renews it.
                return Ok(true);
            }
            let like = Held {
                dir: dir.clone(),
                seq: top.seq,
                attempt: by.to_string(),
                epoch: top.epoch,
                expires_at_ms: 0,
                failures: top.failures,
                last_error: Some(reason.to_string()),
                lost: top.lost,
                since_ms: self.clock.now_ms(),
            };
            let write_id = self.entropy.hex_id(8);
            let rec = self.record(&like, top.seq + 1, LeaseKind::Release, &write_id);
            let path = seq_path(dir, top.seq + 1);
            if let Created::Mine =
                create_json(self.store, &path, &rec, &write_id, self.retry).await?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `held` still has at least `margin_ms` to run on the local clock.
    pub fn fresh_enough(&self, held: &Held, margin_ms: u64) -> bool {
        self.clock.now_ms() + margin_ms < held.expires_at_ms
    }

    /// Commits a task: create-only `path` with `record` (whose `write_id` must be
    /// fresh). Renews first when less than a quarter of the TTL is left, which
    /// detects fencing; a commit that finds another attempt's record loses.
    pub async fn commit(
        &self,
        held: &mut Held,
        path: &Path,
        record: &CommitRecord,
    ) -> Result<CommitOutcome, LeaseError> {
        if !self.fresh_enough(held, self.ttl_ms / 4) {
            self.renew(held).await?;
        }
        match create_json(self.store, path, record, &record.write_id, self.retry).await? {
            Created::Mine => Ok(CommitOutcome::Committed),
            Created::Theirs(b) => {
                let b = read_theirs(self.store, path, b, self.retry).await?;
                let other: CommitRecord = decode(path, &b)?;
                if other.write_id == record.write_id {
                    // A commit of ours that reported failure had landed.
                    return Ok(CommitOutcome::Committed);
                }
                Ok(CommitOutcome::AlreadyCommitted(Box::new(other)))
            }
        }
    }
}
