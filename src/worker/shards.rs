//! A worker's view of a sharded phase (docs/PROTOCOL.md §1, docs/SCALE.md): it works
//! in one shard at a time, lists only that shard's commits, writes a shard's done
//! marker when every task of it is terminal, and knows a phase done by its markers.
//! Nothing here holds a whole phase: a phase of a million tasks costs a worker the
//! shard it is in.
use super::{View, WorkerCtx, pick_among};
use crate::protocol::io::{Created, ProtoError, create_bytes, get_json, list_all, list_dirs};
use crate::protocol::records::{
    CommitRecord, PhaseKind, SHARDED_VERSION, ShardDone, ShardPart, TaskManifest, TaskShard,
};
use crate::protocol::{planned_task_ids, read_task_shard, shard_prefixes, task_of};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

type Store = Arc<dyn object_store::ObjectStore>;

/// Shards of task manifests a worker keeps read (each up to `shard_tasks` manifests):
/// the one it works in and the one before. Its largest piece of memory (heaptrack, in
/// the fleet simulator: half of a worker's heap at 8).
const SHARD_CACHE: usize = 2;

/// New shards a worker looks at in one round before it waits (a follower phase: one).
const SHARDS_PER_ROUND: usize = 4;

impl WorkerCtx {
    /// One shard of a sharded phase's task manifests, read once and kept a while.
    pub async fn shard(
        &self,
        store: &Store,
        phase: &str,
        prefix: &str,
    ) -> Result<Arc<TaskShard>, ProtoError> {
        let key = (phase.to_string(), prefix.to_string());
        if let Some(s) = self.shards.lock().expect("shards lock").get(&key) {
            return Ok(s.clone());
        }
        let s = Arc::new(
            read_task_shard(store.as_ref(), &self.job.paths, phase, prefix, &self.retry).await?,
        );
        let mut cache = self.shards.lock().expect("shards lock");
        while cache.len() >= SHARD_CACHE {
            let Some(k) = cache.keys().next().cloned() else {
                break;
            };
            cache.remove(&k);
        }
        cache.insert(key, s.clone());
        Ok(s)
    }

    /// The manifest of `task` of a sharded phase, from its shard.
    pub async fn sharded_manifest(
        &self,
        store: &Store,
        phase: &str,
        task: &str,
    ) -> Result<Option<TaskManifest>, ProtoError> {
        let k = self.job.paths.shard_digits(phase);
        let Some(prefix) = task.get(..k) else {
            return Ok(None);
        };
        let shard = self.shard(store, phase, prefix).await?;
        Ok(shard
            .tasks
            .binary_search_by(|t| t.task_id.as_str().cmp(task))
            .ok()
            .map(|i| shard.tasks[i].clone()))
    }

    /// Reads the ids of every sharded phase before `upto` that this worker does not
    /// know yet (a dedup reduce or apply task reads every task of its map phase).
    pub async fn ensure_ids(&self, store: &Store, upto: usize) -> Result<(), ProtoError> {
        for (q, plan) in self.job.manifest.phases.iter().enumerate().take(upto) {
            let known = self.all_ids().get(q).is_some_and(|v| !v.is_empty());
            if plan.shard_digits == 0 || plan.tasks == 0 || known {
                continue;
            }
            let v = planned_task_ids(store.as_ref(), &self.job.paths, plan, &self.retry).await?;
            let mut ids = self.ids.write().expect("ids lock");
            let mut all = ids.as_ref().clone();
            all[q] = v;
            *ids = Arc::new(all);
        }
        Ok(())
    }
}

/// Where a worker stands in one sharded phase.
pub(super) struct ShardCursor {
    digits: usize,
    /// Shards whose done marker this worker has seen.
    pub done: HashSet<String>,
    /// The shard it works in: `View::ids[p]` holds that shard's task ids.
    current: Option<String>,
    /// Shards it found nothing to claim in, and until when it leaves them alone.
    skip_until: HashMap<String, u64>,
    /// The current shard's commits are to be listed again (after any task).
    pub stale: bool,
    /// The shard of the last task this worker itself ended (committed or failed):
    /// seen complete right after, its marker is this worker's to write.
    pub last_own: Option<String>,
    /// How long this worker's own tasks of the phase take (a running average), in ms.
    pub typical_ms: Option<u64>,
    /// Shards seen complete by a worker that did not end their last task: it writes
    /// the marker only if the one who did has not, by then.
    build_after: HashMap<String, u64>,
    /// Tasks this worker ended in the current shard since it last listed it, and
    /// whether it lost a claim there meanwhile (see [`after_task`]).
    ended_unlisted: u32,
    lost_unlisted: bool,
}

