//! The I/O side of the dedup shuffle (docs/DEDUP.md): a map task's keys object, a
//! reduce task (ranged reads of every keys object, external sort, decisions object)
//! and the decisions an apply task needs. Everything is located through commit
//! records, never through listings of staged files.
use super::WorkerCtx;
use super::keyspill::KeySpill;
use super::near;
use super::shuffle::{self, Decision, ExternalSort, KeyEntry, Sourced};
use crate::protocol::hash16;
use crate::protocol::io::get_json;
use crate::protocol::records::{
    CLUSTER_SIZE, CommitRecord, DedupPhase, NEAR_GROUP_SIZE, OutputFile, TaskStats, TaskStatus,
};
use crate::store::{Registry, Uri};
use bytes::Bytes;
use object_store::ObjectStoreExt;
use std::io::Read;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// Why a dedup task could not do its work, typed so the worker decides from the kind,
/// never from the text: a failed upstream task or clusters that did not converge are
/// final (the task fails at once: no retry can change them); anything else, such as
/// a storage error, counts towards `job.max_attempts` like any task error.
#[derive(Debug, thiserror::Error)]
pub enum ShuffleError {
    #[error("upstream task {phase}/{task} failed: {error}")]
    UpstreamFailed {
        phase: String,
        task: String,
        error: String,
    },
    #[error(
        "near-duplicate clusters failed to converge in max_rounds = {max_rounds} rounds ({changed} labels still changing): raise params.max_rounds of stage {stage:?}"
    )]
    NotConverged {
        max_rounds: u32,
        changed: u64,
        stage: String,
    },
    #[error("{0}")]
    Other(String),
}

impl ShuffleError {
    /// Whether retrying the task cannot help.
    pub fn is_final(&self) -> bool {
        match self {
            ShuffleError::UpstreamFailed { .. } | ShuffleError::NotConverged { .. } => true,
            ShuffleError::Other(_) => false,
        }
    }

    fn upstream_failed(phase: &str, task: &str, rec: &CommitRecord) -> Self {
        ShuffleError::UpstreamFailed {
            phase: phase.to_string(),
            task: task.to_string(),
            error: rec.error.clone().unwrap_or_default(),
        }
    }
}

impl From<String> for ShuffleError {
    fn from(e: String) -> Self {
        ShuffleError::Other(e)
    }
}

impl From<&str> for ShuffleError {
    fn from(e: &str) -> Self {
        ShuffleError::Other(e.to_string())
    }
}

fn join_error(e: tokio::task::JoinError) -> String {
    super::pipeline::join_error("a dedup computation", e)
}

/// Where reducers spill sorted runs: `MDF_SPILL_DIR`, else the system temp dir.
pub fn spill_dir() -> std::path::PathBuf {
    std::env::var_os("MDF_SPILL_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir)
        .join("mdf-spill")
}

/// A committed task's record, read once per worker process (commit records are
/// create-only, so a cached copy never goes stale).
pub async fn commit_of(
    ctx: &WorkerCtx,
    store: &dyn object_store::ObjectStore,
    phase: &str,
    task: &str,
) -> Result<Arc<CommitRecord>, String> {
    let key = (phase.to_string(), task.to_string());
    if let Some(r) = ctx.commits.lock().expect("commit cache").get(&key) {
        return Ok(r.clone());
    }
    let rec: CommitRecord = get_json(store, &ctx.job.paths.commit(phase, task), &ctx.retry)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("upstream task {phase}/{task} is not committed"))?;
    let rec = Arc::new(rec);
    ctx.commits
        .lock()
        .expect("commit cache")
        .insert(key, rec.clone());
    Ok(rec)
}

async fn get_range(
    reg: &Registry,
    ctx: &WorkerCtx,
    uri: &str,
    range: std::ops::Range<u64>,
) -> Result<Bytes, String> {
    let (store, u) = reg.resolve(uri).map_err(|e| e.to_string())?;
    if range.is_empty() {
        return Ok(Bytes::new());
    }
    ctx.retry
        .run(|| {
            let (store, path, range) = (store.clone(), u.path.clone(), range.clone());
            async move { store.get_range(&path, range).await }
        })
        .await
        .map_err(|e| format!("reading {uri}: {e}"))
}

