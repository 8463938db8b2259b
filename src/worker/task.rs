//! One task attempt: read its manifest, resolve its inputs, run the pipeline while a
//! heartbeat renews the lease, then commit (create-only) and publish — or release the
//! lease with the error, or record the task as failed after `job.max_attempts`
//! identical failures. A fenced attempt stops at once, commits nothing and deletes
//! what it staged.
use super::WorkerCtx;
/// Why an attempt failed (defined with the attempt, shared with the executors).
pub use super::attempt::TaskError;
use super::attempt::{Attempt, Produced};
use super::executor::{self, TaskRun};
use super::publish;
use crate::protocol::io::{ProtoError, create_json, get_json};
use crate::protocol::lease::{CommitOutcome, Held, LeaseCtx, LeaseError};
use crate::protocol::records::{
    CommitRecord, FINALIZE, PhaseKind, TaskManifest, TaskStats, TaskStatus, VERSION,
};
use crate::store::RequestCounts;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    Failed,
    AlreadyCommitted,
    Released,
    Fenced,
}

/// Runs one attempt of `task` under the lease `held` (and the lease-cap `slot`).
/// A `backup` attempt (docs/PROTOCOL.md §4, "Backup attempts") holds the task's
/// backup lease instead: it also stops once the task is committed by the original,
/// never records a failure (it releases its backup lease), and a backup that commits
/// fences the original attempt.
pub async fn run(
    ctx: &Arc<WorkerCtx>,
    phase: usize,
    task: &str,
    held: Held,
    slot: Option<Held>,
    backup: bool,
) -> Result<Outcome, ProtoError> {
    let counts = Arc::new(RequestCounts::default());
    let outcome = attempt(ctx, phase, task, held, slot, backup, counts.clone()).await;
    // A commit record carries its attempt's requests; any other attempt's go to the
    // worker's own counters, so `mdf status` and the costs include them.
    if !matches!(outcome, Ok(Outcome::Committed | Outcome::Failed)) {
        ctx.counts.add(&counts.snapshot());
    }
    outcome
}