impl ShardCursor {
    pub fn new(digits: usize) -> Self {
        ShardCursor {
            digits,
            done: HashSet::new(),
            current: None,
            skip_until: HashMap::new(),
            stale: false,
            last_own: None,
            typical_ms: None,
            build_after: HashMap::new(),
            ended_unlisted: 0,
            lost_unlisted: false,
        }
    }
    fn total(&self) -> usize {
        16usize.pow(self.digits as u32)
    }
    pub fn all_done(&self) -> bool {
        self.done.len() >= self.total()
    }
    /// The shard a task of this phase falls in.
    pub fn prefix_of<'a>(&self, task: &'a str) -> &'a str {
        task.get(..self.digits).unwrap_or(task)
    }
}

/// The phase whose tasks a task of sharded phase `p` follows one for one, in the same
/// shard (a pipelined map phase after the first), if any.
fn follows(ctx: &WorkerCtx, p: usize) -> Option<usize> {
    let phases = &ctx.job.manifest.phases;
    let plan = phases.get(p)?;
    (p > 0 && plan.kind == PhaseKind::Map && phases[p - 1].shard_digits == plan.shard_digits)
        .then(|| p - 1)
}

/// The phase a sharded phase's tasks read one for one (its `upstream`), if any.
fn upstream_phase(ctx: &WorkerCtx, p: usize) -> Option<usize> {
    let plan = &ctx.job.manifest.phases[p];
    match (plan.kind, &plan.dedup) {
        (PhaseKind::Apply, Some(d)) => Some(d.map_phase),
        (PhaseKind::Map, _) if p > 0 => Some(p - 1),
        _ => None,
    }
}

/// The ids of a shard's committed (or failed) tasks, listed.
async fn list_commits(
    ctx: &WorkerCtx,
    store: &Store,
    phase: &str,
    prefix: &str,
) -> Result<Vec<String>, ProtoError> {
    let path = ctx.job.paths.commits_shard(phase, prefix);
    Ok(list_all(store.as_ref(), &path, &ctx.retry)
        .await?
        .iter()
        .filter_map(|m| task_of(&m.location))
        .collect())
}

/// Lists the current shard of sharded phase `p` (and the same shard of the phase it
/// follows, while that phase is not done) into the view.
pub(super) async fn list_current(
    ctx: &WorkerCtx,
    store: &Store,
    view: &mut View,
    p: usize,
    with_commits: bool,
) -> Result<(), ProtoError> {
    let Some(c) = view.shards[p].as_mut() else {
        return Ok(());
    };
    c.stale = false;
    c.ended_unlisted = 0;
    c.lost_unlisted = false;
    let Some(s) = c.current.clone() else {
        return Ok(());
    };
    let undone = c.total() - c.done.len();
    // Tasks with a lease folder (one page a shard, as a delimiter listing): a task
    // without one is fresh, and a claim of it loses only a true race. A task seen
    // leased for the first time is left alone for a TTL: its lease cannot be taken
    // over sooner (its holder has one TTL from our first look at its record), so an
    // earlier look would be a request spent on a live lease.
    let now = ctx.clock.now_ms();
    // ... or, when tasks take longer than a TTL, for about a task's length: a look at a
    // lease that is still renewed is a request spent for nothing.
    let wait = ctx.ttl_ms().max(c.typical_ms.unwrap_or(0) * 3 / 2);
    let settled = |view: &View| {
        view.ids[p].iter().all(|t| {
            let k = (p, t.clone());
            view.terminal.contains(&k) || view.seen_leased.contains(&k)
        })
    };
    // With every task of the shard seen leased or ended already (its tail), a listing
    // of its lease folders could show nothing new: only its commits are listed.
    if !settled(view) {
        let path = ctx.job.paths.leases_shard(&view.names[p], &s);
        for t in list_dirs(store.as_ref(), &path, &ctx.retry).await? {
            let key = (p, t);
            if !view.terminal.contains(&key) && view.seen_leased.insert(key.clone()) {
                view.busy_until.entry(key).or_insert(now + wait);
            }
        }
    }
    // Commits: only when no task is left fresh (the shard may be complete, or hold a
    // lease to take over), or the caller asks (a worker entering the shard).
    let settled = settled(view);
    if settled || with_commits {
        for t in list_commits(ctx, store, &view.names[p], &s).await? {
            view.terminal.insert((p, t));
        }
        // Tasks seen leased here, as many again in every shard not done: about the
        // fleet's size, for idle waits (`idle_wait`).
        let leased = view.ids[p]
            .iter()
            .filter(|t| {
                let k = (p, (*t).clone());
                view.seen_leased.contains(&k) && !view.terminal.contains(&k)
            })
            .count();
        view.peak_inflight = view.peak_inflight.max(leased * undone);
    }
    if let Some(q) = follows(ctx, p)
        && !view.shards[q]
            .as_ref()
            .is_some_and(|u| u.all_done() || u.done.contains(&s))
    {
        for t in list_commits(ctx, store, &view.names[q], &s).await? {
            view.terminal.insert((q, t));
        }
    }
    Ok(())
}

