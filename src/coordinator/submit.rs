//! `mdf submit`: plan a job and write its manifests (docs/PROTOCOL.md §3). Task
//! manifests first, reused commits next, `job.json` last, so a crash mid-submit
//! leaves no half-visible job and a resubmit completes it. Submitting the same job
//! again writes nothing.
use super::plan::{self, Plan, PlanError};
use super::{JobError, load_job};
use crate::clock::{Clock, Entropy};
use crate::protocol::JobPaths;
use crate::protocol::io::{
    Created, ProtoError, Retry, create_bytes, create_json, decode, get_json, list_all, read_theirs,
};
use crate::protocol::records::{
    CommitRecord, FINALIZE, JobManifest, SHARDED_VERSION, TaskManifest, TaskShard, TaskStatus,
    VERSION,
};
use crate::protocol::task_of;
use crate::spec::Spec;
use crate::spec::reader::{FieldError, SpecErrors};
use crate::store::{Registry, Uri};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default)]
pub struct SubmitOptions {
    /// Where jobs live (`<root>/jobs/<id>`).
    pub job_root: String,
    pub job_id: Option<String>,
    /// A job whose committed tasks are reused where phases are unchanged.
    pub reuse: Option<String>,
    /// Bytes each of planning's sorts may hold before spilling to local disk
    /// ([`plan::PLAN_MEMORY`]).
    pub plan_memory: usize,
}

#[derive(Debug, Clone)]
pub struct Submitted {
    pub job_uri: String,
    pub job_id: String,
    /// False when the job already existed (nothing was written).
    pub created: bool,
    pub tasks: u64,
    pub reused: u64,
    pub input_files: usize,
    pub input_bytes: u64,
    /// Lines for the user about how the input is read ([`plan::Plan::notes`]).
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(
        "job {uri} already exists with a different spec or inputs; choose another --job-id, or --reuse it"
    )]
    Conflict { uri: String },
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error(transparent)]
    Job(#[from] JobError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl From<super::ownership::OwnershipError> for SubmitError {
    fn from(e: super::ownership::OwnershipError) -> Self {
        use super::ownership::OwnershipError as O;
        match e {
            O::Spec(e) => e.into(),
            O::Proto(e) => SubmitError::Proto(e),
            O::Store(e) => SubmitError::Store(e),
            O::Plan(e) => SubmitError::Plan(e),
        }
    }
}

impl From<SpecErrors> for SubmitError {
    fn from(e: SpecErrors) -> Self {
        SubmitError::Plan(PlanError::Spec(e))
    }
}

/// Hash of what a job computes: the resolved spec, the input files and the versions
/// of the operators' asset files (a re-run after a block list changed is a new job,
/// not the old one resumed).
pub fn plan_hash(spec: &Spec, plan: &Plan) -> Result<String, plan::PlanError> {
    let mut h = blake3::Hasher::new();
    h.update(spec.hash().as_bytes());
    if !plan.assets.is_empty() {
        h.update(&serde_json::to_vec(&plan.assets).expect("json"));
    }
    // The earlier jobs deduplicated against, as they are now: replacing one makes
    // this another job, never the old one resumed with stale decisions.
    for (stage, identity) in &plan.against {
        h.update(format!("\nagainst\t{stage}\t{identity}").as_bytes());
    }
    for f in plan.files.iter()? {
        let f = f?;
        h.update(
            format!(
                "\n{}\t{}\t{}",
                f.uri,
                f.size,
                f.etag.as_deref().unwrap_or("")
            )
            .as_bytes(),
        );
    }
    Ok(h.finalize().to_hex()[..32].to_string())
}

fn check_job_id(id: &str) -> Result<(), SubmitError> {
    if id.is_empty()
        || id.len() > 128
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || id.starts_with('.')
    {
        return Err(SpecErrors(vec![FieldError {
            path: "--job-id".into(),
            message: "must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'".into(),
        }])
        .into());
    }
    Ok(())
}

/// The job id (given, or `<name>-<12 hex of the plan hash>`) and the job root.
fn job_id_and_root(
    spec: &Spec,
    hash: &str,
    job_id: Option<String>,
    job_root: &str,
) -> Result<(String, Uri), SubmitError> {
    let job_id = job_id.unwrap_or_else(|| format!("{}-{}", spec.name, &hash[..12]));
    check_job_id(&job_id)?;
    let root = Uri::parse(job_root)
        .map_err(|e| e.to_string())
        .and_then(|r| {
            if crate::store::is_read_only(&r.store) {
                Err(
                    "a file server or the Hugging Face Hub (https://, hf://) is for inputs only"
                        .to_string(),
                )
            } else {
                Ok(r)
            }
        })
        .map_err(|message| {
            SubmitError::from(SpecErrors(vec![FieldError {
                path: "--job-root".into(),
                message,
            }]))
        })?;
    Ok((job_id, root))
}