/// Section `i` of a shuffle object: its offsets from the header, then its bytes.
async fn section(
    reg: &Registry,
    ctx: &WorkerCtx,
    file: &OutputFile,
    i: u64,
) -> Result<Bytes, String> {
    let head = get_range(reg, ctx, &file.uri, shuffle::offsets_range(i)).await?;
    let (a, z) = shuffle::parse_offsets(&head).map_err(|e| format!("{}: {e}", file.uri))?;
    if z > file.bytes {
        return Err(format!("{}: section past the end of the object", file.uri));
    }
    get_range(reg, ctx, &file.uri, a..z).await
}

/// Writes a map task's keys object into its attempt directory: from memory, or
/// merged from the runs its keys spilled, uploaded in parts when large.
pub async fn write_keys(reg: &Registry, dir: &Uri, keys: KeySpill) -> Result<OutputFile, String> {
    let rows = keys.rows();
    if keys.runs() > 0 {
        tracing::info!(
            runs = keys.runs(),
            budget_bytes = keys.budget_bytes(),
            "map keys exceeded half of params.memory and were spilled to disk"
        );
    }
    let (len, reader) = tokio::task::spawn_blocking(move || keys.finish())
        .await
        .map_err(join_error)?
        .map_err(|e| format!("merging spilled keys: {e}"))?;
    let uri = dir.child("keys.bin");
    let (blake3, written) = upload_file(reg, &uri, reader).await?;
    if written != len {
        return Err(format!("keys object: wrote {written} of {len} bytes"));
    }
    Ok(OutputFile {
        uri: uri.to_uri_string(),
        rows,
        bytes: len,
        blake3,
    })
}

/// The partition a reduce task owns, from its id.
fn partition_of_task(fp: &str, task: &str, partitions: u32) -> Option<u32> {
    (0..partitions).find(|r| hash16(&[fp, "partition", &r.to_string()]) == task)
}