/// Lists sharded phase `p`'s done markers into the view, forgetting what it held of
/// each newly done shard.
pub(super) async fn list_done(
    ctx: &WorkerCtx,
    store: &Store,
    view: &mut View,
    p: usize,
) -> Result<(), ProtoError> {
    let path = ctx.job.paths.shards_done(&view.names[p]);
    let digits = view.shards[p].as_ref().map_or(0, |c| c.digits);
    // Only a marker at a shard's own key counts: a stray object under `done/` must not
    // make up for a missing marker.
    let found: Vec<String> = list_all(store.as_ref(), &path, &ctx.retry)
        .await?
        .iter()
        .filter_map(|m| {
            let prefix = task_of(&m.location)?;
            let hex = prefix.len() == digits
                && prefix
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            (hex && m.location == ctx.job.paths.shard_done(&view.names[p], &prefix))
                .then_some(prefix)
        })
        .collect();
    for prefix in found {
        // Another worker wrote it: this worker's records there are needed no more.
        drop_own(ctx, &view.names[p], &prefix);
        mark_done(view, p, prefix);
    }
    Ok(())
}

/// Whether every task of the current shard of phase `p` is terminal in the view.
fn current_complete(view: &View, p: usize) -> bool {
    view.ids[p]
        .iter()
        .all(|t| view.terminal.contains(&(p, t.clone())))
}

/// The worker leaves its current shard of phase `p`: the view holds no shard's tasks.
fn leave(view: &mut View, p: usize) {
    let left = view.shards[p].as_mut().and_then(|c| c.current.take());
    let up = view.upstream[p].values().next().map(|(q, _)| *q);
    view.ids[p].clear();
    view.order[p].clear();
    view.upstream[p].clear();
    // What the view learnt of the tasks there that ended, and of the upstream shard
    // (unless the worker works there): learnt again on the way back in (entering
    // lists the shard's commits). Kept, a worker roaming the shards of a long job would
    // hold every task it ever saw end (MiBs a worker by a million tasks). Tasks seen
    // leased and not ended stay: their first sighting times a takeover.
    if let Some(s) = left {
        // Unless a phase that follows this one works in the same shard: its tasks
        // become ready as these end.
        let downstream_here = (0..view.shards.len()).any(|d| {
            d != p
                && view.shards[d]
                    .as_ref()
                    .is_some_and(|c| c.current.as_deref() == Some(s.as_str()))
                && view.upstream[d]
                    .values()
                    .next()
                    .is_some_and(|(q, _)| *q == p)
        });
        if !downstream_here {
            forget_ended(view, p, &s);
        }
        if let Some(q) = up
            && view.shards[q]
                .as_ref()
                .is_none_or(|c| c.current.as_deref() != Some(s.as_str()))
        {
            forget_ended(view, q, &s);
        }
    }
}

/// Drops the view's entries for the ended tasks of shard `prefix` of phase `p`.
fn forget_ended(view: &mut View, p: usize, prefix: &str) {
    let ended: Vec<(usize, String)> = view
        .terminal
        .iter()
        .filter(|k| k.0 == p && k.1.starts_with(prefix))
        .cloned()
        .collect();
    for k in ended {
        view.seen_leased.remove(&k);
        view.busy_until.remove(&k);
        view.spec_seen.remove(&k);
        view.terminal.remove(&k);
    }
}

/// A claim of a task of sharded phase `p` was lost: the worker's view of its shard
/// is behind, so it lists the shard after its next task (see [`after_task`]).
pub(super) fn lost_claim(view: &mut View, p: usize) {
    if let Some(c) = view.shards.get_mut(p).and_then(|c| c.as_mut()) {
        c.lost_unlisted = true;
    }
}

/// Fresh tasks (neither ended nor seen leased) the view holds in phase `p`'s current
/// shard at least, for the listing after a task to be left out.
const FRESH_TO_SKIP: usize = 64;
/// Tasks a worker ends in a shard between two listings of it, at most.
const ENDED_BETWEEN_LISTINGS: u32 = 4;

fn mark_done(view: &mut View, p: usize, prefix: String) {
    let Some(c) = view.shards[p].as_mut() else {
        return;
    };
    if !c.done.insert(prefix.clone()) {
        return;
    }
    c.skip_until.remove(&prefix);
    c.build_after.remove(&prefix);
    if c.current.as_deref() == Some(prefix.as_str()) {
        leave(view, p);
    }
    let of_shard = |k: &(usize, String)| k.0 == p && k.1.starts_with(prefix.as_str());
    view.terminal.retain(|k| !of_shard(k));
    view.seen_leased.retain(|k| !of_shard(k));
    view.busy_until.retain(|k, _| !of_shard(k));
    view.spec_seen.retain(|k, _| !of_shard(k));
}

