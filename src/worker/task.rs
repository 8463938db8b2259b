//! One task attempt: read its manifest, resolve its inputs, run the pipeline while a
//! heartbeat renews the lease, then commit (create-only) and publish — or release the
//! lease with the error, or record the task as failed after `job.max_attempts`
//! identical failures. A fenced attempt stops at once, commits nothing and deletes
//! what it staged.
use super::WorkerCtx;
use super::pipeline::{self, PipelineError, PipelineSpec};
use super::publish;
use crate::protocol::io::{ProtoError, get_json};
use crate::protocol::lease::{CommitOutcome, Held, LeaseCtx, LeaseError};
use crate::protocol::records::{
    CommitRecord, FINALIZE, InputSlice, OutputFile, PhaseKind, TaskManifest, TaskStats, TaskStatus,
    VERSION,
};
use crate::spec::Format;
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

/// What an attempt produced before committing.
struct Produced {
    outputs: Vec<OutputFile>,
    rejects: Vec<OutputFile>,
    stats: TaskStats,
    /// Dedup: keys object (map) or decisions object (reduce).
    shuffle: Option<OutputFile>,
    /// Near-duplicate record steps: labels changed.
    changed: Option<u64>,
}

enum Attempt {
    Done(Box<Produced>),
    /// A deterministic failure: counts towards `max_attempts`.
    Error(String),
    /// Failed for good without retrying (upstream failed, lost too often).
    Fatal(String),
    Cancelled,
}