/// What submit checks of the output and rejects prefixes (docs/PROTOCOL.md §3.5),
/// for `mdf validate`: refused prefixes as spec errors, nothing written. `Some(job)`:
/// the job exists with this spec, and a run resumes it (no prefix is checked then).
pub async fn check_prefixes(
    spec: &Spec,
    reg: &Registry,
    plan: &Plan,
    job_root: &str,
) -> Result<Option<String>, SubmitError> {
    let hash = plan_hash(spec, plan)?;
    let (job_id, root) = job_id_and_root(spec, &hash, None, job_root)?;
    let job = root.child(&format!("jobs/{job_id}"));
    let retry = Retry::new(Entropy::from_os());
    // A job submitted before with this spec resumes: submit checks nothing then.
    let store = reg.open(&job)?;
    let paths = JobPaths::new(job.clone());
    if let Some(existing) =
        get_json::<JobManifest>(store.as_ref(), &paths.job_json(), &retry).await?
        && existing.spec_hash == hash
    {
        return Ok(Some(job.to_uri_string()));
    }
    super::ownership::check(spec, reg, &root, &job, &plan.files, &retry).await?;
    Ok(None)
}

pub async fn submit(
    spec: &Spec,
    reg: &Registry,
    opts: &SubmitOptions,
    clock: &dyn Clock,
    entropy: &Entropy,
) -> Result<Submitted, SubmitError> {
    let retry = Retry::new(entropy.clone());
    let plan = plan::plan_in(spec, reg, opts.plan_memory).await?;
    let hash = plan_hash(spec, &plan)?;
    let (job_id, root) = job_id_and_root(spec, &hash, opts.job_id.clone(), &opts.job_root)?;
    let job = root.child(&format!("jobs/{job_id}"));
    let job_uri = job.to_uri_string();
    let store = reg.open(&job)?;
    let paths = JobPaths::new(job.clone()).with_shards(&plan.phases);
    let tasks: u64 = plan.phases.iter().map(|p| p.tasks).sum::<u64>() + 1;
    let mut out = Submitted {
        job_uri: job_uri.clone(),
        job_id: job_id.clone(),
        created: false,
        tasks,
        reused: 0,
        input_files: plan.files.len(),
        input_bytes: plan.input_bytes(),
        notes: plan.notes(),
    };
    if let Some(existing) =
        get_json::<JobManifest>(store.as_ref(), &paths.job_json(), &retry).await?
    {
        return if existing.spec_hash == hash {
            Ok(out)
        } else {
            Err(SubmitError::Conflict { uri: job_uri })
        };
    }
    // Leases and commits need a store that refuses a second create.
    crate::protocol::probe::require_create_only(
        store.as_ref(),
        &job,
        &reg.describe(&job),
        entropy,
        &retry,
    )
    .await?;
    // The output and rejects prefixes must be this job's own: finalize sweeps them.
    super::ownership::check(spec, reg, &root, &job, &plan.files, &retry).await?;
    // The output itself takes the planned schema (an existing Iceberg table's).
    if let (Ok(w), Some(last)) = (
        crate::io::write::writer(spec.output.format),
        plan.phases.last(),
    ) && let Err(message) = w.check(&spec.output, reg, &last.output_schema).await
    {
        return Err(SubmitError::from(SpecErrors(vec![FieldError {
            path: "output".into(),
            message,
        }])));
    }
    super::ownership::write_markers(spec, reg, &job_id, &job, &retry).await?;

    // 1. Task manifests (deterministic content: an identical existing one is fine).
    let last_fp = plan
        .phases
        .last()
        .map(|p| p.fingerprint.clone())
        .unwrap_or_default();
    let finalize_task = plan::finalize_task_id(&job_id, &last_fp);
    // Unsharded phases: a manifest object per task. Sharded ones: one object per
    // shard, streamed shard by shard from the plan (docs/PROTOCOL.md §1).
    let finalize = TaskManifest {
        version: VERSION,
        job_id: String::new(),
        phase: FINALIZE.into(),
        task_id: finalize_task.clone(),
        inputs: vec![],
        upstream: vec![],
    };
    let listed = plan
        .phases
        .iter()
        .zip(&plan.tasks)
        .filter_map(|(phase, tasks)| match tasks {
            plan::PhaseTasks::Listed(l) if phase.shard_digits == 0 => Some(l.iter()),
            _ => None,
        })
        .flatten();
    // Every object to create: (path, body, what it is), made as the writes go.
    let singles = listed.chain(std::iter::once(&finalize)).map(|t| {
        let mut t = t.clone();
        t.job_id = job_id.clone();
        let body = Bytes::from(serde_json::to_vec_pretty(&t).expect("json"));
        Ok((paths.task(&t.phase, &t.task_id), body, "task manifest"))
    });
    let shards = plan.shards()?.flat_map(|shard| {
        let items: Vec<Result<_, SubmitError>> = match shard {
            Err(e) => vec![Err(e.into())],
            Ok((prefix, phases)) => phases
                .into_iter()
                .map(|(q, mut tasks)| {
                    for t in &mut tasks {
                        t.job_id = job_id.clone();
                    }
                    let sh = TaskShard {
                        version: SHARDED_VERSION,
                        job_id: job_id.clone(),
                        phase: plan.phases[q].name.clone(),
                        prefix: prefix.clone(),
                        tasks,
                    };
                    let body = Bytes::from(serde_json::to_vec(&sh).expect("json"));
                    Ok((
                        paths.task_shard(&sh.phase, &sh.prefix),
                        body,
                        "shard of task manifests",
                    ))
                })
                .collect(),
        };
        items
    });
    futures::stream::iter(shards.chain(singles))
        .map(|w| {
            let store = store.clone();
            let retry = retry.clone();
            async move {
                let (path, body, what) = w?;
                match create_bytes(store.as_ref(), &path, body, None, &retry).await? {
                    Created::Mine => Ok::<(), SubmitError>(()),
                    Created::Theirs(_) => Err(ProtoError::Corrupt {
                        path: path.to_string(),
                        message: format!("a different {what} already exists here"),
                    }
                    .into()),
                }
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;

    // 2. Reused commits; the reused job as commit records name it.
    let mut reused_from = None;
    if let Some(old) = &opts.reuse {
        let (n, uri) = reuse_commits(
            reg,
            &plan,
            &paths,
            &job_id,
            old,
            spec.output.format,
            &retry,
            entropy,
        )
        .await?;
        out.reused = n;
        reused_from = Some(uri);
    }

    // 3. job.json, last.
    let sharded = plan.phases.iter().any(|p| p.shard_digits > 0);
    let manifest = JobManifest {
        version: if sharded { SHARDED_VERSION } else { VERSION },
        job_id: job_id.clone(),
        spec_hash: hash.clone(),
        spec: spec.resolved.clone(),
        mdf_version: env!("CARGO_PKG_VERSION").into(),
        created_ms: clock.now_ms(),
        output_uri: crate::store::Uri::parse(&spec.output.uri)?.to_uri_string(),
        rejects_uri: crate::store::Uri::parse(&spec.rejects.uri)?.to_uri_string(),
        phases: plan.phases.clone(),
        finalize_task,
        // As commit records name it (`check_file` compares the two).
        reused_from,
        owner_markers: true,
        asset_etags: plan
            .assets
            .iter()
            .filter_map(|(u, v)| Some((u.clone(), v.etag.clone()?)))
            .collect(),
    };
    let body = Bytes::from(serde_json::to_vec_pretty(&manifest).expect("json"));
    match create_bytes(store.as_ref(), &paths.job_json(), body, None, &retry).await? {
        Created::Mine => out.created = true,
        Created::Theirs(b) => {
            let other: JobManifest = decode(&paths.job_json(), &b)?;
            if other.spec_hash != hash {
                return Err(SubmitError::Conflict { uri: job_uri });
            }
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn reuse_commits(
    reg: &Registry,
    plan: &Plan,
    paths: &JobPaths,
    job_id: &str,
    old_uri: &str,
    format: crate::spec::OutputFormat,
    retry: &Retry,
    entropy: &Entropy,
) -> Result<(u64, String), SubmitError> {
    let old = load_job(reg, old_uri, retry).await?;
    let source = old.uri.to_uri_string();
    let old_store = reg.open(&old.uri)?;
    let new_store = reg.open(&paths.job)?;
    let by_fp: BTreeMap<&str, &str> = old
        .manifest
        .phases
        .iter()
        .map(|p| (p.fingerprint.as_str(), p.name.as_str()))
        .collect();
    let mut reused = 0;
    // Every phase after the first reads all of the phases before it (a reduce reads
    // every map task's keys; an apply reads every reduce's decisions), so its commits
    // are reused only while every task of every earlier phase is: a map task that
    // failed (or never ran) in the old job, recomputed here, would otherwise feed
    // nothing into a reused reduce, and its duplicates would survive.
    let mut upstream_whole = true;
    // The old job's commits of the earlier phases, by phase index and task.
    let mut upstream: Vec<BTreeMap<String, CommitRecord>> = Vec::new();
    // Whether the upstream of a commit computed in job X (its `reused_from`) is the
    // old job's, by (X, phase index).
    let mut checked: BTreeMap<(String, usize), bool> = BTreeMap::new();
    for (pi, phase) in plan.phases.iter().enumerate() {
        if !upstream_whole {
            tracing::info!(
                phase = %phase.name,
                "not reusing a phase whose upstream is recomputed in part"
            );
            break;
        }
        let Some(old_phase) = by_fp.get(phase.fingerprint.as_str()) else {
            upstream_whole = false;
            continue;
        };
        // The last phase's files are the output format's: never reused into another
        // (Parquet fingerprints predate the format's place in them).
        if pi + 1 == plan.phases.len() && old.spec.output.format != format {
            continue;
        }
        // Dolma output stamps each record with its job's submit time (`added`): the
        // new job writes its own rather than take files stamped by another.
        if pi + 1 == plan.phases.len()
            && old
                .spec
                .output
                .jsonl
                .as_ref()
                .is_some_and(|j| j.layout == crate::spec::JsonlLayout::Dolma)
        {
            continue;
        }
        let ids = plan.task_ids(pi)?;
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        // Tasks of this phase whose commit is in the new job: reused now, or by an
        // earlier attempt of this submit that crashed before writing job.json.
        let mut present = 0;
        let mut mine = BTreeMap::new();
        for meta in list_all(old_store.as_ref(), &old.paths.commits(old_phase), retry).await? {
            let Some(task) = task_of(&meta.location) else {
                continue;
            };
            if !wanted.contains(task.as_str()) {
                continue;
            }
            let Some(mut rec) =
                get_json::<CommitRecord>(old_store.as_ref(), &meta.location, retry).await?
            else {
                continue;
            };
            if rec.status != TaskStatus::Committed {
                continue;
            }
            // Reuse only what can still be read: a commit whose files are gone (an old
            // job's janitor deleted shuffle objects; someone cleaned up) is recomputed.
            if !files_exist(reg, &rec, retry).await? {
                tracing::info!(
                    phase = %phase.name,
                    task,
                    "not reusing a commit whose files no longer exist; recomputing it"
                );
                continue;
            }
            // A commit the old job itself reused from job X was computed in X, over X's
            // upstream: it stands only if X's upstream commits are the old job's. A
            // job made by an mdf before this check may hold X's reduce beside a map
            // task it recomputed itself (the duplicates of that task survived there);
            // reusing it would carry the mismatch on.
            let old_rec = rec.clone();
            if let Some(x) = rec.reused_from.clone().filter(|_| pi > 0) {
                let ok = match checked.get(&(x.clone(), pi)) {
                    Some(&ok) => ok,
                    None => {
                        let ok =
                            same_upstream(reg, &x, &plan.phases[..pi], &upstream, retry).await?;
                        checked.insert((x.clone(), pi), ok);
                        ok
                    }
                };
                if !ok {
                    tracing::info!(
                        phase = %phase.name,
                        task,
                        from = %x,
                        "not reusing a commit computed over other upstream commits than the old job's"
                    );
                    continue;
                }
            }
            rec.job_id = job_id.to_string();
            rec.phase = phase.name.clone();
            rec.write_id = entropy.hex_id(8);
            rec.reused_from.get_or_insert_with(|| source.clone());
            rec.requests = Default::default();
            // Workers read a reused file only from this job's own reuse source or a
            // sibling job (`JobPaths::check_file`): a commit whose origin is a third
            // job in another root (a chain of reuses across roots) is recomputed
            // here rather than refused by every worker that reads it.
            if rec.staged_files().any(|f| {
                paths
                    .check_file(&f.uri, rec.reused_from.as_deref(), Some(&source))
                    .is_err()
            }) {
                tracing::info!(
                    phase = %phase.name,
                    task,
                    "not reusing a commit whose files lie in a job this one may not read from"
                );
                continue;
            }
            let path = paths.commit(&phase.name, &task);
            match create_json(new_store.as_ref(), &path, &rec, &rec.write_id, retry).await? {
                Created::Mine => reused += 1,
                Created::Theirs(b) => {
                    // Already there: written by an earlier attempt of this submit (maybe
                    // reusing another job), or by a worker if another submit of the same
                    // job got job.json out first. It counts only if it is this very
                    // commit, so that what is reused downstream read exactly it.
                    let b = read_theirs(new_store.as_ref(), &path, b, retry).await?;
                    let theirs: CommitRecord = decode(&path, &b)?;
                    if !(same_commit(&theirs, &rec) && theirs.reused_from == rec.reused_from) {
                        tracing::info!(
                            phase = %phase.name,
                            task,
                            "a different commit of this task is already in the job; not reusing later phases"
                        );
                        continue;
                    }
                }
            }
            present += 1;
            mine.insert(task, old_rec);
        }
        upstream_whole = present == wanted.len();
        upstream.push(mine);
    }
    Ok((reused, source))
}

/// Whether two commit records of a task are the same commit: same status, same files.
fn same_commit(a: &CommitRecord, b: &CommitRecord) -> bool {
    a.status == b.status && a.staged_files().eq(b.staged_files())
}

/// Whether job `x` committed, in each of `phases` (matched by fingerprint), exactly the
/// commits `upstream` holds (same status and files): then what `x` computed downstream
/// of them read what the old job has. `false` when `x` cannot be read.
///
/// An upstream commit the old job itself has from `x` (its `reused_from` is `x`: the
/// origin is kept along a chain of reuses) is `x`'s own immutable record, so only the
/// others are read: none along a plain chain of reuses, the odd ones of a job that
/// recomputed some. A job `x` that no longer exists is `false` (logged); a store that
/// fails is an error (retry the submit), never a silent refusal.
async fn same_upstream(
    reg: &Registry,
    x: &str,
    phases: &[crate::protocol::records::PhasePlan],
    upstream: &[BTreeMap<String, CommitRecord>],
    retry: &Retry,
) -> Result<bool, SubmitError> {
    use futures::StreamExt;
    let others: Vec<(usize, &String, &CommitRecord)> = upstream
        .iter()
        .enumerate()
        .flat_map(|(pi, tasks)| tasks.iter().map(move |(t, r)| (pi, t, r)))
        .filter(|(_, _, r)| r.reused_from.as_deref() != Some(x))
        .collect();
    if others.is_empty() {
        return Ok(true);
    }
    let xj = match load_job(reg, x, retry).await {
        Ok(j) => j,
        Err(JobError::NotFound(_)) => {
            tracing::info!(job = x, "the job a reused commit was computed in is gone");
            return Ok(false);
        }
        Err(e) => return Err(e.into()),
    };
    let store = reg.open(&xj.uri)?;
    let mut names = Vec::new();
    for phase in phases {
        match xj
            .manifest
            .phases
            .iter()
            .find(|p| p.fingerprint == phase.fingerprint)
        {
            Some(p) => names.push(p.name.clone()),
            None => return Ok(false),
        }
    }
    let (xj, store, names) = (&xj, &store, &names);
    let mut checks = futures::stream::iter(others.into_iter().map(|(pi, task, rec)| async move {
        let path = xj.paths.commit(&names[pi], task);
        let theirs = get_json::<CommitRecord>(store.as_ref(), &path, retry).await?;
        Ok::<bool, SubmitError>(theirs.is_some_and(|t| same_commit(&t, rec)))
    }))
    .buffer_unordered(32);
    while let Some(same) = checks.next().await {
        if !same? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether every file a commit record names (outputs, rejects, side tables, shuffle
/// object) exists.
async fn files_exist(
    reg: &Registry,
    rec: &CommitRecord,
    retry: &Retry,
) -> Result<bool, SubmitError> {
    use object_store::ObjectStoreExt;
    for f in rec.staged_files() {
        let Ok((store, u)) = reg.resolve(&f.uri) else {
            return Ok(false);
        };
        match retry.run(|| store.head(&u.path)).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(ProtoError::store(&u.path, e).into()),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::MockClock;
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{ObjectStore, ObjectStoreExt};
    use std::sync::Arc;

    async fn snapshot(store: &InMemory, prefix: &str) -> BTreeMap<String, Bytes> {
        let metas: Vec<_> = store
            .list(Some(&Path::from(prefix)))
            .try_collect()
            .await
            .unwrap();
        let mut out = BTreeMap::new();
        for m in metas {
            let b = store.get(&m.location).await.unwrap().bytes().await.unwrap();
            out.insert(m.location.to_string(), b);
        }
        out
    }

    /// Planning through its local sort (a budget far below the plan's size: the input
    /// list and the first phase's tasks spill as many runs) writes exactly what
    /// planning in memory writes, object for object and byte for byte: shards of a
    /// first phase, of a follower, of an apply phase after a dedup, the reduce's
    /// manifests and job.json (task counts, digests, the shuffle's identity). A file
    /// matched by two patterns is planned once.
    #[tokio::test]
    async fn a_spilled_plan_writes_what_an_in_memory_plan_writes() {
        let store = Arc::new(InMemory::new());
        crate::store::install_memory("spill-plan", store.clone());
        for (dir, n) in [("a", 1200), ("b", 801)] {
            for i in 0..n {
                store
                    .put(
                        &Path::from(format!("in/{dir}/{i:05}.jsonl")),
                        format!("{{\"text\": \"doc {dir} {i}\"}}\n").into(),
                    )
                    .await
                    .unwrap();
            }
        }
        let text = "name: spill\ninput: {uris: [\"memory://spill-plan/in/a/*.jsonl\", \"memory://spill-plan/in/b/*.jsonl\", \"memory://spill-plan/in/a/00007.jsonl\"]}\nstages:\n  - {op: text_length, end_phase: true}\n  - {op: exact_key, name: content, params: {field: text}}\n  - {op: dedup, params: {key: content_key, partitions: 3}}\n  - {op: length_filter, params: {min_words: 1}}\noutput: {uri: \"memory://spill-plan/out\"}\njob: {max_files_per_task: 1, shard_tasks: 100}\n";
        let spec = Spec::from_text(
            text,
            "spill",
            &crate::spec::Overrides::default(),
            &|_| None,
            &crate::ops::Catalog,
        )
        .unwrap();
        let reg = Registry::new(spec.s3.clone());

        // The plan itself: spilled where the budget is small, the same phases.
        let whole = plan::plan_in(&spec, &reg, usize::MAX).await.unwrap();
        let spilled = plan::plan_in(&spec, &reg, 4096).await.unwrap();
        assert_eq!(
            whole.files.len(),
            2001,
            "a file matched twice is planned once"
        );
        assert_eq!(whole.phases, spilled.phases);
        assert_eq!(whole.phases[0].tasks, 2001);
        assert_eq!(whole.phases[0].shard_digits, 2);
        assert!(matches!(&spilled.tasks[0], plan::PhaseTasks::Spilled(s) if s.spilled()));
        assert!(matches!(&whole.tasks[0], plan::PhaseTasks::Spilled(s) if !s.spilled()));
        assert_eq!(
            plan_hash(&spec, &whole).unwrap(),
            plan_hash(&spec, &spilled).unwrap()
        );
        for pi in 0..whole.phases.len() {
            let ids = spilled.task_ids(pi).unwrap();
            assert_eq!(ids, whole.task_ids(pi).unwrap());
            assert_eq!(ids.len() as u64, whole.phases[pi].tasks);
            assert_eq!(
                whole.phases[pi].task_digest.as_deref(),
                Some(crate::protocol::records::task_digest(&ids).as_str()),
                "phase {pi}"
            );
        }
        drop((whole, spilled));

        // What submit writes, in memory and spilled.
        let mut written = Vec::new();
        for memory in [usize::MAX, 4096] {
            let opts = SubmitOptions {
                job_root: "memory://spill-plan/root".into(),
                job_id: Some("j".into()),
                reuse: None,
                plan_memory: memory,
            };
            let s = submit(&spec, &reg, &opts, &MockClock::new(1), &Entropy::seeded(3))
                .await
                .unwrap();
            assert!(s.created);
            assert_eq!((s.input_files, s.tasks), (2001, 2001 * 3 + 3 + 1));
            let mut got = snapshot(&store, "root").await;
            got.extend(snapshot(&store, "out").await);
            for k in got.keys() {
                store.delete(&Path::from(k.as_str())).await.unwrap();
            }
            written.push(got);
        }
        let shards = written[0].keys().filter(|k| k.contains("/shards/")).count();
        assert_eq!(
            shards,
            3 * 256,
            "a shard object per shard of each sharded phase"
        );
        assert_eq!(written[0].len(), written[1].len());
        for (k, v) in &written[0] {
            assert_eq!(Some(v), written[1].get(k), "{k}");
        }
    }
}