/// One reduce task: its key range from every committed map task, grouped and decided
/// in bounded memory; the decisions object is written into the attempt directory.
pub async fn reduce(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: usize,
    task: &str,
    out_dir: &Uri,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<(OutputFile, TaskStats), ShuffleError> {
    let plan = &ctx.job.manifest.phases[phase];
    let d: &DedupPhase = plan
        .dedup
        .as_ref()
        .ok_or("reduce phase without a dedup plan")?;
    let r = partition_of_task(&plan.fingerprint, task, d.partitions)
        .ok_or_else(|| format!("task {task} is not a partition of {}", plan.name))?;
    let dir = spill_dir();
    let mut sorter = ExternalSort::<Sourced>::new(d.params.memory_bytes / 2, dir.clone());
    // Keys objects hold KeyEntry; the task is known by which object it came from.
    let mut input_bytes = read_sections(
        ctx,
        reg,
        store,
        d.map_phase,
        r as u64,
        cancel,
        |ti, uri, b| {
            for e in shuffle::entries::<KeyEntry>(&b).map_err(|e| format!("{uri}: {e}"))? {
                sorter
                    .push(Sourced { e, task: ti as u32 })
                    .map_err(|e| format!("spilling to {}: {e}", dir.display()))?;
            }
            Ok(())
        },
    )
    .await?;
    if let Some(uri) = &d.params.against {
        input_bytes += earlier_keys(ctx, reg, uri, d, r, &mut sorter).await?;
    }
    let memory = d.params.memory_bytes;
    let cluster = d.params.cluster_column;
    let n_tasks = ctx.task_ids(d.map_phase).len() as u32;
    let (file, len, stats) = tokio::task::spawn_blocking(move || {
        shuffle::finish_reduce(sorter, memory, dir, cluster, n_tasks)
    })
    .await
    .map_err(join_error)?
    .map_err(|e| format!("reduce spill: {e}"))?;
    if stats.spilled_bytes > 0 {
        tracing::info!(
            task,
            spilled_bytes = stats.spilled_bytes,
            "partition exceeded the reduce memory budget and spilled to disk"
        );
    }
    let uri = out_dir.child("decisions.bin");
    let (blake3, written) = upload_file(reg, &uri, file).await?;
    if written != len {
        return Err(format!("decisions object: wrote {written} of {len} bytes").into());
    }
    // Keys in, distinct keys out; the duplicates become rejects in the apply phase.
    let ts = TaskStats {
        records_in: stats.keys,
        records_out: stats.distinct,
        input_bytes,
        output_bytes: len,
        histograms: [(CLUSTER_SIZE.to_string(), stats.cluster_sizes)].into(),
        ..Default::default()
    };
    Ok((
        OutputFile {
            uri: uri.to_uri_string(),
            rows: stats.duplicates,
            bytes: len,
            blake3,
        },
        ts,
    ))
}

/// Adds the keys of an earlier job (`against`) that fall in partition `r`: from its
/// map tasks' keys objects, the sections overlapping `r` (the jobs may have different
/// partition counts). Returns the bytes read.
async fn earlier_keys(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    uri: &str,
    d: &DedupPhase,
    r: u32,
    sorter: &mut ExternalSort<Sourced>,
) -> Result<u64, String> {
    let old = crate::protocol::job::load_job(reg, uri, &ctx.retry)
        .await
        .map_err(|e| format!("params.against: {e}"))?;
    let od = old
        .manifest
        .phases
        .iter()
        .find_map(|p| p.dedup.as_ref().filter(|x| x.params.key == d.params.key))
        .ok_or_else(|| format!("job {uri} has no dedup stage on {:?}", d.params.key))?;
    let map_name = &old.manifest.phases[od.map_phase].name;
    let (store, _) = reg.resolve(uri).map_err(|e| e.to_string())?;
    let ids = crate::protocol::planned_task_ids(
        store.as_ref(),
        &old.paths,
        &old.manifest.phases[od.map_phase],
        &ctx.retry,
    )
    .await
    .map_err(|e| e.to_string())?;
    let (q_lo, q_hi) = shuffle::overlapping(r, d.partitions, od.partitions);
    let mut bytes = 0;
    for t in &ids {
        let rec: CommitRecord =
            get_json(store.as_ref(), &old.paths.commit(map_name, t), &ctx.retry)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("job {uri}: task {map_name}/{t} is not committed"))?;
        let Some(keys) = rec
            .shuffle
            .as_ref()
            .filter(|_| rec.status == TaskStatus::Committed)
        else {
            continue;
        };
        old.paths.check_file(
            &keys.uri,
            rec.reused_from.as_deref(),
            old.manifest.reused_from.as_deref(),
        )?;
        for q in q_lo..=q_hi {
            let b = section(reg, ctx, keys, q as u64).await?;
            bytes += b.len() as u64;
            for e in shuffle::entries::<KeyEntry>(&b).map_err(|e| format!("{}: {e}", keys.uri))? {
                if shuffle::partition_of(e.key, d.partitions) == r {
                    sorter
                        .push(Sourced {
                            e,
                            task: shuffle::EARLIER,
                        })
                        .map_err(|e| format!("spilling: {e}"))?;
                }
            }
        }
    }
    Ok(bytes)
}

/// Streams local bytes (a file, spilled runs) to the store, hashing them: one PUT when
/// small, a multipart upload past the writer's buffer.
async fn upload_file(
    reg: &Registry,
    uri: &Uri,
    mut file: impl Read,
) -> Result<(String, u64), String> {
    let store = reg.open(uri).map_err(|e| e.to_string())?;
    let mut w = object_store::buffered::BufWriter::new(store, uri.path.clone());
    let mut hasher = blake3::Hasher::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = file.read(&mut buf).map_err(|e| e.to_string())?;
        if k == 0 {
            break;
        }
        hasher.update(&buf[..k]);
        n += k as u64;
        w.write_all(&buf[..k])
            .await
            .map_err(|e| format!("writing {}: {e}", uri.to_uri_string()))?;
    }
    w.shutdown()
        .await
        .map_err(|e| format!("writing {}: {e}", uri.to_uri_string()))?;
    Ok((hasher.finalize().to_hex().to_string(), n))
}