async fn attempt(
    ctx: &Arc<WorkerCtx>,
    phase: usize,
    task: &str,
    held: Held,
    slot: Option<Held>,
    backup: bool,
    counts: Arc<RequestCounts>,
) -> Result<Outcome, ProtoError> {
    let reg = ctx.base.counting_into(counts.clone());
    let store = reg.open(&ctx.job.uri).map_err(|e| ProtoError::Corrupt {
        path: ctx.job.uri.to_uri_string(),
        message: e.to_string(),
    })?;
    let is_finalize = phase == ctx.job.manifest.phases.len();
    let phase_name = if is_finalize {
        FINALIZE.to_string()
    } else {
        ctx.job.manifest.phases[phase].name.clone()
    };
    let started_ms = ctx.clock.now_ms();
    let cancel = Arc::new(AtomicBool::new(false));
    let held = Arc::new(Mutex::new(held));
    let slot = Arc::new(Mutex::new(slot));
    let fenced = Arc::new(AtomicBool::new(false));
    // A backup attempt: the original committed the task meanwhile.
    let outraced = Arc::new(AtomicBool::new(false));
    let commit_path = ctx.job.paths.commit(&phase_name, task);

    // Heartbeat: renew the lease (and slot) until told to stop; fenced → cancel. It
    // stops with the attempt however that ends: an attempt dropped mid-way (its worker
    // stopped from outside) must not leave a task renewing a lease nobody works under.
    let mut hb = {
        let ctx = ctx.clone();
        let store = store.clone();
        let (held, slot, cancel, fenced, outraced, commit_path) = (
            held.clone(),
            slot.clone(),
            cancel.clone(),
            fenced.clone(),
            outraced.clone(),
            commit_path.clone(),
        );
        tokio::spawn(async move {
            let every = Duration::from_secs(ctx.job.spec.job.heartbeat_secs);
            let lease = ctx.lease(store.as_ref());
            // Renews every `every` exactly, looking at the shutdown flag in between.
            let poll = ctx.flag_poll(Duration::from_millis(200));
            let mut last = tokio::time::Instant::now();
            loop {
                let beat = last + every;
                tokio::time::sleep_until(beat.min(tokio::time::Instant::now() + poll)).await;
                if ctx.shutdown.load(Ordering::Relaxed) {
                    cancel.store(true, Ordering::Relaxed);
                }
                if tokio::time::Instant::now() < beat {
                    continue;
                }
                last = tokio::time::Instant::now();
                let mut h = held.lock().await;
                match lease.renew(&mut h).await {
                    Ok(()) => {}
                    Err(LeaseError::Fenced { .. }) => {
                        fenced.store(true, Ordering::Relaxed);
                        cancel.store(true, Ordering::Relaxed);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "lease renewal failed; retrying at the next beat")
                    }
                }
                drop(h);
                if let Some(s) = slot.lock().await.as_mut()
                    && let Err(e) = lease.renew(s).await
                {
                    tracing::warn!(error = %e, "slot renewal failed");
                }
                // Nobody fences a backup: it looks for the original's commit itself
                // (one HEAD per beat, only while a backup runs).
                if backup {
                    use object_store::ObjectStoreExt;
                    if store.head(&commit_path).await.is_ok() {
                        outraced.store(true, Ordering::Relaxed);
                        cancel.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            }
        })
    };
    let hb_guard = AbortOnDrop(Some((hb.abort_handle(), cancel.clone())));

    let attempt_id = held.lock().await.attempt.clone();
    let lost = held.lock().await.lost;
    let result = if !backup && lost >= ctx.job.spec.job.max_lost_leases {
        Attempt::Failed(TaskError::LostTooOften(lost))
    } else if is_finalize {
        match super::finalize::run(ctx, &reg).await {
            Ok((outputs, stats)) => Attempt::Done(Box::new(Produced {
                outputs,
                rejects: vec![],
                tables: vec![],
                stats,
                shuffle: None,
                changed: None,
            })),
            Err(e) => Attempt::Failed(TaskError::Finalize(e)),
        }
    } else {
        execute(
            ctx,
            &reg,
            &store,
            phase,
            &phase_name,
            task,
            &attempt_id,
            cancel.clone(),
        )
        .await
    };
    hb.abort();
    let _ = (&mut hb).await;
    hb_guard.disarm();

    let lease = ctx.lease(store.as_ref());
    let mut held = held.lock().await.clone();
    let slot = slot.lock().await.clone();
    let release_slot = || async {
        if let Some(s) = &slot {
            let _ = lease.release(s, None).await;
        }
    };
    if fenced.load(Ordering::Relaxed) {
        tracing::warn!(
            task,
            "lease taken over by another worker; attempt abandoned"
        );
        release_slot().await;
        discard_staged(ctx, &phase_name, task, &attempt_id).await;
        return Ok(Outcome::Fenced);
    }
    if outraced.load(Ordering::Relaxed) {
        tracing::info!(
            task,
            "the original attempt committed first; backup abandoned"
        );
        let _ = lease.release(&held, None).await;
        release_slot().await;
        discard_staged(ctx, &phase_name, task, &attempt_id).await;
        return Ok(Outcome::AlreadyCommitted);
    }
    // Hands the lease (and slot) back, with why, and removes what the attempt staged
    // (bounded: the instance may be going away).
    let give_back = async |error: Option<(String, u32)>| {
        let _ = lease.release(&held, error).await;
        release_slot().await;
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            discard_staged(ctx, &phase_name, task, &attempt_id),
        )
        .await;
    };
    if backup && !matches!(result, Attempt::Done(_)) {
        // A backup never records a failure: the original attempt's outcome counts.
        let error = match &result {
            Attempt::Failed(e) => Some((format!("backup attempt failed: {e}"), 0)),
            _ => None,
        };
        tracing::warn!(task, error = ?error, "backup attempt ended without a result");
        give_back(error).await;
        return Ok(Outcome::Released);
    }
    let mut record = CommitRecord {
        version: VERSION,
        job_id: ctx.job.manifest.job_id.clone(),
        phase: phase_name.clone(),
        task_id: task.to_string(),
        status: TaskStatus::Committed,
        attempt: held.attempt.clone(),
        worker: ctx.worker_id.clone(),
        epoch: held.epoch,
        write_id: ctx.entropy.hex_id(8),
        error: None,
        outputs: vec![],
        rejects: vec![],
        stats: TaskStats::default(),
        requests: Default::default(),
        started_ms,
        finished_ms: 0,
        reused_from: None,
        shuffle: None,
        changed: None,
        speculative: backup,
        tables: vec![],
    };
    match result {
        Attempt::Done(p) => {
            record.outputs = p.outputs;
            record.rejects = p.rejects;
            record.tables = p.tables;
            record.stats = p.stats;
            record.shuffle = p.shuffle;
            record.changed = p.changed;
        }
        Attempt::Cancelled => {
            // Shutdown: hand the lease back so another worker starts at once, then
            // remove what the attempt staged.
            give_back(None).await;
            return Ok(Outcome::Released);
        }
        Attempt::Failed(e) if e.is_retryable() => {
            // Attempt ids appear in staged paths; without them equal failures compare equal.
            let e = e.to_string().replace(&held.attempt, "<attempt>");
            let failures = if held.last_error.as_deref() == Some(e.as_str()) {
                held.failures + 1
            } else {
                1
            };
            tracing::warn!(task, failures, error = %e, "task attempt failed");
            if failures < ctx.job.spec.job.max_attempts {
                let _ = lease.release(&held, Some((e, failures))).await;
                release_slot().await;
                return Ok(Outcome::Released);
            }
            record.status = TaskStatus::Failed;
            record.error = Some(format!("failed {failures} times: {e}"));
        }
        Attempt::Failed(e) => {
            record.status = TaskStatus::Failed;
            record.error = Some(e.to_string());
        }
    }
    record.finished_ms = ctx.clock.now_ms();
    // Count the commit PUT itself so the record holds every request of the task.
    counts.put.fetch_add(1, Ordering::Relaxed);
    record.requests = counts.snapshot();
    let path = ctx.job.paths.commit(&phase_name, task);
    let plain = ctx
        .base
        .open(&ctx.job.uri)
        .map_err(|e| ProtoError::Corrupt {
            path: path.to_string(),
            message: e.to_string(),
        })?;
    // The commit keeps the full SlowDown budget (`ctx.retry`): it is create-only, so a
    // late landing is still exactly one commit, and giving up would rerun the task.
    let commit_lease = LeaseCtx {
        store: plain.as_ref(),
        retry: &ctx.retry,
        ..lease.clone()
    };
    let outcome = match commit_lease.commit(&mut held, &path, &record).await {
        Ok(CommitOutcome::Committed) => {
            // Its create-only write landed: the object holds exactly this record, for
            // the shard's done marker.
            if ctx.job.paths.shard_digits(&phase_name) > 0 {
                ctx.own_commits
                    .lock()
                    .expect("own commits")
                    .insert((phase_name.clone(), task.to_string()), record.clone());
            }
            tracing::info!(
                phase = %phase_name,
                task,
                worker = %ctx.worker_id,
                status = ?record.status,
                records_in = record.stats.records_in,
                records_out = record.stats.records_out,
                rejected = record.stats.rejected,
                secs = (record.finished_ms.saturating_sub(record.started_ms)) as f64 / 1000.0,
                requests = record.requests.total(),
                "task committed"
            );
            if backup {
                // Stop the original at its next renewal rather than let it run on
                // to find the commit at its end.
                let reason = format!("committed by backup attempt {}", record.attempt);
                let original = ctx.job.paths.lease_dir(&phase_name, task);
                if let Err(e) = lease.fence(&original, &record.attempt, &reason).await {
                    tracing::warn!(error = %e, task, "could not fence the original attempt");
                }
                tracing::info!(phase = %phase_name, task, "backup attempt committed first");
            }
            if record.status == TaskStatus::Committed
                && is_label_step(ctx, phase)
                && record.shuffle.is_none()
            {
                // This step skipped (a label step's object is absent exactly then).
                let _ = commit_converged(ctx, phase, phase + 1, None).await;
            }
            if record.status == TaskStatus::Committed {
                let writer = crate::io::write::writer(ctx.job.spec.output.format);
                let targets = writer
                    .map_err(|e| e.to_string())
                    .and_then(|w| {
                        publish::targets(&ctx.job.paths, &ctx.job.manifest, &record, w)
                            .map_err(|e| e.to_string())
                    })
                    .unwrap_or_default();
                for t in targets {
                    if let Err(e) = publish::copy(&ctx.coord, &t.from, &t.to, &ctx.retry).await {
                        tracing::warn!(error = %e, "publish failed; finalize will publish it");
                    }
                }
                Outcome::Committed
            } else {
                Outcome::Failed
            }
        }
        Ok(CommitOutcome::AlreadyCommitted(_)) => {
            discard_staged(ctx, &phase_name, task, &attempt_id).await;
            Outcome::AlreadyCommitted
        }
        Err(LeaseError::Fenced { .. }) => {
            discard_staged(ctx, &phase_name, task, &attempt_id).await;
            Outcome::Fenced
        }
        Err(LeaseError::Proto(e)) => {
            release_slot().await;
            return Err(e);
        }
    };
    release_slot().await;
    Ok(outcome)
}