/// Makes shard `prefix` of phase `p` the worker's current one: its manifests (one GET,
/// kept a while) and its commits.
async fn enter(
    ctx: &WorkerCtx,
    store: &Store,
    view: &mut View,
    p: usize,
    prefix: &str,
    seed: u64,
) -> Result<(), ProtoError> {
    let shard = ctx.shard(store, &view.names[p], prefix).await?;
    let up = upstream_phase(ctx, p);
    view.ids[p] = shard.tasks.iter().map(|t| t.task_id.clone()).collect();
    view.upstream[p] = match up {
        Some(q) => shard
            .tasks
            .iter()
            .filter_map(|t| Some((t.task_id.clone(), (q, t.upstream.first()?.clone()))))
            .collect(),
        None => HashMap::new(),
    };
    view.order[p] = {
        use rand::{SeedableRng, seq::SliceRandom};
        let mut o: Vec<usize> = (0..view.ids[p].len()).collect();
        let s = seed
            ^ u64::from_str_radix(prefix, 16)
                .unwrap_or(0)
                .wrapping_mul(0x9e37_79b9);
        o.shuffle(&mut rand::rngs::StdRng::seed_from_u64(s));
        o
    };
    if let Some(c) = view.shards[p].as_mut() {
        c.current = Some(prefix.to_string());
    }
    // What this worker committed in the phase's other shards: their markers are
    // written by whoever ends their last task, reading the records back.
    ctx.own_commits
        .lock()
        .expect("own commits")
        .retain(|(ph, t), _| *ph != view.names[p] || t.starts_with(prefix));
    list_current(ctx, store, view, p, true).await
}

/// The commit records in shard `prefix`'s parts, by task, each of a task in `ids` and
/// of `phase` under its own id; a part that cannot be read, or names another job,
/// phase or shard, is passed over (its records are read by key).
async fn read_parts(
    ctx: &WorkerCtx,
    store: &Store,
    phase: &str,
    prefix: &str,
    ids: &[String],
) -> HashMap<String, CommitRecord> {
    let paths = &ctx.job.paths;
    // An optimisation: a listing that fails costs GETs, never the marker.
    let listed = match list_all(
        store.as_ref(),
        &paths.shard_parts(phase, prefix),
        &ctx.lease_retry,
    )
    .await
    {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(phase, prefix, error = %e, "shard parts not listed; records read by key");
            return HashMap::new();
        }
    };
    let parts: Vec<Option<ShardPart>> =
        futures::stream::iter(listed.into_iter().map(|m| async move {
            match get_json::<ShardPart>(store.as_ref(), &m.location, &ctx.lease_retry).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(part = %m.location, error = %e, "shard part passed over");
                    None
                }
            }
        }))
        .buffered(8)
        .collect()
        .await;
    merge_parts(
        parts.into_iter().flatten(),
        &ctx.job.manifest.job_id,
        phase,
        prefix,
        ids,
    )
}

/// The usable records of shard parts, by task: a part of this job, phase and shard
/// (and a version this build reads), a record of this job and phase and of a task of
/// `ids`; a task whose copies differ gets none.
fn merge_parts(
    parts: impl Iterator<Item = ShardPart>,
    job_id: &str,
    phase: &str,
    prefix: &str,
    ids: &[String],
) -> HashMap<String, CommitRecord> {
    let ids: HashSet<&str> = ids.iter().map(|t| t.as_str()).collect();
    let mut out: HashMap<String, CommitRecord> = HashMap::new();
    let mut conflicted: HashSet<String> = HashSet::new();
    for part in parts {
        if part.version > SHARDED_VERSION
            || part.job_id != job_id
            || part.phase != phase
            || part.prefix != prefix
        {
            continue;
        }
        for r in part.records {
            if r.phase != phase
                || r.job_id != job_id
                || !ids.contains(r.task_id.as_str())
                || conflicted.contains(&r.task_id)
            {
                continue;
            }
            match out.get(&r.task_id) {
                Some(seen) if *seen != r => {
                    out.remove(&r.task_id);
                    conflicted.insert(r.task_id);
                }
                Some(_) => {}
                None => {
                    out.insert(r.task_id.clone(), r);
                }
            }
        }
    }
    out
}

/// Keeps only the held records whose serialised size is the size the store lists for
/// the task's commit object (one LIST of the shard's commits): a copy that is not the
/// stored record, whoever made it, is read by key instead. A listing that fails keeps
/// none.
async fn confirm_sizes(
    ctx: &WorkerCtx,
    store: &Store,
    phase: &str,
    prefix: &str,
    held: &mut HashMap<String, CommitRecord>,
) {
    let path = ctx.job.paths.commits_shard(phase, prefix);
    let sizes: HashMap<String, u64> = match list_all(store.as_ref(), &path, &ctx.lease_retry).await
    {
        Ok(l) => l
            .iter()
            .filter_map(|m| Some((task_of(&m.location)?, m.size)))
            .collect(),
        Err(e) => {
            tracing::warn!(phase, prefix, error = %e, "commits not listed; records read by key");
            held.clear();
            return;
        }
    };
    keep_listed_sizes(held, &sizes);
}