pub async fn run(
    ctx: &Arc<WorkerCtx>,
    phase: usize,
    task: &str,
    held: Held,
    slot: Option<Held>,
) -> Result<Outcome, ProtoError> {
    let counts = Arc::new(RequestCounts::default());
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

    // Heartbeat: renew the lease (and slot) until told to stop; fenced → cancel.
    let hb = {
        let ctx = ctx.clone();
        let store = store.clone();
        let (held, slot, cancel, fenced) =
            (held.clone(), slot.clone(), cancel.clone(), fenced.clone());
        tokio::spawn(async move {
            let every = Duration::from_secs(ctx.job.spec.job.heartbeat_secs);
            let lease = ctx.lease(store.as_ref());
            let mut ticks = tokio::time::interval(Duration::from_millis(200));
            let mut last = tokio::time::Instant::now();
            loop {
                ticks.tick().await;
                if ctx.shutdown.load(Ordering::Relaxed) {
                    cancel.store(true, Ordering::Relaxed);
                }
                if last.elapsed() < every {
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
            }
        })
    };

    let attempt_id = held.lock().await.attempt.clone();
    let lost = held.lock().await.lost;
    let result = if lost >= ctx.job.spec.job.max_lost_leases {
        Attempt::Fatal(format!(
            "the task's worker was lost {lost} times (killed or out of memory)"
        ))
    } else if is_finalize {
        match super::finalize::run(ctx, &reg).await {
            Ok((outputs, stats)) => Attempt::Done(Box::new(Produced {
                outputs,
                rejects: vec![],
                stats,
                shuffle: None,
                changed: None,
            })),
            Err(e) => Attempt::Error(e),
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
    let _ = hb.await;

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
    };
    match result {
        Attempt::Done(p) => {
            record.outputs = p.outputs;
            record.rejects = p.rejects;
            record.stats = p.stats;
            record.shuffle = p.shuffle;
            record.changed = p.changed;
        }
        Attempt::Cancelled => {
            // Shutdown: hand the lease back so another worker starts at once.
            let _ = lease.release(&held, None).await;
            release_slot().await;
            return Ok(Outcome::Released);
        }
        Attempt::Error(e) => {
            // Attempt ids appear in staged paths; without them equal failures compare equal.
            let e = e.replace(&held.attempt, "<attempt>");
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
        Attempt::Fatal(e) => {
            record.status = TaskStatus::Failed;
            record.error = Some(e);
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
    let commit_lease = LeaseCtx {
        store: plain.as_ref(),
        ..lease.clone()
    };
    let outcome = match commit_lease.commit(&mut held, &path, &record).await {
        Ok(CommitOutcome::Committed) => {
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
            if record.status == TaskStatus::Committed {
                let lance = ctx.job.spec.output.format == crate::spec::OutputFormat::Lance;
                let targets = publish::targets(&ctx.job.paths, &ctx.job.manifest, &record, lance)
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
    let manifest: TaskManifest = match get_json(
        store.as_ref(),
        &job.paths.task(phase_name, task),
        &ctx.retry,
    )
    .await
    {
        Ok(Some(m)) => m,
        Ok(None) => return Attempt::Fatal(format!("task manifest {phase_name}/{task} is missing")),
        Err(e) => return Attempt::Error(e.to_string()),
    };
    let plan = &job.manifest.phases[phase];
    if matches!(plan.kind, PhaseKind::Reduce | PhaseKind::Propagate) {
        let dir = job.paths.attempt_dir(phase_name, task, attempt);
        let near = plan
            .dedup
            .as_ref()
            .is_some_and(|d| !d.params.kind.is_exact());
        let done = if near {
            super::dedup::near_step(ctx, reg, store, phase, task, &dir, &cancel).await
        } else {
            super::dedup::reduce(ctx, reg, store, phase, task, &dir, &cancel)
                .await
                .map(|(f, s)| (Some(f), s, None))
        };
        return match done {
            Ok((file, stats, changed)) => Attempt::Done(Box::new(Produced {
                outputs: vec![],
                rejects: vec![],
                stats,
                shuffle: file,
                changed,
            })),
            Err(_) if cancel.load(Ordering::Relaxed) => Attempt::Cancelled,
            Err(e) if e.is_final() => Attempt::Fatal(e.to_string()),
            Err(e) => Attempt::Error(e.to_string()),
        };
    }
    // An apply task reads its map task's records (the phase before the reduce).
    let upstream_phase = match (&plan.kind, &plan.dedup) {
        (PhaseKind::Apply, Some(d)) => d.map_phase,
        _ => phase.saturating_sub(1),
    };
    let mut stages = ctx.stages[phase].clone();
    let mut input_schema = Arc::new(plan.input_schema.clone());
    if let (PhaseKind::Apply, Some(d)) = (&plan.kind, &plan.dedup) {
        let Some(up) = manifest.upstream.first() else {
            return Attempt::Fatal(format!("apply task {task} has no map task"));
        };
        let decisions = match super::dedup::decisions_for(ctx, reg, store, d, up).await {
            Ok(x) => x,
            Err(e) if e.is_final() => return Attempt::Fatal(e.to_string()),
            Err(e) => return Attempt::Error(e.to_string()),
        };
        let apply = super::shuffle::Apply {
            decisions,
            cluster_column: d.params.cluster_column,
        };
        stages.insert(
            0,
            super::pipeline::BoundStage {
                name: d.stage.clone(),
                op: Arc::new(crate::ops::FilterOp(Box::new(apply))),
                out_schema: input_schema.clone(),
                then_keep: None,
                histograms: vec![],
            },
        );
        input_schema = Arc::new(job.manifest.phases[d.map_phase].output_schema.clone());
    }
    let inputs: Vec<InputSlice> = if phase == 0 {
        manifest.inputs.clone()
    } else {
        let mut v = Vec::new();
        for up in &manifest.upstream {
            let prev = &job.manifest.phases[upstream_phase].name;
            match get_json::<CommitRecord>(store.as_ref(), &job.paths.commit(prev, up), &ctx.retry)
                .await
            {
                Ok(Some(r)) if r.status == TaskStatus::Committed => {
                    if let Some(bad) = r.outputs.iter().find_map(|f| {
                        job.paths
                            .check_file(
                                &f.uri,
                                r.reused_from.as_deref(),
                                job.manifest.reused_from.as_deref(),
                            )
                            .err()
                    }) {
                        return Attempt::Fatal(bad);
                    }
                    v.extend(r.outputs.iter().map(|f| InputSlice {
                        uri: f.uri.clone(),
                        size: f.bytes,
                        etag: None,
                        format: Format::Parquet,
                        start: 0,
                        end: f.bytes,
                    }));
                }
                Ok(Some(r)) => {
                    return Attempt::Fatal(format!(
                        "upstream task {prev}/{up} failed: {}",
                        r.error.unwrap_or_default()
                    ));
                }
                Ok(None) => {
                    return Attempt::Error(format!("upstream task {prev}/{up} is not committed"));
                }
                Err(e) => return Attempt::Error(e.to_string()),
            }
        }
        v
    };
    let spec = &job.spec;
    let last = plan.last;
    // A phase ending in a dedup stage writes keys for the next (reduce) phase.
    let keys_of = job
        .manifest
        .phases
        .get(phase + 1)
        .filter(|p| p.kind == PhaseKind::Reduce)
        .and_then(|p| p.dedup.clone());
    let pspec = PipelineSpec {
        registry: reg.clone(),
        handle: tokio::runtime::Handle::current(),
        inputs,
        input_schema,
        assign_ids: phase == 0,
        download: spec.input.download.clone(),
        stages,
        output_schema: Arc::new(plan.output_schema.clone()),
        out_dir: job.paths.attempt_dir(phase_name, task, attempt),
        props: super::writer::properties(&spec.output),
        target_file_bytes: if last {
            spec.output.target_file_bytes
        } else {
            spec.output.target_file_bytes.min(256 << 20)
        },
        lance: last && spec.output.format == crate::spec::OutputFormat::Lance,
        batch_rows: spec.job.batch_rows,
        batch_bytes: spec.job.batch_bytes,
        channel_batches: spec.job.channel_batches,
        max_record_bytes: spec.input.max_record_bytes as usize,
        keep_rejected_records: spec.rejects.include_record,
        cancel,
        keys: keys_of.as_ref().map(|d| super::pipeline::KeysSpec {
            params: d.params.clone(),
            partitions: d.partitions,
        }),
    };
    match tokio::task::spawn_blocking(move || pipeline::run(pspec)).await {
        Ok(Ok(out)) => {
            // Pass 1 of a dedup: the keys object, beside the staged records.
            let shuffle = match out.keys {
                Some(keys) => {
                    let dir = job.paths.attempt_dir(phase_name, task, attempt);
                    match super::dedup::write_keys(reg, &dir, keys).await {
                        Ok(f) => Some(f),
                        Err(e) => return Attempt::Error(e),
                    }
                }
                None => None,
            };
            Attempt::Done(Box::new(Produced {
                outputs: out.outputs,
                rejects: out.rejects,
                stats: out.stats,
                shuffle,
                changed: None,
            }))
        }
        Ok(Err(
            PipelineError::Cancelled | PipelineError::Read(super::readers::ReadError::Cancelled),
        )) => Attempt::Cancelled,
        // Rereading will not bring the planned version back: fail the task at once.
        Ok(Err(e @ PipelineError::Read(super::readers::ReadError::Changed { .. }))) => {
            Attempt::Fatal(e.to_string())
        }
        Ok(Err(e)) => Attempt::Error(e.to_string()),
        // The panic's message, not tokio's (whose task id differs on every attempt).
        Err(e) => Attempt::Error(pipeline::join_error("the pipeline", e)),
    }
}