/// The decisions about one map task's records from every reduce task: id →
/// representative (the representative maps to itself).
pub async fn decisions_for(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    d: &DedupPhase,
    map_task: &str,
) -> Result<crate::kernels::FastMap<u128, u128>, ShuffleError> {
    let reduce_phase = d.map_phase + 1;
    let t = ctx
        .task_ids(d.map_phase)
        .iter()
        .position(|x| x == map_task)
        .ok_or_else(|| format!("map task {map_task} is not in the job"))?;
    if !d.params.kind.is_exact() {
        return near_decisions_for(ctx, reg, store, d, t).await;
    }
    decisions_in(ctx, reg, store, reduce_phase, t as u64).await
}

/// Section `section` of the decisions objects of every task of `phase` (one map
/// task's decisions): id → representative.
async fn decisions_in(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: usize,
    section: u64,
) -> Result<crate::kernels::FastMap<u128, u128>, ShuffleError> {
    let mut out = crate::kernels::FastMap::default();
    let never = std::sync::atomic::AtomicBool::new(false);
    read_sections(ctx, reg, store, phase, section, &never, |_, uri, b| {
        for dec in shuffle::decode::<Decision>(&b).map_err(|e| format!("{uri}: {e}"))? {
            out.insert(dec.id, dec.rep);
        }
        Ok(())
    })
    .await?;
    Ok(out)
}

/// Reads section `i` of the shuffle object of every committed task of `phase`, in
/// task order, handing each task index and its bytes to `each`. Returns bytes read.
async fn read_sections(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: usize,
    i: u64,
    cancel: &std::sync::atomic::AtomicBool,
    mut each: impl FnMut(usize, &str, Bytes) -> Result<(), String>,
) -> Result<u64, ShuffleError> {
    use futures::StreamExt;
    let name = ctx.job.manifest.phases[phase].name.clone();
    let ids = ctx.task_ids(phase);
    // Up to 16 map tasks' commit records and sections in flight (on S3 each is a
    // round trip), handed to `each` in task order.
    let futures: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(ti, t)| fetch_section(ctx, reg, store, phase, &name, t, ti, i, cancel))
        .collect();
    let mut fetched = futures::stream::iter(futures).buffered(16);
    let mut bytes = 0;
    while let Some(r) = fetched.next().await {
        let Some((ti, uri, b)) = r? else { continue };
        bytes += b.len() as u64;
        each(ti, &uri, b)?;
    }
    Ok(bytes)
}