/// Keeps the held records whose bytes as `create_json` writes them are as long as the
/// listed object of their task.
fn keep_listed_sizes(held: &mut HashMap<String, CommitRecord>, sizes: &HashMap<String, u64>) {
    held.retain(|t, r| {
        let len = serde_json::to_vec_pretty(r).map_or(0, |b| b.len() as u64);
        sizes.get(t) == Some(&len)
    });
}

/// A worker leaving shard `prefix` of `phase` before it is complete: its own commit
/// records there, as one part for the marker's writer (none held: nothing written).
/// A part that could not be written costs that writer a GET a record, nothing else.
async fn write_part(ctx: &WorkerCtx, store: &Store, phase: &str, prefix: &str) {
    let mut records: Vec<CommitRecord> = {
        let mut o = ctx.own_commits.lock().expect("own commits");
        let (mine, rest) = std::mem::take(&mut *o)
            .into_iter()
            .partition(|(k, _)| in_shard(k, phase, prefix));
        *o = rest;
        mine.into_values().collect()
    };
    if records.is_empty() {
        return;
    }
    records.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    let part = ShardPart {
        version: SHARDED_VERSION,
        job_id: ctx.job.manifest.job_id.clone(),
        phase: phase.to_string(),
        prefix: prefix.to_string(),
        worker: ctx.worker_id.clone(),
        records,
    };
    let body = Bytes::from(serde_json::to_vec(&part).expect("json"));
    let path = ctx
        .job
        .paths
        .shard_part(phase, prefix, &ctx.entropy.hex_id(8));
    // A short SlowDown budget: an optimisation must not hold a worker up for long.
    if let Err(e) = create_bytes(store.as_ref(), &path, body, None, &ctx.lease_retry).await {
        tracing::warn!(part = %path, error = %e, "could not write a shard part");
    }
}

/// Whether an entry of `WorkerCtx::own_commits` is of shard `prefix` of `phase`.
fn in_shard((ph, t): &(String, String), phase: &str, prefix: &str) -> bool {
    ph == phase && t.starts_with(prefix)
}

/// Forgets this worker's own commit records of shard `prefix` of `phase`: its marker
/// is written.
fn drop_own(ctx: &WorkerCtx, phase: &str, prefix: &str) {
    ctx.own_commits
        .lock()
        .expect("own commits")
        .retain(|k, _| !in_shard(k, phase, prefix));
}