/// When dropped: aborts the heartbeat and cancels the attempt's work (a pipeline on
/// a blocking thread stops at its next batch instead of staging on without a lease).
/// `disarm` once the attempt's work is over.
struct AbortOnDrop(Option<(tokio::task::AbortHandle, Arc<AtomicBool>)>);

impl AbortOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some((hb, cancel)) = self.0.take() {
            hb.abort();
            cancel.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether `phase` is a near-dedup label step (which skips once the labels converged).
pub(super) fn is_label_step(ctx: &WorkerCtx, phase: usize) -> bool {
    ctx.job.manifest.phases.get(phase).is_some_and(|p| {
        p.kind == PhaseKind::Propagate
            && p.dedup
                .as_ref()
                .is_some_and(|d| d.step > 0 && d.params.kind.is_near())
    })
}

/// Once the labels of a near dedup converged (a label step finds the steps before it
/// changed nothing), every later label step of that dedup stage skips: convergence is
/// read from committed records only, so it is final. Commits the label steps of
/// `stage_phase`'s stage from phase `from` on as skipped, create-only and without
/// leases, instead of leasing each task of each remaining round (`max_rounds` is an
/// upper bound; real clusters converge in 2–3). Safe beside workers running those
/// tasks: a skip has no output, every such commit is the same skip, and the first
/// create wins.
///
/// One worker does it: the one whose create of the stage's `converged/` marker
/// wins; the others commit only `own` (the task they picked), so a fleet that reaches
/// the converged step at once does not write the tail once per worker. Steps go in
/// order, each step's tasks 16 at a time, stopping at the first that fails (a later
/// step committed before an earlier one would let workers lease its tasks against a
/// missing upstream). Best effort: a task not committed here is leased and skipped as
/// before. Returns the (phase index, task) pairs now committed, by this call or before.
pub(super) async fn commit_converged(
    ctx: &WorkerCtx,
    stage_phase: usize,
    from: usize,
    own: Option<&str>,
) -> Vec<(usize, String)> {
    use futures::StreamExt;
    let phases = &ctx.job.manifest.phases;
    let stage = phases[stage_phase].dedup.as_ref().map(|d| &d.stage);
    let steps: Vec<usize> = (from..phases.len())
        .filter(|&q| {
            phases[q].kind == PhaseKind::Propagate
                && phases[q].dedup.as_ref().map(|d| &d.stage) == stage
        })
        .collect();
    let Some(&first) = steps.first() else {
        return vec![];
    };
    let Ok(store) = ctx.coord.open(&ctx.job.uri) else {
        return vec![];
    };
    let now = ctx.clock.now_ms();
    let record = |q: usize, t: &str| CommitRecord {
        version: VERSION,
        job_id: ctx.job.manifest.job_id.clone(),
        phase: phases[q].name.clone(),
        task_id: t.to_string(),
        status: TaskStatus::Committed,
        attempt: "converged".into(),
        worker: ctx.worker_id.clone(),
        epoch: 0,
        write_id: ctx.entropy.hex_id(8),
        error: None,
        outputs: vec![],
        rejects: vec![],
        stats: TaskStats::default(),
        requests: Default::default(),
        started_ms: now,
        finished_ms: now,
        reused_from: None,
        shuffle: None,
        changed: None,
        speculative: false,
        tables: vec![],
    };
    let commit = |q: usize, t: String| {
        let (store, rec) = (store.clone(), record(q, &t));
        async move {
            let path = ctx.job.paths.commit(&phases[q].name, &t);
            create_json(store.as_ref(), &path, &rec, &rec.write_id, &ctx.retry)
                .await
                .ok()
                .map(|_| (q, t))
        }
    };
    // Whoever wins the marker writes the tail; the others only their own task.
    let marker = serde_json::json!({"from": phases[first].name, "worker": ctx.worker_id});
    let write_id = ctx.entropy.hex_id(8);
    let mine = matches!(
        create_json(
            store.as_ref(),
            &ctx.job.paths.converged(stage.map_or("", |s| s.as_str())),
            &serde_json::json!({"marker": marker, "write_id": write_id}),
            &write_id,
            &ctx.retry,
        )
        .await,
        Ok(crate::protocol::io::Created::Mine)
    );
    if !mine {
        return match own {
            Some(t) => commit(from, t.to_string()).await.into_iter().collect(),
            None => vec![],
        };
    }
    let mut settled = Vec::new();
    for &q in &steps {
        let ids = ctx.task_ids(q);
        let n = ids.len();
        let done: Vec<(usize, String)> = futures::stream::iter(ids)
            .map(|t| commit(q, t))
            .buffer_unordered(16)
            .filter_map(std::future::ready)
            .collect()
            .await;
        let complete = done.len() == n;
        settled.extend(done);
        if !complete {
            break;
        }
    }
    tracing::info!(
        phase = %phases[first].name,
        steps = steps.len(),
        tasks = settled.len(),
        "near-dedup labels converged: the remaining label steps committed as skipped"
    );
    settled
}

/// Deletes what a fenced (or outraced) attempt staged: no commit names these files,
/// ever. The finalize janitor deletes such files too, but only those staged before it
/// ran; a zombie resumed after the job finished would otherwise leave its last
/// writes behind for good. Best effort: what fails here is only a leftover.
async fn discard_staged(ctx: &WorkerCtx, phase: &str, task: &str, attempt: &str) {
    let dir = ctx.job.paths.attempt_dir(phase, task, attempt);
    let Ok(store) = ctx.coord.open(&dir) else {
        return;
    };
    let files = match crate::protocol::io::list_all(store.as_ref(), &dir.path, &ctx.retry).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "could not list a fenced attempt's staged files");
            return;
        }
    };
    for f in files {
        use object_store::ObjectStoreExt;
        if let Err(e) = ctx.retry.run(|| store.delete(&f.location)).await {
            tracing::warn!(error = %e, "could not delete a fenced attempt's staged file");
        }
    }
}