/// Section `i` of map task `t` (index `ti`) of `phase`, with its object's URI; `None`
/// for a failed map task.
#[allow(clippy::too_many_arguments)]
async fn fetch_section(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: usize,
    name: &str,
    t: &str,
    ti: usize,
    i: u64,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<Option<(usize, String, Bytes)>, ShuffleError> {
    if cancel.load(std::sync::atomic::Ordering::Relaxed) {
        return Err("cancelled".into());
    }
    let rec = commit_of(ctx, store.as_ref(), name, t).await?;
    if rec.status != TaskStatus::Committed {
        if ctx.job.manifest.phases[phase].kind == crate::protocol::records::PhaseKind::Map {
            return Ok(None); // a failed map task has no records to keep
        }
        return Err(ShuffleError::upstream_failed(name, t, &rec));
    }
    let Some(file) = &rec.shuffle else {
        return Err(format!("task {name}/{t} committed no shuffle object").into());
    };
    ctx.job.paths.check_file(
        &file.uri,
        rec.reused_from.as_deref(),
        ctx.job.manifest.reused_from.as_deref(),
    )?;
    let b = section(reg, ctx, file, i).await?;
    Ok(Some((ti, file.uri.clone(), b)))
}

/// Section `r` of every committed task of `phase`, decoded as `T` (each entry passed
/// to `fix` with its task index) and pushed into an external sort of `memory` bytes.
#[allow(clippy::too_many_arguments)]
async fn gather<T: shuffle::Fixed>(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    (phase, r): (usize, u32),
    memory: u64,
    cancel: &std::sync::atomic::AtomicBool,
    fix: impl Fn(usize, &mut T),
) -> Result<(u64, ExternalSort<T>), ShuffleError> {
    let dir = spill_dir();
    let mut sorter = ExternalSort::<T>::new(memory, dir.clone());
    let input = read_sections(ctx, reg, store, phase, r as u64, cancel, |ti, uri, b| {
        for mut e in shuffle::decode::<T>(&b).map_err(|e| format!("{uri}: {e}"))? {
            fix(ti, &mut e);
            sorter
                .push(e)
                .map_err(|e| format!("spilling to {}: {e}", dir.display()))?;
        }
        Ok(())
    })
    .await?;
    Ok((input, sorter))
}

/// Whether the label steps before `phase` already reached a fixed point: the nearest
/// earlier record step was skipped itself, or changed no label in any task.
async fn converged_before(
    ctx: &Arc<WorkerCtx>,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: usize,
) -> Result<bool, ShuffleError> {
    let phases = &ctx.job.manifest.phases;
    let Some(q) = (0..phase).rev().find(|&q| is_record_step(&phases[q])) else {
        return Ok(false);
    };
    let (skipped, changed) = step_outcome(ctx, store, q).await?;
    Ok(skipped || changed == 0)
}

fn is_record_step(p: &crate::protocol::records::PhasePlan) -> bool {
    p.kind == crate::protocol::records::PhaseKind::Propagate
        && p.dedup.as_ref().is_some_and(|d| d.step % 2 == 1)
}

/// A record step's outcome: whether it was skipped, and the labels it changed.
async fn step_outcome(
    ctx: &Arc<WorkerCtx>,
    store: &Arc<dyn object_store::ObjectStore>,
    q: usize,
) -> Result<(bool, u64), ShuffleError> {
    let name = ctx.job.manifest.phases[q].name.clone();
    let mut changed = 0;
    for t in ctx.task_ids(q).iter() {
        let rec = commit_of(ctx, store.as_ref(), &name, t).await?;
        if rec.status != TaskStatus::Committed {
            return Err(ShuffleError::upstream_failed(&name, t, &rec));
        }
        if rec.shuffle.is_none() {
            return Ok((true, 0));
        }
        changed += rec.changed.unwrap_or(0);
    }
    Ok((false, changed))
}

/// One near-duplicate task: the candidates reduce (step 0) or a label step. Returns
/// its object (`None`: skipped, the labels had already converged), its stats and,
/// for record steps, how many labels changed.
pub async fn near_step(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: usize,
    task: &str,
    out_dir: &Uri,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<(Option<OutputFile>, TaskStats, Option<u64>), ShuffleError> {
    let plan = &ctx.job.manifest.phases[phase];
    let d: &DedupPhase = plan
        .dedup
        .as_ref()
        .ok_or("near step without a dedup plan")?;
    let r = partition_of_task(&plan.fingerprint, task, d.partitions)
        .ok_or_else(|| format!("task {task} is not a partition of {}", plan.name))?;
    if d.step > 0 && converged_before(ctx, store, phase).await? {
        return Ok((None, TaskStats::default(), None));
    }
    let dir = spill_dir();
    let memory = d.params.memory_bytes;
    let parts = d.partitions;
    let n_map = ctx.task_ids(d.map_phase).len();
    let kind = d.params.kind.clone();
    let (input_bytes, sections, st) = if d.step == 0 {
        match kind.payload_len() {
            8 => candidates::<8>(ctx, reg, store, d, r, cancel).await?,
            64 => candidates::<64>(ctx, reg, store, d, r, cancel).await?,
            128 => candidates::<128>(ctx, reg, store, d, r, cancel).await?,
            192 => candidates::<192>(ctx, reg, store, d, r, cancel).await?,
            256 => candidates::<256>(ctx, reg, store, d, r, cancel).await?,
            384 => candidates::<384>(ctx, reg, store, d, r, cancel).await?,
            512 => candidates::<512>(ctx, reg, store, d, r, cancel).await?,
            p => {
                return Err(format!("no near-duplicate entry type with a {p}-byte payload").into());
            }
        }
    } else if d.step % 2 == 1 {
        let (input, sorter) = gather::<near::ByRecord>(
            ctx,
            reg,
            store,
            (phase - 1, r),
            memory / 3,
            cancel,
            |_, _| {},
        )
        .await?;
        let dir2 = dir.clone();
        let (sections, st) = tokio::task::spawn_blocking(move || {
            let mut edges = ExternalSort::<near::ByBucket>::new(memory / 3, dir2.clone());
            let mut decisions = ExternalSort::<Decision>::new(memory / 3, dir2.clone());
            // Edges in memory with room for a union-find: each record takes its
            // component's label at once (one partition: the fixed point in one step).
            let st = near::record_step_of(sorter, memory / 3, &mut edges, &mut decisions)?;
            let mut out = near::Sections::new(parts as usize + n_map, &dir2)?;
            out.push_all(edges.finish()?, |e| {
                near::bucket_partition(&e.0, parts) as usize
            })?;
            out.push_all(decisions.finish()?, |x| parts as usize + x.task as usize)?;
            Ok::<_, std::io::Error>((out, st))
        })
        .await
        .map_err(join_error)?
        .map_err(|e| format!("near-duplicate record step: {e}"))?;
        (input, sections, st)
    } else {
        let (input, sorter) = gather::<near::ByBucket>(
            ctx,
            reg,
            store,
            (phase - 1, r),
            memory / 2,
            cancel,
            |_, _| {},
        )
        .await?;
        let dir2 = dir.clone();
        let (sections, st) = tokio::task::spawn_blocking(move || {
            let mut edges = ExternalSort::<near::ByRecord>::new(memory / 2, dir2.clone());
            let st = near::bucket_step(sorter.finish()?, &mut edges)?;
            let mut out = near::Sections::new(parts as usize, &dir2)?;
            out.push_all(edges.finish()?, |e| {
                near::record_partition(&e.0, parts) as usize
            })?;
            Ok::<_, std::io::Error>((out, st))
        })
        .await
        .map_err(join_error)?
        .map_err(|e| format!("near-duplicate bucket step: {e}"))?;
        (input, sections, st)
    };
    let (file, len) = tokio::task::spawn_blocking(move || sections.finish(near::EDGES_MAGIC))
        .await
        .map_err(join_error)?
        .map_err(|e| format!("near-duplicate object: {e}"))?;
    let uri = out_dir.child("near.bin");
    let (blake3, written) = upload_file(reg, &uri, file).await?;
    if written != len {
        return Err(format!("near-duplicate object: wrote {written} of {len} bytes").into());
    }
    let mut ts = TaskStats {
        records_in: st.entries,
        records_out: st.edges,
        input_bytes,
        output_bytes: len,
        ..Default::default()
    };
    if st.group_sizes.count > 0 {
        ts.histograms
            .insert(NEAR_GROUP_SIZE.to_string(), st.group_sizes.clone());
    }
    let changed = (d.step % 2 == 1).then_some(st.changed);
    Ok((
        Some(OutputFile {
            uri: uri.to_uri_string(),
            rows: st.edges,
            bytes: len,
            blake3,
        }),
        ts,
        changed,
    ))
}

/// The candidates reduce of partition `r` with `P`-byte payloads: every map task's
/// band entries in the partition, sorted (spilling past the budget), each bucket
/// verified against its pivot; the verified edges sectioned by record partition.
async fn candidates<const P: usize>(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    d: &DedupPhase,
    r: u32,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<(u64, near::Sections, near::StepStats), ShuffleError> {
    let dir = spill_dir();
    let memory = d.params.memory_bytes;
    let (input, sorter) = gather::<near::NearEntry<P>>(
        ctx,
        reg,
        store,
        (d.map_phase, r),
        memory / 2,
        cancel,
        |ti, e| e.task = ti as u32,
    )
    .await?;
    let kind = d.params.kind.clone();
    let parts = d.partitions;
    let (sections, st) = tokio::task::spawn_blocking(move || {
        let mut edges = ExternalSort::<near::ByRecord>::new(memory / 2, dir.clone());
        let st = near::candidates(sorter.finish()?, &kind, &mut edges)?;
        let mut out = near::Sections::new(parts as usize, &dir)?;
        out.push_all(edges.finish()?, |e| {
            near::record_partition(&e.0, parts) as usize
        })?;
        Ok::<_, std::io::Error>((out, st))
    })
    .await
    .map_err(join_error)?
    .map_err(|e| format!("near-duplicate candidates: {e}"))?;
    if st.overflow > 0 {
        tracing::warn!(
            overflow = st.overflow,
            max = near::MAX_LEADERS,
            "band buckets with more distinct values than the verification limit: pairs among the extra members may be missed"
        );
    }
    Ok((input, sections, st))
}

/// The near-duplicate decisions about one map task's records: from the last record
/// step that ran, which must have changed no label (else the components are not
/// final and the job fails rather than keep near duplicates it missed).
async fn near_decisions_for(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
    store: &Arc<dyn object_store::ObjectStore>,
    d: &DedupPhase,
    t: usize,
) -> Result<crate::kernels::FastMap<u128, u128>, ShuffleError> {
    let phases = &ctx.job.manifest.phases;
    let mut q = None;
    for p in (d.map_phase + 1..phases.len()).filter(|&p| is_record_step(&phases[p])) {
        if phases[p].dedup.as_ref().map(|x| &x.stage) != Some(&d.stage) {
            continue;
        }
        let (skipped, changed) = step_outcome(ctx, store, p).await?;
        if skipped {
            break;
        }
        q = Some((p, changed));
    }
    let (q, changed) = q.ok_or("no near-duplicate record step ran")?;
    if changed > 0 {
        return Err(ShuffleError::NotConverged {
            max_rounds: d.params.max_rounds,
            changed,
            stage: d.stage.clone(),
        });
    }
    decisions_in(ctx, reg, store, q, d.partitions as u64 + t as u64).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RequestCounts;
    use std::sync::atomic::Ordering::Relaxed;

    /// Exact entries (40 bytes) with spread keys.
    fn entries(n: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(n as usize * 40);
        for i in 0..n {
            let key = ((i.wrapping_mul(0x9e37_79b9_7f4a_7c15) as u128) << 64) | i as u128;
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&[i as u8; 24]);
        }
        out
    }

    /// Uploads `n` entries spilled past a 1 MiB budget; the stored object and the
    /// number of PUT requests (a multipart upload: create, parts, complete).
    async fn upload(name: &str, n: u64) -> (Vec<u8>, OutputFile, u64) {
        let counts = Arc::new(RequestCounts::default());
        let reg = Registry::with_wrapper(Default::default(), None).counting_into(counts.clone());
        let dir = Uri::parse(&format!("memory://{name}/staging/a")).unwrap();
        let spill = tempfile::tempdir().unwrap();
        let mut keys = KeySpill::new(40, 7, 1 << 20, spill.path().into());
        keys.push(&entries(n)).unwrap();
        let f = write_keys(&reg, &dir, keys).await.unwrap();
        let (store, u) = reg.resolve(&f.uri).unwrap();
        let got = store.get(&u.path).await.unwrap().bytes().await.unwrap();
        (got.to_vec(), f, counts.put.load(Relaxed))
    }

    #[tokio::test]
    async fn a_large_keys_object_goes_up_in_parts_with_the_bytes_of_one_encoding() {
        // 12 MiB of keys: past the writer's 10 MiB buffer, so a multipart upload.
        let n = (12 << 20) / 40;
        let (got, f, puts) = upload("keys-large", n).await;
        assert_eq!(got, shuffle::encode_keys(&entries(n), 40, 7));
        assert_eq!((f.rows, f.bytes), (n, got.len() as u64));
        assert_eq!(f.blake3, blake3::hash(&got).to_hex().to_string());
        assert!(puts >= 3, "{puts} PUT requests: not a multipart upload");
        // A small one stays one PUT.
        let (got, _, puts) = upload("keys-small", 100).await;
        assert_eq!(got, shuffle::encode_keys(&entries(100), 40, 7));
        assert_eq!(puts, 1);
    }
}