/// Writes shard `prefix`'s done marker from the commit records of its tasks, each read
/// by key (a listing may lag; a GET does not). False if a task the view holds terminal
/// has no record after all (it is then taken as not terminal).
async fn write_done(
    ctx: &WorkerCtx,
    store: &Store,
    view: &mut View,
    p: usize,
    prefix: &str,
) -> Result<bool, ProtoError> {
    let phase = view.names[p].clone();
    let paths = &ctx.job.paths;
    // Most often another worker of the shard wrote it already: one HEAD, not a GET of
    // every record.
    {
        use object_store::ObjectStoreExt;
        let path = paths.shard_done(&phase, prefix);
        match ctx.retry.run(|| store.head(&path)).await {
            Ok(_) => {
                drop_own(ctx, &phase, prefix);
                return Ok(true);
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(ProtoError::store(&path, e)),
        }
    }
    // This worker's own records as it wrote them, then the parts other workers left
    // (docs/PROTOCOL.md §1, `ShardPart`); the rest read back by key.
    let mut known: HashMap<String, CommitRecord> = {
        let o = ctx.own_commits.lock().expect("own commits");
        o.iter()
            .filter(|(k, _)| in_shard(k, &phase, prefix))
            .map(|((_, t), r)| (t.clone(), r.clone()))
            .collect()
    };
    if view.ids[p].iter().any(|t| !known.contains_key(t)) {
        for (t, r) in read_parts(ctx, store, &phase, prefix, &view.ids[p]).await {
            known.entry(t).or_insert(r);
        }
    }
    if !known.is_empty() {
        confirm_sizes(ctx, store, &phase, prefix, &mut known).await;
    }
    let records: Vec<(String, Option<CommitRecord>)> =
        futures::stream::iter(view.ids[p].iter().cloned().map(|t| {
            let path = paths.commit(&phase, &t);
            let held = known.remove(&t);
            async move {
                let r = match held {
                    Some(r) => Some(r),
                    None => get_json::<CommitRecord>(store.as_ref(), &path, &ctx.retry).await?,
                };
                Ok::<_, ProtoError>((t, r))
            }
        }))
        .buffered(32)
        .try_collect()
        .await?;
    let mut out = Vec::with_capacity(records.len());
    let mut complete = true;
    for (t, r) in records {
        match r {
            Some(r) if r.task_id == t && r.phase == phase => out.push(r),
            Some(r) => {
                return Err(ProtoError::Corrupt {
                    path: paths.commit(&phase, &t).to_string(),
                    message: format!("holds the record of task {}/{}", r.phase, r.task_id),
                });
            }
            None => {
                view.terminal.remove(&(p, t));
                complete = false;
            }
        }
    }
    if !complete {
        return Ok(false);
    }
    out.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    let marker = ShardDone {
        version: SHARDED_VERSION,
        job_id: ctx.job.manifest.job_id.clone(),
        phase: phase.clone(),
        prefix: prefix.to_string(),
        records: out,
    };
    let body = Bytes::from(serde_json::to_vec(&marker).expect("json"));
    let path = paths.shard_done(&phase, prefix);
    // Another worker's marker of the same shard holds the same (immutable) records.
    match create_bytes(store.as_ref(), &path, body, None, &ctx.retry).await? {
        Created::Mine | Created::Theirs(_) => {
            drop_own(ctx, &phase, prefix);
            Ok(true)
        }
    }
}

/// After this worker ended a task of sharded phase `p` (which took `took_ms`, unless a
/// backup's): lists its shard and, if that
/// task was the shard's last, writes the shard's marker now, before the worker may
/// leave (a drain or shutdown is honoured at the top of its loop).
pub(super) async fn after_task(
    ctx: &WorkerCtx,
    store: &Store,
    view: &mut View,
    p: usize,
    task: &str,
    took_ms: Option<u64>,
) -> Result<(), ProtoError> {
    let Some(c) = view.shards[p].as_mut() else {
        return Ok(());
    };
    let prefix = c.prefix_of(task).to_string();
    c.last_own = Some(prefix.clone());
    if let Some(d) = took_ms {
        c.typical_ms = Some(c.typical_ms.map_or(d, |t| (3 * t + d) / 4));
    }
    if c.current.as_deref() != Some(prefix.as_str()) {
        return Ok(());
    }
    // The listing after a task tells the worker which tasks others leased meanwhile
    // (its next claim should not lose) and whether the shard is complete (its marker
    // is this worker's to write). Far from the shard's end, with no claim lost since
    // the last listing, a claim of a task the view holds fresh most likely wins (a
    // lost one costs a PUT and a GET, and a listing after the next task), so up to
    // `ENDED_BETWEEN_LISTINGS` tasks go without one: a request a task saved for a
    // few lost claims.
    c.ended_unlisted += 1;
    let (ended, lost) = (c.ended_unlisted, c.lost_unlisted);
    // Not in a phase that follows another: its tasks become ready only as the
    // upstream's commits are listed, which this listing does.
    if ended < ENDED_BETWEEN_LISTINGS && !lost && view.upstream[p].is_empty() {
        let fresh = view.ids[p]
            .iter()
            .filter(|t| {
                let k = (p, (*t).clone());
                !view.terminal.contains(&k) && !view.seen_leased.contains(&k)
            })
            .take(FRESH_TO_SKIP)
            .count();
        if fresh >= FRESH_TO_SKIP {
            if let Some(c) = view.shards[p].as_mut() {
                c.stale = false;
            }
            return Ok(());
        }
    }
    list_current(ctx, store, view, p, false).await?;
    let complete = current_complete(view, p);
    if complete && write_done(ctx, store, view, p, &prefix).await? {
        mark_done(view, p, prefix);
    }
    Ok(())
}

/// Keeps the worker in a shard of sharded phase `p` that has a task for it to claim:
/// marks the current shard done when all of it is terminal, and moves on, to a random
/// shard not done, when it has nothing to claim (a few shards a round; a phase that
/// follows another stays in the shard of the upstream phase the worker is in). With
/// every shard left looked at lately, it enters one anyway, where a lease that has
/// expired may be taken over.
pub(super) async fn settle(
    ctx: &WorkerCtx,
    store: &Store,
    view: &mut View,
    p: usize,
    seed: u64,
) -> Result<(), ProtoError> {
    let Some(c) = view.shards[p].as_ref() else {
        return Ok(());
    };
    if c.all_done() || view.barrier[p].is_some_and(|b| !view.phase_done(b)) {
        return Ok(());
    }
    if c.stale {
        list_current(ctx, store, view, p, false).await?;
    }
    let follower = follows(ctx, p).filter(|&q| !view.phase_done(q));
    for _ in 0..SHARDS_PER_ROUND {
        let c = view.shards[p].as_ref().expect("sharded");
        if let Some(s) = c.current.clone() {
            let all_terminal = current_complete(view, p);
            if all_terminal {
                // Written by the worker that ended the shard's last task, right after;
                // by anyone else only a TTL later (that worker may be gone), so a
                // shard's records are read about once.
                let c = view.shards[p].as_mut().expect("sharded");
                let now = ctx.clock.now_ms();
                // Also when no task of it was ever leased (all reused, or committed by a
                // converged dedup's tail): nobody else ended its last task.
                let never_leased = !view.ids[p]
                    .iter()
                    .any(|t| view.seen_leased.contains(&(p, t.clone())));
                let mine = c.last_own.as_deref() == Some(s.as_str()) || never_leased;
                let after = *c.build_after.entry(s.clone()).or_insert(now + ctx.ttl_ms());
                if mine || now >= after {
                    if write_done(ctx, store, view, p, &s).await? {
                        mark_done(view, p, s);
                    }
                    continue;
                }
                c.skip_until.insert(s, after);
                leave(view, p);
                continue;
            }
            // Fresh work here (a task nobody has leased); a leased one, to take over
            // once its lease expires, only when no shard has any (below).
            // A task nobody has leased, or one seen leased a TTL ago and not committed
            // since (its holder may be dead: a look starts the clock for taking it
            // over): stay.
            if pick_among(ctx, view, &|q| q == p).is_some() {
                return Ok(());
            }
            // Nothing to claim here: move to a shard not looked at lately, or else
            // stay, and look again when a lease here is due (a worker that roamed
            // every shard at the phase's tail would probe every task in flight:
            // fleet × fleet requests).
            if follower.is_none() {
                let c = view.shards[p].as_ref().expect("sharded");
                let now = ctx.clock.now_ms();
                let elsewhere = shard_prefixes(c.digits).any(|x| {
                    x != s && !c.done.contains(&x) && c.skip_until.get(&x).is_none_or(|&u| u <= now)
                });
                if !elsewhere {
                    return Ok(());
                }
            }
            // Its own records there, for whoever ends the shard's last task.
            write_part(ctx, store, &view.names[p], &s).await;
            let until = ctx.clock.now_ms() + ctx.ttl_ms();
            let c = view.shards[p].as_mut().expect("sharded");
            c.skip_until.insert(s, until);
            leave(view, p);
            if follower.is_some() {
                return Ok(());
            }
        }
        let c = view.shards[p].as_ref().expect("sharded");
        if c.all_done() {
            return Ok(());
        }
        let now = ctx.clock.now_ms();
        let open = |s: &String| !c.done.contains(s);
        let rested = |s: &String| c.skip_until.get(s).is_none_or(|&u| u <= now);
        let (next, last) = match follower {
            // A follower: a shard whose upstream shard is done (known from its markers
            // to workers of every class), else the one this worker works upstream,
            // else any (a worker of another class than the upstream's finds ready
            // tasks there as the upstream's workers commit them).
            Some(q) => {
                let up = view.shards[q].as_ref();
                let up_done: Vec<String> = up
                    .map(|u| {
                        u.done
                            .iter()
                            .filter(|s| open(s) && rested(s))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                let here = up
                    .and_then(|u| u.current.clone())
                    .filter(|s| open(s) && rested(s));
                if !up_done.is_empty() {
                    let i = ctx.entropy.below(up_done.len() as u64) as usize;
                    (up_done[i.min(up_done.len() - 1)].clone(), true)
                } else if let Some(s) = here {
                    (s, true)
                } else {
                    let cands: Vec<String> = shard_prefixes(c.digits)
                        .filter(|s| open(s) && rested(s))
                        .collect();
                    if cands.is_empty() {
                        return Ok(());
                    }
                    let i = ctx.entropy.below(cands.len() as u64) as usize;
                    (cands[i.min(cands.len() - 1)].clone(), true)
                }
            }
            None => {
                let mut cands: Vec<String> = shard_prefixes(c.digits)
                    .filter(|s| open(s) && rested(s))
                    .collect();
                let last = cands.is_empty();
                if last {
                    cands = shard_prefixes(c.digits).filter(open).collect();
                }
                let i = ctx.entropy.below(cands.len() as u64) as usize;
                (cands.swap_remove(i.min(cands.len() - 1)), last)
            }
        };
        enter(ctx, store, view, p, &next, seed).await?;
        if last {
            return Ok(());
        }
    }
    Ok(())
}

/// Every commit record of sharded phase `plan`, from its shards' done markers, checked
/// to be exactly the planned tasks (finalize).
pub async fn done_records(
    store: &Store,
    ctx: &WorkerCtx,
    plan: &crate::protocol::records::PhasePlan,
) -> Result<Vec<CommitRecord>, String> {
    let paths = &ctx.job.paths;
    let phase = plan.name.as_str();
    let markers: Vec<ShardDone> =
        futures::stream::iter(shard_prefixes(plan.shard_digits as usize).map(|prefix| {
            let path = paths.shard_done(phase, &prefix);
            async move {
                match get_json::<ShardDone>(store.as_ref(), &path, &ctx.retry).await {
                    Ok(Some(m)) if m.phase == phase && m.prefix == prefix => Ok(m),
                    Ok(Some(_)) => Err(format!("{path}: the marker of another shard")),
                    Ok(None) => Err(format!(
                        "shard {phase}/{prefix} has no done marker although its phase is complete"
                    )),
                    Err(e) => Err(e.to_string()),
                }
            }
        }))
        .buffered(32)
        .try_collect()
        .await?;
    let records: Vec<CommitRecord> = markers
        .into_iter()
        .flat_map(|m| {
            let prefix = m.prefix;
            m.records.into_iter().map(move |r| (prefix.clone(), r))
        })
        .map(|(prefix, r)| {
            if r.phase == phase && r.task_id.starts_with(&prefix) {
                Ok(r)
            } else {
                Err(format!(
                    "the done marker of shard {phase}/{prefix} holds task {}/{}",
                    r.phase, r.task_id
                ))
            }
        })
        .collect::<Result<_, _>>()?;
    let mut ids: Vec<&str> = records.iter().map(|r| r.task_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let digest_ok = plan
        .task_digest
        .as_deref()
        .is_none_or(|d| d == crate::protocol::records::task_digest(&ids));
    if ids.len() != records.len() || ids.len() as u64 != plan.tasks || !digest_ok {
        return Err(format!(
            "phase {phase}: its done markers hold {} records of {} tasks, the plan {} tasks{}",
            records.len(),
            ids.len(),
            plan.tasks,
            if digest_ok {
                ""
            } else {
                " (not the planned ids)"
            }
        ));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(job: &str, phase: &str, task: &str, worker: &str) -> CommitRecord {
        serde_json::from_value(serde_json::json!({
            "version": 3, "job_id": job, "phase": phase, "task_id": task,
            "status": "committed", "attempt": "a1", "worker": worker, "epoch": 0,
            "write_id": "w1", "started_ms": 1, "finished_ms": 2,
            "outputs": [{"uri": "file:///o.parquet", "rows": 3, "bytes": 4, "blake3": "ab"}]
        }))
        .unwrap()
    }

    fn part(job: &str, phase: &str, prefix: &str, records: Vec<CommitRecord>) -> ShardPart {
        ShardPart {
            version: SHARDED_VERSION,
            job_id: job.into(),
            phase: phase.into(),
            prefix: prefix.into(),
            worker: "w".into(),
            records,
        }
    }

    #[test]
    fn only_this_shards_own_records_are_taken_from_parts_and_conflicting_copies_never() {
        let ids: Vec<String> = ["a1", "a2", "a3", "a4"].map(String::from).to_vec();
        let newer = ShardPart {
            version: SHARDED_VERSION + 1,
            ..part("j", "p00", "a", vec![record("j", "p00", "a1", "x")])
        };
        let parts = vec![
            part("other", "p00", "a", vec![record("j", "p00", "a1", "x")]),
            part("j", "p01", "a", vec![record("j", "p00", "a1", "x")]),
            part("j", "p00", "b", vec![record("j", "p00", "a1", "x")]),
            newer,
            part(
                "j",
                "p00",
                "a",
                vec![
                    record("other", "p00", "a1", "x"),
                    record("j", "p01", "a1", "x"),
                    record("j", "p00", "b1", "x"),
                    record("j", "p00", "a2", "good"),
                    record("j", "p00", "a3", "one"),
                ],
            ),
            // The same copy again is fine; a different one voids both.
            part(
                "j",
                "p00",
                "a",
                vec![
                    record("j", "p00", "a2", "good"),
                    record("j", "p00", "a3", "two"),
                ],
            ),
            part("j", "p00", "a", vec![record("j", "p00", "a3", "one")]),
        ];
        let got = merge_parts(parts.into_iter(), "j", "p00", "a", &ids);
        assert_eq!(got.keys().collect::<Vec<_>>(), vec!["a2"]);
        assert_eq!(got["a2"], record("j", "p00", "a2", "good"));
    }

    #[test]
    fn a_held_record_is_kept_only_when_as_long_as_the_stored_object() {
        let real = record("j", "p00", "a1", "w");
        let stored = serde_json::to_vec_pretty(&real).unwrap().len() as u64;
        let mut held: HashMap<String, CommitRecord> = [
            ("a1".to_string(), real.clone()),
            ("a2".to_string(), record("j", "p00", "a2", "forger")),
            ("a3".to_string(), record("j", "p00", "a3", "w")),
        ]
        .into();
        let sizes: HashMap<String, u64> =
            [("a1".to_string(), stored), ("a2".to_string(), stored)].into();
        keep_listed_sizes(&mut held, &sizes);
        // a2: another length than its object; a3: no object listed.
        assert_eq!(held.len(), 1);
        assert_eq!(held["a1"], real);
    }
}