/// Reads the task's manifest and hands the attempt to its phase's executor.
#[allow(clippy::too_many_arguments)]
async fn execute(
    ctx: &Arc<WorkerCtx>,
    reg: &crate::store::Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: usize,
    phase_name: &str,
    task: &str,
    attempt: &str,
    cancel: Arc<AtomicBool>,
) -> Attempt {
    let job = &ctx.job;
    // A dedup reduce, propagate or apply task reads every task of its map phase.
    if job.manifest.phases[phase].kind != PhaseKind::Map
        && let Err(e) = ctx.ensure_ids(store, phase).await
    {
        return Attempt::Failed(e.into());
    }
    let manifest = if job.paths.shard_digits(phase_name) > 0 {
        ctx.sharded_manifest(store, phase_name, task).await
    } else {
        get_json(
            store.as_ref(),
            &job.paths.task(phase_name, task),
            &ctx.retry,
        )
        .await
    };
    let manifest: TaskManifest = match manifest {
        Ok(Some(m)) => m,
        Ok(None) => {
            return Attempt::Failed(TaskError::ManifestMissing {
                phase: phase_name.to_string(),
                task: task.to_string(),
            });
        }
        Err(e) => return Attempt::Failed(e.into()),
    };
    let run = TaskRun {
        ctx,
        reg,
        store,
        phase,
        phase_name,
        task,
        attempt,
        cancel,
        manifest,
        ids: ctx.all_ids(),
    };
    let exec: Box<dyn executor::PhaseExecutor> = match &ctx.simulate {
        Some(w) => Box::new(executor::Simulated(w.clone())),
        None => executor::for_phase(&job.manifest.phases[phase]),
    };
    tracing::debug!(
        phase = phase_name,
        task,
        executor = exec.name(),
        "task attempt"
    );
    exec.execute(&run).await
}
