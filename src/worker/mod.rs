//! The worker: leases tasks, runs them, commits them (docs/PROTOCOL.md §4-§6). It
//! keeps only a cache of what it has listed (immutable task ids, terminal tasks,
//! tasks seen leased), so any number of workers can join or vanish at any time. It
//! knows nothing about what an operator computes beyond the operator interface.
mod attempt;
mod executor;
pub use executor::SimulatedWork;
pub mod finalize;
pub mod outage;
pub mod pipeline;
pub mod publish;
mod shards;
pub mod slots;
pub mod task;

use crate::clock::{Clock, Entropy};
use crate::ops;
use crate::protocol::hash16;
use crate::protocol::io::{ProtoError, Retry, list_all, list_dirs, put_json};
use crate::protocol::job::{JobError, LoadedJob};
use crate::protocol::lease::{Claim, Held, LeaseCtx};
use crate::protocol::records::{
    CommitRecord, FINALIZE, PhaseKind, TaskShard, VERSION, WorkerStats,
};
use crate::protocol::{planned_task_ids, task_of};
use crate::store::{Registry, RequestCounts};
use pipeline::BoundStage;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a worker runs.
#[derive(Clone)]
pub struct WorkerOptions {
    pub job_uri: String,
    /// Stop after this many task attempts.
    pub max_tasks: Option<u64>,
    pub worker_id: Option<String>,
    /// Whether this worker may take GPU phases.
    pub gpu: bool,
    /// A GPU worker also takes CPU phases' tasks when no GPU task is ready.
    pub cpu_work: bool,
    pub clock: Arc<dyn Clock>,
    pub entropy: Entropy,
    /// Set on SIGTERM (and at a spot interruption's deadline): stop claiming, hand
    /// the running task's lease back, exit.
    pub shutdown: Arc<AtomicBool>,
    /// Set on a spot interruption notice: stop claiming, let the running task finish
    /// (until `shutdown` is set), exit.
    pub drain: Arc<AtomicBool>,
    /// Set on a rebalance recommendation: as `drain`, but only once this worker has
    /// run a task (an instance that leaves before doing any work would only be
    /// replaced by another that may get the same recommendation).
    pub drain_after_task: Arc<AtomicBool>,
    /// Stop once no task this worker may take (by its class, see [`pick`]) can
    /// appear again: every such phase is terminal. A GPU instance of a fleet leaves
    /// when the GPU phases are done instead of idling through the CPU ones.
    pub exit_when_class_done: bool,
    /// Stop (with an error) once the store has been unavailable this long; `None`:
    /// wait out any outage.
    pub give_up_after: Option<Duration>,
    /// Listings shared with the other task slots of this process (`slots::run_slots`).
    pub listings: Option<Arc<slots::SharedListings>>,
    /// The fleet simulator's work in place of every phase's executor (docs/SCALE.md);
    /// `None` everywhere else.
    pub simulate: Option<executor::SimulatedWork>,
}

/// What a worker did.
#[derive(Debug, Clone, Default)]
pub struct WorkerReport {
    pub worker_id: String,
    pub committed: u64,
    pub failed: u64,
    pub released: u64,
    pub fenced: u64,
    pub claims_lost: u64,
    /// Backup attempts of stragglers this worker ran (`job.speculation`), and how
    /// many of them committed the task.
    pub backups: u64,
    pub backups_won: u64,
    /// Every task of the job is terminal.
    pub job_complete: bool,
    /// Every task this worker's class may take is terminal (see
    /// [`WorkerOptions::exit_when_class_done`]).
    pub class_done: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Job(#[from] JobError),
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error("{0}")]
    Plan(String),
    #[error("storage unavailable for {secs} s, giving up (--give-up-after): {last}")]
    Outage { secs: u64, last: String },
}

/// Shared, read-only context of one worker.
pub struct WorkerCtx {
    /// Stores without task counters (commits count themselves).
    pub base: Registry,
    /// Stores counting into the worker's own counters (work outside tasks).
    pub coord: Registry,
    pub job: LoadedJob,
    pub clock: Arc<dyn Clock>,
    pub entropy: Entropy,
    pub retry: Retry,
    /// `retry` for lease operations: a store asking to slow down is tried again for
    /// about one heartbeat interval, so a claim or renewal does not outlive the lease it
    /// acts under while waiting (and the heartbeat keeps passing shutdown on). The
    /// commit itself keeps `retry`'s budget (create-only: a late landing is still one
    /// commit; giving up would rerun the task).
    pub lease_retry: Retry,
    pub worker_id: String,
    pub stages: Vec<Vec<BoundStage>>,
    pub shutdown: Arc<AtomicBool>,
    /// Task ids per phase, sorted (the last entry is finalize); set at start, except a
    /// sharded phase's, read when a task needs them ([`WorkerCtx::ensure_ids`]).
    pub ids: std::sync::RwLock<Arc<Vec<Vec<String>>>>,
    /// Shards of task manifests read lately, by (phase, prefix).
    pub shards: std::sync::Mutex<HashMap<(String, String), Arc<TaskShard>>>,
    /// Commit records read by dedup tasks, by (phase, task): create-only, so cacheable.
    pub commits: std::sync::Mutex<HashMap<(String, String), Arc<CommitRecord>>>,
    /// The commit records this worker wrote (its create-only PUT landed) in the shards
    /// it works in, by (phase, task): a shard's done marker takes them from here rather
    /// than reading them back (one GET a task saved for the marker's writer's share of
    /// the shard). Dropped when the marker is written or the worker enters another
    /// shard of the phase.
    pub own_commits: std::sync::Mutex<HashMap<(String, String), CommitRecord>>,
    /// Lease records of other attempts this worker has seen, for clock-free expiry.
    pub observed: crate::protocol::lease::Observations,
    /// The worker's own request counters (`workers/<id>.json`): work outside tasks,
    /// and the requests of attempts that commit nothing (released, fenced,
    /// outraced), which no commit record carries.
    pub counts: Arc<RequestCounts>,
    /// See [`WorkerOptions::simulate`].
    pub simulate: Option<executor::SimulatedWork>,
}

impl WorkerCtx {
    /// The sorted task ids of every phase known so far (see [`WorkerCtx::ensure_ids`]).
    pub fn all_ids(&self) -> Arc<Vec<Vec<String>>> {
        self.ids.read().expect("ids lock").clone()
    }
    /// The sorted task ids of a phase.
    pub fn task_ids(&self, phase: usize) -> Vec<String> {
        self.all_ids().get(phase).cloned().unwrap_or_default()
    }
    pub fn ttl_ms(&self) -> u64 {
        self.job.spec.job.lease_ttl_secs * 1000
    }
    /// How often a wait looks at the shutdown and cancel flags: `real` in a real
    /// worker, seldom in a simulated one ([`executor::SimulatedWork::flag_poll`]).
    pub fn flag_poll(&self, real: Duration) -> Duration {
        self.simulate
            .as_ref()
            .map_or(real, |s| s.flag_poll.max(real))
    }

    /// The lease operations of this worker on `store`.
    pub fn lease<'a>(&'a self, store: &'a dyn object_store::ObjectStore) -> LeaseCtx<'a> {
        LeaseCtx {
            store,
            clock: self.clock.as_ref(),
            entropy: &self.entropy,
            worker: &self.worker_id,
            ttl_ms: self.ttl_ms(),
            retry: &self.lease_retry,
            observed: &self.observed,
        }
    }
}

/// Binds each phase's stages to its planned input schema and checks the result
/// against the planned output.
///
/// A column the phase does not output (one the planner drops early, see
/// `coordinator::plan::bind`) leaves the batches right after the last stage that
/// needs it, so later stages neither filter nor copy it: the page HTML goes after
/// `html_extract`. Rejected records of later stages are kept without it.
/// `operators` are the spec's stages built (`ops::build_stages`), in stage order.
pub fn bind_stages(
    job: &LoadedJob,
    operators: &[Arc<dyn ops::Operator>],
) -> Result<Vec<Vec<BoundStage>>, String> {
    let mut out = Vec::new();
    for p in &job.manifest.phases {
        let mut schema = Arc::new(p.input_schema.clone());
        let mut bound: Vec<BoundStage> = Vec::new();
        for (k, &i) in p.stages.iter().enumerate() {
            let st = &job.spec.stages[i];
            let op = &operators[i];
            let histograms = ops::histogram_columns(op.as_ref(), &schema);
            let totals = op
                .totals()
                .into_iter()
                .map(|mut t| {
                    t.by.retain(|c| schema.field_with_name(c).is_ok());
                    t
                })
                .collect();
            schema = ops::output_schema(op.as_ref(), &schema)
                .map_err(|e| format!("stage {}: {e}", st.name))?;
            let out_schema = schema.clone();
            let rest: Vec<&Arc<dyn ops::Operator>> =
                p.stages[k + 1..].iter().map(|&j| &operators[j]).collect();
            let mut keep: Vec<usize> = (0..schema.fields().len()).collect();
            if !rest.is_empty() {
                for (ci, f) in schema.fields().iter().enumerate() {
                    if f.name() == crate::records::ID
                        || p.output_schema.field_with_name(f.name()).is_ok()
                    {
                        continue;
                    }
                    let without: Vec<usize> = keep.iter().copied().filter(|&x| x != ci).collect();
                    let trial = Arc::new(schema.project(&without).map_err(|e| e.to_string())?);
                    if binds_without(&rest, trial, &p.output_schema) {
                        keep = without;
                    }
                }
            }
            let then_keep = if keep.len() < schema.fields().len() {
                schema = Arc::new(schema.project(&keep).map_err(|e| e.to_string())?);
                Some(keep)
            } else {
                None
            };
            bound.push(BoundStage {
                name: st.name.clone(),
                op: op.clone(),
                out_schema,
                then_keep,
                histograms,
                totals,
            });
        }
        if let Some(f) = unplanned(&schema, &p.output_schema) {
            return Err(format!(
                "phase {}: planned column {:?} does not match what this mdf computes; was the job planned by another version?",
                p.name,
                f.name()
            ));
        }
        out.push(bound);
    }
    Ok(out)
}

/// Whether `stages` bind to `schema` and still produce every planned column.
fn binds_without(
    stages: &[&Arc<dyn ops::Operator>],
    mut schema: arrow_schema::SchemaRef,
    planned: &arrow_schema::Schema,
) -> bool {
    for op in stages {
        match ops::output_schema(op.as_ref(), &schema) {
            Ok(s) => schema = s,
            Err(_) => return false,
        }
    }
    unplanned(&schema, planned).is_none()
}

/// The first planned column that `schema` lacks or types differently.
fn unplanned<'a>(
    schema: &arrow_schema::Schema,
    planned: &'a arrow_schema::Schema,
) -> Option<&'a arrow_schema::Field> {
    planned
        .fields()
        .iter()
        .find(|f| {
            schema
                .field_with_name(f.name())
                .map_or(true, |g| g.data_type() != f.data_type())
        })
        .map(|f| f.as_ref())
}

/// The built operators of a spec, by spec hash: workers of one process share them
/// with their assets loaded (a 4.5M-domain block list is loaded once per process,
/// not once per worker).
type Operators = Arc<[Arc<dyn ops::Operator>]>;

fn loaded_specs() -> &'static tokio::sync::Mutex<HashMap<String, Operators>> {
    static M: std::sync::OnceLock<tokio::sync::Mutex<HashMap<String, Operators>>> =
        std::sync::OnceLock::new();
    M.get_or_init(Default::default)
}

/// The job's operators, built from its spec, with the assets of every operator this
/// worker may run fetched and loaded (a CPU worker skips GPU stages: it never leases
/// their phases, and their models may need a GPU to load).
async fn with_assets(
    reg: &Registry,
    job: &LoadedJob,
    retry: &Retry,
    gpu: bool,
) -> Result<Operators, WorkerError> {
    let mut cache = loaded_specs().lock().await;
    let key = format!("{}/{gpu}", job.manifest.spec_hash);
    if let Some(s) = cache.get(&key) {
        return Ok(s.clone());
    }
    let operators: Operators = ops::build_stages(&job.spec)
        .map_err(|e| WorkerError::Plan(e.to_string()))?
        .into();
    for (st, op) in job.spec.stages.iter().zip(operators.iter()) {
        if st.resources.gpu > 0 && !gpu {
            continue;
        }
        let assets = op.assets();
        if assets.is_empty() {
            continue;
        }
        let mut loaded = Vec::new();
        for a in assets {
            let (store, uri) = reg
                .resolve(&a.uri)
                .map_err(|e| WorkerError::Plan(format!("stage {}: {}: {e}", st.name, a.param)))?;
            // The version the job was planned with, and no other.
            let pinned = job.manifest.asset_etags.get(&a.uri).cloned();
            let bytes = retry
                .run(|| async {
                    let opts = object_store::GetOptions {
                        if_match: pinned.clone(),
                        ..Default::default()
                    };
                    store.get_opts(&uri.path, opts).await?.bytes().await
                })
                .await
                .map_err(|e| match e {
                    // An outage, not a bad asset: the caller waits it out.
                    e if crate::protocol::io::is_transient(&e) => ProtoError::store(&uri.path, e).into(),
                    object_store::Error::Precondition { .. } => WorkerError::Plan(format!(
                        "stage {}: {}: input_changed: {} was rewritten after the job was planned; submit a new job to use the new version",
                        st.name, a.param, a.uri
                    )),
                    e => WorkerError::Plan(format!(
                        "stage {}: {} ({}): {e}",
                        st.name, a.param, a.uri
                    )),
                })?;
            loaded.push((a, bytes));
        }
        op.load(&loaded)
            .map_err(|e| WorkerError::Plan(format!("stage {}: {e}", st.name)))?;
    }
    cache.insert(key, operators.clone());
    Ok(operators)
}

type Key = (usize, String);

/// The worker's cache of the job's state.
struct View {
    /// Task ids per phase; the last entry is the finalize phase.
    ids: Vec<Vec<String>>,
    /// Per phase, the order in which this worker tries tasks: a permutation seeded
    /// by the worker id, so concurrent workers rarely reach for the same task.
    order: Vec<Vec<usize>>,
    names: Vec<String>,
    /// For phase k > 0: task id → the (phase, task) whose output it reads.
    upstream: Vec<HashMap<String, (usize, String)>>,
    /// For phase k: a phase that must be entirely terminal before any of its tasks
    /// starts (a dedup reduce phase waits for its map phase, apply for reduce).
    barrier: Vec<Option<usize>>,
    /// For phase k < last: upstream id → downstream id.
    downstream: Vec<HashMap<String, String>>,
    terminal: HashSet<Key>,
    seen_leased: HashSet<Key>,
    busy_until: HashMap<Key, u64>,
    /// Backup attempts (`job.speculation`): when this worker last looked for
    /// stragglers, tasks known to have had a backup, phases whose budget is spent,
    /// and the median duration of each phase's committed tasks once known.
    speculated_ms: Option<u64>,
    /// Per candidate: the top lease record's seq when last looked at, and when (on
    /// the local clock). A lease counts as live only when its holder renewed it
    /// between two looks within one TTL: a dead holder is taken over, not backed up.
    spec_seen: HashMap<Key, (u64, u64)>,
    backed_up: HashSet<Key>,
    budget_spent: HashSet<usize>,
    median_ms: HashMap<usize, u64>,
    /// The most tasks this worker's listings ever showed leased and not yet
    /// terminal at once: about the fleet's size (see `idle_wait`).
    peak_inflight: usize,
    /// Per phase, where the worker stands in it if it is sharded (`ids`, `order` and
    /// `upstream` then hold only its current shard's tasks).
    shards: Vec<Option<shards::ShardCursor>>,
}

impl View {
    fn all_terminal(&self) -> bool {
        if self.shards.iter().all(Option::is_none) {
            return self.ids.iter().map(Vec::len).sum::<usize>() == self.terminal.len();
        }
        (0..self.names.len()).all(|p| self.phase_done(p))
    }
    /// Whether an upstream task `up` is known terminal: seen committed, or its shard
    /// (of a sharded phase) done, whose keys the view forgets.
    fn upstream_ready(&self, up: &Key) -> bool {
        self.terminal.contains(up)
            || self.shards[up.0]
                .as_ref()
                .is_some_and(|c| c.all_done() || c.done.contains(c.prefix_of(&up.1)))
    }
    fn phase_done(&self, p: usize) -> bool {
        if let Some(c) = &self.shards[p] {
            return c.all_done();
        }
        self.ids[p]
            .iter()
            .all(|t| self.terminal.contains(&(p, t.clone())))
    }
}

/// Runs a worker until the job is complete, `max_tasks` is reached, or shutdown.
///
/// A storage error that outlasts the request retries does not end it: the worker
/// backs off and tries again (see [`outage`]) until `give_up_after`, if set. Only a
/// missing job, denied access or a corrupt record end it at once.
pub async fn run(reg: &Registry, opts: WorkerOptions) -> Result<WorkerReport, WorkerError> {
    let mut outage =
        outage::Outage::new(opts.clock.clone(), opts.entropy.clone(), opts.give_up_after);
    let mut retry = Retry::new(opts.entropy.clone());
    let job = outage.load_job(reg, &opts.job_uri, &retry).await?;
    retry.attempts = job.spec.job.retry_attempts;
    retry.base = Duration::from_millis(job.spec.job.retry_base_millis);
    let base = reg.with_s3(job.spec.s3.clone());
    let counts = Arc::new(RequestCounts::default());
    let coord = base.counting_into(counts.clone());
    let operators = loop {
        match with_assets(&coord, &job, &retry, opts.gpu).await {
            Ok(s) => break s,
            Err(e) => outage.back_off(e).await?,
        }
    };
    outage.over();
    let store = coord.open(&job.uri).map_err(JobError::from)?;
    // Leases and commits need a store that refuses a second create.
    let name = coord.describe(&job.uri);
    loop {
        match crate::protocol::probe::require_create_only(
            store.as_ref(),
            &job.uri,
            &name,
            &opts.entropy,
            &retry,
        )
        .await
        {
            Ok(()) => break,
            // An outage is waited out; a store that overwrites is refused at once.
            Err(e) => outage.back_off(e.into()).await?,
        }
    }
    outage.over();
    let worker_id = opts
        .worker_id
        .clone()
        .unwrap_or_else(|| format!("w-{}", opts.entropy.hex_id(6)));
    let stages = bind_stages(&job, &operators).map_err(WorkerError::Plan)?;
    let heartbeat_secs = job.spec.job.heartbeat_secs;
    let ctx = Arc::new(WorkerCtx {
        base: base.clone(),
        coord: coord.clone(),
        job,
        clock: opts.clock.clone(),
        entropy: opts.entropy.clone(),
        retry: retry.clone(),
        lease_retry: Retry {
            slow_down_for: Duration::from_secs(heartbeat_secs)
                .min(crate::protocol::io::SLOW_DOWN_BUDGET),
            ..retry.clone()
        },
        worker_id: worker_id.clone(),
        stages,
        shutdown: opts.shutdown.clone(),
        ids: Default::default(),
        shards: Default::default(),
        commits: Default::default(),
        own_commits: Default::default(),
        observed: Default::default(),
        counts: counts.clone(),
        simulate: opts.simulate.clone(),
    });
    let job = &ctx.job;
    let lease = ctx.lease(store.as_ref());

    // Task ids never change after submit: list them once, every planned one (a
    // lagging listing is listed again), and the finalize task from job.json.
    let mut names: Vec<String> = job.manifest.phases.iter().map(|p| p.name.clone()).collect();
    names.push(FINALIZE.to_string());
    let mut ids = Vec::new();
    for p in &job.manifest.phases {
        // A sharded phase's ids are read a shard at a time (shards.rs).
        if p.shard_digits > 0 {
            ids.push(Vec::new());
            continue;
        }
        let v = loop {
            match planned_task_ids(store.as_ref(), &job.paths, p, &retry).await {
                Ok(v) => break v,
                Err(e) => outage.back_off(e.into()).await?,
            }
        };
        outage.over();
        ids.push(v);
    }
    ids.push(vec![job.manifest.finalize_task.clone()]);
    *ctx.ids.write().expect("ids lock") = Arc::new(ids.clone());
    let nphases = job.manifest.phases.len();
    let mut upstream = vec![HashMap::new(); nphases + 1];
    let mut downstream = vec![HashMap::new(); nphases + 1];
    let mut barrier = vec![None; nphases + 1];
    for k in 1..nphases {
        let ph = &job.manifest.phases[k];
        let fp = &ph.fingerprint;
        match (ph.kind, &ph.dedup) {
            (PhaseKind::Reduce | PhaseKind::Propagate, _) => barrier[k] = Some(k - 1),
            (PhaseKind::Apply, Some(d)) => {
                barrier[k] = Some(k - 1);
                for up in &ids[d.map_phase] {
                    upstream[k].insert(hash16(&[fp, up]), (d.map_phase, up.clone()));
                }
            }
            _ => {
                for up in &ids[k - 1] {
                    let down = hash16(&[fp, up]);
                    upstream[k].insert(down.clone(), (k - 1, up.clone()));
                    downstream[k - 1].insert(up.clone(), down);
                }
            }
        }
    }
    let seed = u64::from_str_radix(&hash16(&[&worker_id])[..16], 16).unwrap_or(0);
    let order = ids
        .iter()
        .map(|v| {
            use rand::{SeedableRng, seq::SliceRandom};
            let mut o: Vec<usize> = (0..v.len()).collect();
            o.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
            o
        })
        .collect();
    let mut view = View {
        ids,
        order,
        names,
        upstream,
        barrier,
        downstream,
        terminal: HashSet::new(),
        seen_leased: HashSet::new(),
        busy_until: HashMap::new(),
        speculated_ms: None,
        spec_seen: HashMap::new(),
        backed_up: HashSet::new(),
        budget_spent: HashSet::new(),
        median_ms: HashMap::new(),
        peak_inflight: 0,
        shards: job
            .manifest
            .phases
            .iter()
            .map(|p| {
                (p.shard_digits > 0).then(|| shards::ShardCursor::new(p.shard_digits as usize))
            })
            .chain([None])
            .collect(),
    };
    let offset = seed as usize;
    let mut report = WorkerReport {
        worker_id: worker_id.clone(),
        ..Default::default()
    };
    let poll = Duration::from_millis(job.spec.job.poll_millis);
    let mut attempts = 0u64;
    let mut last_stats = Instant::now();
    let mut need_refresh = true;
    // Rounds in a row that found nothing to do (see `idle_wait`), reset by a task
    // claimed or a phase done; and the phases seen done at the last idle round.
    let mut idle_rounds = 0u32;
    let mut phases_done = 0usize;
    let mut merged_generation = 0u64;
    // The process's ended tasks merged into the view so far (a count), and the
    // counter an idle slot waits on for more.
    let mut ended_seen = 0u64;
    let mut wake = opts.listings.as_ref().map(|s| s.wake());
    let mut idle_until: Option<tokio::time::Instant> = None;
    // A task this slot ended: terminal in its view, told to the other slots, and what
    // they ended meanwhile taken too (this slot's own end is then not news that wakes
    // it). False when the view missed ends that left the log: list the job.
    let tell_ended = |key: &(usize, String), view: &mut View, seen: &mut u64| -> bool {
        view.terminal.insert(key.clone());
        match &opts.listings {
            Some(s) => {
                s.ended(key.clone());
                s.merge_ended(&mut view.terminal, seen)
            }
            None => true,
        }
    };
    let mut consecutive_lost = 0u32;
    // A storage request's result; on an outage, wait and start the round again.
    macro_rules! or_back_off {
        ($r:expr) => {
            match $r {
                Ok(v) => {
                    outage.over();
                    v
                }
                Err(e) => {
                    outage.back_off(e.into()).await?;
                    need_refresh = true;
                    continue;
                }
            }
        };
    }
    loop {
        if ctx.shutdown.load(Ordering::Relaxed)
            || opts.drain.load(Ordering::Relaxed)
            || (attempts > 0 && opts.drain_after_task.load(Ordering::Relaxed))
            || opts.max_tasks.is_some_and(|m| attempts >= m)
        {
            break;
        }
        // What the process's other slots ended: terminal whatever a listing says.
        // (Merged before listing, so an end during the listing is merged next time.)
        if let Some(s) = &opts.listings
            && !s.merge_ended(&mut view.terminal, &mut ended_seen)
        {
            need_refresh = true;
        }
        if need_refresh {
            or_back_off!(
                refresh(
                    &store,
                    &ctx,
                    &mut view,
                    &retry,
                    opts.listings.as_deref(),
                    &mut merged_generation,
                    poll / 2,
                )
                .await
            );
            need_refresh = false;
            consecutive_lost = 0;
        }
        if view.all_terminal() {
            report.job_complete = true;
            break;
        }
        if opts.exit_when_class_done && class_done(&ctx, &view, opts.gpu, opts.cpu_work) {
            report.class_done = true;
            break;
        }
        // Sharded phases: be in a shard with something to claim (shards.rs).
        for p in (0..view.names.len()).rev() {
            if view.shards[p].is_some() && may_take(&ctx, p, opts.gpu, opts.cpu_work) {
                or_back_off!(shards::settle(&ctx, &store, &mut view, p, seed).await);
            }
        }
        let Some((p, task, fresh)) = pick(&ctx, &view, opts.gpu, opts.cpu_work) else {
            // Nothing to claim: a straggler of another worker may deserve a backup.
            if let Some((p, task, held, slot)) = or_back_off!(
                speculate(
                    &ctx,
                    &mut view,
                    &store,
                    &lease,
                    opts.gpu,
                    opts.cpu_work,
                    offset
                )
                .await
            ) {
                attempts += 1;
                idle_rounds = 0;
                idle_until = None;
                report.backups += 1;
                let key = (p, task.clone());
                match task::run(&ctx, p, &task, held, slot, true).await {
                    Ok(task::Outcome::Committed) => {
                        report.committed += 1;
                        report.backups_won += 1;
                        need_refresh |= !tell_ended(&key, &mut view, &mut ended_seen);
                        if let Err(e) =
                            shards::after_task(&ctx, &store, &mut view, p, &task, None).await
                        {
                            tracing::warn!(task = %task, error = %e, "could not list the task's shard after it");
                        }
                    }
                    Ok(task::Outcome::AlreadyCommitted) => {
                        need_refresh |= !tell_ended(&key, &mut view, &mut ended_seen);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(task = %task, error = %e, "backup attempt ended with a storage error")
                    }
                }
                continue;
            }
            // A phase done since the last idle round may have opened a barrier: look
            // again soon, as every idle worker of the fleet does.
            let done = (0..view.names.len())
                .filter(|&q| view.phase_done(q))
                .count();
            if done != phases_done {
                phases_done = done;
                idle_rounds = 0;
            }
            // An idle round's end: kept across wake-ups, so in-process ends that keep
            // waking this slot never put off its listing of what other processes did.
            let until = *idle_until.get_or_insert_with(|| {
                let wait = idle_wait(poll, idle_rounds, view.peak_inflight);
                let wait = wait
                    + Duration::from_millis(ctx.entropy.below(wait.as_millis() as u64 / 2 + 1));
                tokio::time::Instant::now() + wait
            });
            // In slices: a shutdown or spot notice must not wait out a long idle round.
            let leaving = || {
                ctx.shutdown.load(Ordering::Relaxed)
                    || opts.drain.load(Ordering::Relaxed)
                    || (attempts > 0 && opts.drain_after_task.load(Ordering::Relaxed))
            };
            let poll = ctx.flag_poll(Duration::from_millis(500));
            let mut woken = false;
            while tokio::time::Instant::now() < until && !leaving() && !woken {
                let slice = until.min(tokio::time::Instant::now() + poll);
                match wake.as_mut() {
                    // Another slot of this process ended a task this one has not
                    // merged: look again at once, at the view (no request).
                    Some(rx) => {
                        let seen = ended_seen;
                        tokio::select! {
                            _ = tokio::time::sleep_until(slice) => {}
                            r = rx.wait_for(|&n| n > seen) => woken = r.is_ok(),
                        }
                    }
                    None => tokio::time::sleep_until(slice).await,
                }
            }
            if woken {
                // Merged at the top of the loop; the round's listing and its backoff
                // stay as they were (other processes' work is seen by listing).
                continue;
            }
            idle_until = None;
            idle_rounds += 1;
            need_refresh = true;
            continue;
        };
        let key = (p, task.clone());
        let phase_name = view.names[p].clone();
        // A near-dedup label step after converged labels would only skip: commit it
        // and the stage's remaining steps at once instead of leasing them one by one.
        if task::is_label_step(&ctx, p) {
            // Its map phase's ids, if that phase is sharded.
            or_back_off!(ctx.ensure_ids(&store, p).await);
            let all_ids = ctx.all_ids();
            let sc = crate::dedup::shuffle::ShuffleCtx {
                job: &ctx.job,
                retry: &ctx.retry,
                reg: &ctx.coord,
                store: &store,
                commits: &ctx.commits,
                task_ids: &all_ids,
            };
            if let Ok(true) = crate::dedup::propagate::converged_before(&sc, p).await {
                let settled = task::commit_converged(&ctx, p, p, Some(&task)).await;
                let picked = settled.iter().any(|(q, t)| *q == p && *t == task);
                for k in &settled {
                    need_refresh |= !tell_ended(k, &mut view, &mut ended_seen);
                }
                // Not settled (the store failing): lease and skip it the usual way,
                // which waits out an outage, rather than trying again at once.
                if picked {
                    continue;
                }
            }
        }
        // A task seen leased may have been committed since our last listing; taking
        // over its expired lease would redo it for nothing. One HEAD settles it.
        if !fresh && or_back_off!(is_committed(&ctx, &store, &phase_name, &task).await) {
            view.terminal.insert(key);
            continue;
        }
        // Lease cap: hold a slot first.
        let slot = match job.spec.job.lease_caps.get(&phase_name) {
            None => None,
            Some(&cap) => {
                match or_back_off!(acquire_slot(&lease, &ctx, &phase_name, cap, offset).await) {
                    Some(s) => Some(s),
                    None => {
                        view.busy_until
                            .insert(key, ctx.clock.now_ms() + poll.as_millis() as u64);
                        continue;
                    }
                }
            }
        };
        let claim = lease
            .claim(&job.paths.lease_dir(&phase_name, &task), fresh)
            .await;
        if claim.is_err()
            && let Some(s) = &slot
        {
            let _ = lease.release(s, None).await;
        }
        let held = match or_back_off!(claim) {
            Claim::Acquired(h) => {
                idle_rounds = 0;
                idle_until = None;
                h
            }
            Claim::Busy { until_ms } => {
                if let Some(s) = &slot {
                    let _ = lease.release(s, None).await;
                }
                report.claims_lost += 1;
                consecutive_lost += 1;
                shards::lost_claim(&mut view, p);
                view.seen_leased.insert(key.clone());
                view.busy_until.insert(
                    key,
                    until_ms.max(ctx.clock.now_ms() + poll.as_millis() as u64),
                );
                if consecutive_lost >= 3 {
                    need_refresh = true;
                }
                continue;
            }
        };
        consecutive_lost = 0;
        attempts += 1;
        let started_ms = ctx.clock.now_ms();
        let outcome = task::run(&ctx, p, &task, held, slot, false).await;
        let took_ms = ctx.clock.now_ms().saturating_sub(started_ms);
        // A sharded phase's shard has moved on meanwhile: list it again before picking.
        for c in view.shards.iter_mut().flatten() {
            c.stale = true;
        }
        let ended = matches!(
            outcome,
            Ok(task::Outcome::Committed | task::Outcome::Failed | task::Outcome::AlreadyCommitted)
        );
        if ended {
            need_refresh |= !tell_ended(&key, &mut view, &mut ended_seen);
            if let Err(e) =
                shards::after_task(&ctx, &store, &mut view, p, &task, Some(took_ms)).await
            {
                tracing::warn!(task = %task, error = %e, "could not list the task's shard after it");
            }
        }
        // (A task that ended is terminal in the view already, above.)
        match outcome {
            Ok(task::Outcome::Committed) => report.committed += 1,
            Ok(task::Outcome::Failed) => report.failed += 1,
            Ok(task::Outcome::AlreadyCommitted) => {}
            Ok(task::Outcome::Released) => {
                report.released += 1;
                view.busy_until
                    .insert(key, ctx.clock.now_ms() + poll.as_millis() as u64);
            }
            Ok(task::Outcome::Fenced) => {
                report.fenced += 1;
                view.busy_until
                    .insert(key, ctx.clock.now_ms() + ctx.ttl_ms());
            }
            Err(e) => {
                tracing::warn!(task = %task, error = %e, "task attempt ended with a storage error");
                view.busy_until
                    .insert(key, ctx.clock.now_ms() + poll.as_millis() as u64);
            }
        }
        if last_stats.elapsed() > Duration::from_secs(30) {
            write_stats(&ctx, &report, &counts).await;
            last_stats = Instant::now();
        }
    }
    write_stats(&ctx, &report, &counts).await;
    tracing::info!(
        worker = %worker_id,
        committed = report.committed,
        failed = report.failed,
        job_complete = report.job_complete,
        "worker stopped"
    );
    Ok(report)
}

/// Lists the commits and leases of the phases not yet done into `view`, or merges the
/// view another slot of this process published less than `max_age` ago (once per
/// publication: `merged` is the last generation merged).
async fn refresh(
    store: &Arc<dyn object_store::ObjectStore>,
    ctx: &WorkerCtx,
    view: &mut View,
    retry: &Retry,
    shared: Option<&slots::SharedListings>,
    merged: &mut u64,
    max_age: Duration,
) -> Result<(), ProtoError> {
    if let Some(l) = shared.and_then(|s| s.recent(max_age)) {
        if l.generation != *merged {
            view.terminal.extend(l.terminal.iter().cloned());
            view.seen_leased.extend(l.leased.iter().cloned());
            let inflight = l
                .leased
                .iter()
                .filter(|k| !view.terminal.contains(*k))
                .count();
            view.peak_inflight = view.peak_inflight.max(inflight);
            *merged = l.generation;
        }
        return Ok(());
    }
    list_into(store, ctx, view, retry).await?;
    if let Some(s) = shared {
        s.publish(view.terminal.clone(), view.seen_leased.clone());
    }
    Ok(())
}

async fn list_into(
    store: &Arc<dyn object_store::ObjectStore>,
    ctx: &WorkerCtx,
    view: &mut View,
    retry: &Retry,
) -> Result<(), ProtoError> {
    let paths = &ctx.job.paths;
    let mut inflight = 0usize;
    for p in 0..view.names.len() {
        if view.phase_done(p) {
            continue;
        }
        if view.shards[p].is_some() {
            shards::list_done(ctx, store, view, p).await?;
            shards::list_current(ctx, store, view, p, true).await?;
            continue;
        }
        let name = &view.names[p];
        for m in list_all(store.as_ref(), &paths.commits(name), retry).await? {
            if let Some(t) = task_of(&m.location) {
                view.terminal.insert((p, t));
            }
        }
        if view.phase_done(p) {
            continue;
        }
        for t in list_dirs(store.as_ref(), &paths.leases(name), retry).await? {
            let key = (p, t);
            inflight += usize::from(!view.terminal.contains(&key));
            view.seen_leased.insert(key);
        }
    }
    view.peak_inflight = view.peak_inflight.max(inflight);
    Ok(())
}

/// The fleet-wide rate of listings by idle workers that `idle_wait` aims at.
pub const IDLE_REFRESHES_PER_SEC: f64 = 50.0;
/// The longest an idle worker waits between two looks at the job.
pub const MAX_IDLE_WAIT: Duration = Duration::from_secs(30);

/// How long a worker that found nothing to do `rounds` times in a row waits before
/// listing the job again: `poll` at first, doubling each round up to a cap that grows
/// with the fleet (`fleet`: the most tasks seen in flight at once), so that the idle
/// workers of a fleet together list about [`IDLE_REFRESHES_PER_SEC`] times a second
/// (at most [`MAX_IDLE_WAIT`] apart). A phase's tail or barrier otherwise has every idle
/// worker listing every phase every `poll`: 10,000 workers at 500 ms are 20,000 listings
/// a second against one prefix (docs/SCALE.md). A small fleet polls as before: its cap
/// is `poll`. Whoever of many workers looks first still sees new work within about
/// `cap / idle workers`.
pub fn idle_wait(poll: Duration, rounds: u32, fleet: usize) -> Duration {
    let cap = Duration::from_secs_f64(fleet as f64 / IDLE_REFRESHES_PER_SEC)
        .min(MAX_IDLE_WAIT)
        .max(poll);
    poll.saturating_mul(1 << rounds.min(16)).min(cap)
}

/// The next task to try. A CPU worker takes CPU phases only; a GPU worker takes GPU
/// phases, and CPU phases (finalize included) only with `cpu_work` and when no GPU
/// task is ready. Within that: deepest phase first (drains pipelines), tasks in the
/// worker's own random order (spreads workers over the task list), never-leased first.
fn pick(ctx: &WorkerCtx, view: &View, gpu: bool, cpu_work: bool) -> Option<(usize, String, bool)> {
    let nphases = view.names.len() - 1;
    let is_gpu = |p: usize| p < nphases && ctx.job.manifest.phases[p].gpu;
    if !gpu {
        return pick_among(ctx, view, &|p| !is_gpu(p));
    }
    pick_among(ctx, view, &is_gpu).or_else(|| {
        cpu_work
            .then(|| pick_among(ctx, view, &|p| !is_gpu(p)))
            .flatten()
    })
}

/// Whether every phase a worker of this class may take is terminal: no task it could
/// run can appear again (a terminal phase never reopens).
fn class_done(ctx: &WorkerCtx, view: &View, gpu: bool, cpu_work: bool) -> bool {
    (0..view.names.len()).all(|p| !may_take(ctx, p, gpu, cpu_work) || view.phase_done(p))
}

/// Whether a worker of this class may take phase `p`'s tasks (the finalize phase,
/// index `phases.len()`, is a CPU phase).
fn may_take(ctx: &WorkerCtx, p: usize, gpu: bool, cpu_work: bool) -> bool {
    let is_gpu = ctx.job.manifest.phases.get(p).is_some_and(|ph| ph.gpu);
    if gpu { is_gpu || cpu_work } else { !is_gpu }
}

/// Whether `task` of `phase` has a commit record (one HEAD): a listing may be older.
async fn is_committed(
    ctx: &WorkerCtx,
    store: &Arc<dyn object_store::ObjectStore>,
    phase: &str,
    task: &str,
) -> Result<bool, ProtoError> {
    use object_store::ObjectStoreExt;
    let path = ctx.job.paths.commit(phase, task);
    match ctx.retry.run(|| store.head(&path)).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(ProtoError::store(&path, e)),
    }
}

fn pick_among(
    ctx: &WorkerCtx,
    view: &View,
    allowed: &dyn Fn(usize) -> bool,
) -> Option<(usize, String, bool)> {
    let now = ctx.clock.now_ms();
    let nphases = view.names.len() - 1;
    let max_unconsumed = ctx.job.spec.job.max_unconsumed_tasks;
    for fresh_pass in [true, false] {
        for p in (0..view.names.len()).rev() {
            if !allowed(p) {
                continue;
            }
            if p == nphases && (0..nphases).any(|q| !view.phase_done(q)) {
                continue;
            }
            if view.barrier[p].is_some_and(|b| !view.phase_done(b)) {
                continue;
            }
            if let Some(m) = max_unconsumed
                && p + 1 < nphases
            {
                let unconsumed = view.ids[p]
                    .iter()
                    .filter(|t| {
                        view.terminal.contains(&(p, (*t).clone()))
                            && view.downstream[p]
                                .get(*t)
                                .is_some_and(|d| !view.terminal.contains(&(p + 1, d.clone())))
                    })
                    .count() as u64;
                if unconsumed >= m {
                    continue;
                }
            }
            let ids = &view.ids[p];
            for &i in &view.order[p] {
                let t = &ids[i];
                let key = (p, t.clone());
                if view.terminal.contains(&key)
                    || view.busy_until.get(&key).is_some_and(|&u| u > now)
                {
                    continue;
                }
                if view.seen_leased.contains(&key) == fresh_pass {
                    continue;
                }
                if p > 0 && p < nphases && !view.upstream[p].is_empty() {
                    match view.upstream[p].get(t) {
                        Some(up) if view.upstream_ready(up) => {}
                        _ => continue,
                    }
                }
                return Some((p, t.clone(), fresh_pass));
            }
        }
    }
    None
}

/// A backup attempt to run now, if `job.speculation` is set and a straggler qualifies
/// (docs/PROTOCOL.md §4, "Backup attempts"): a task of an unfinished phase this worker
/// may take, at least `quantile` of whose tasks are terminal, held by a live attempt
/// that has run longer than `factor` × the phase's median task (and `min_secs`) on
/// its holder's clock and that this worker saw renewed (a dead holder's task is taken
/// over instead), not committed, with no backup yet and a budget token left. Returns
/// the task with its backup lease (and lease-cap slot) held. Looks at most once per
/// `heartbeat_secs`, and at 8 random candidates per phase each time.
#[allow(clippy::too_many_arguments)]
async fn speculate(
    ctx: &WorkerCtx,
    view: &mut View,
    store: &Arc<dyn object_store::ObjectStore>,
    lease: &LeaseCtx<'_>,
    gpu: bool,
    cpu_work: bool,
    offset: usize,
) -> Result<Option<(usize, String, Held, Option<Held>)>, ProtoError> {
    let Some(spec) = ctx.job.spec.job.speculation.clone() else {
        return Ok(None);
    };
    let now = ctx.clock.now_ms();
    let every = ctx.job.spec.job.heartbeat_secs * 1000;
    if view.speculated_ms.is_some_and(|t| now < t + every) {
        return Ok(None);
    }
    view.speculated_ms = Some(now);
    let paths = &ctx.job.paths;
    let nphases = view.names.len() - 1;
    for p in (0..nphases).rev() {
        if !may_take(ctx, p, gpu, cpu_work)
            || view.phase_done(p)
            || view.budget_spent.contains(&p)
            || view.barrier[p].is_some_and(|b| !view.phase_done(b))
        {
            continue;
        }
        let ids = &view.ids[p];
        let terminal = ids
            .iter()
            .filter(|t| view.terminal.contains(&(p, (*t).clone())))
            .count();
        if terminal < spec.min_terminal(ids.len()) {
            continue;
        }
        let name = view.names[p].clone();
        // The median of up to 32 committed tasks (commit records are immutable).
        let median = match view.median_ms.get(&p) {
            Some(&m) => m,
            None => {
                let mut durations = Vec::new();
                for &i in &view.order[p] {
                    if durations.len() == 32 {
                        break;
                    }
                    let t = &ids[i];
                    if !view.terminal.contains(&(p, t.clone())) {
                        continue;
                    }
                    let rec: Option<CommitRecord> = crate::protocol::io::get_json(
                        store.as_ref(),
                        &paths.commit(&name, t),
                        &ctx.retry,
                    )
                    .await?;
                    // Real runs only: not skips committed without a lease, not
                    // commits reused from another job.
                    if let Some(r) = rec.filter(|r| {
                        r.status == crate::protocol::records::TaskStatus::Committed
                            && r.attempt != "converged"
                            && r.reused_from.is_none()
                            && r.finished_ms > r.started_ms
                    }) {
                        durations.push(r.finished_ms - r.started_ms);
                    }
                }
                if durations.len() < 3 {
                    continue;
                }
                durations.sort_unstable();
                let m = durations[durations.len() / 2];
                view.median_ms.insert(p, m);
                m
            }
        };
        let threshold = spec.threshold_ms(median);
        for t in list_dirs(store.as_ref(), &paths.backups(&name), &ctx.retry).await? {
            view.backed_up.insert((p, t));
        }
        let mut candidates: Vec<&String> = ids
            .iter()
            .filter(|t| {
                let key = (p, (*t).clone());
                !view.terminal.contains(&key)
                    && !view.backed_up.contains(&key)
                    && (view.upstream[p].is_empty()
                        || view.upstream[p]
                            .get(*t)
                            .is_some_and(|up| view.upstream_ready(up)))
            })
            .collect();
        // 8 at random: every straggler of a long tail is someone's candidate.
        let n = candidates.len().min(8);
        for i in 0..n {
            let j = i + ctx.entropy.below((candidates.len() - i) as u64) as usize;
            candidates.swap(i, j);
        }
        let candidates: Vec<String> = candidates[..n].iter().map(|t| (*t).clone()).collect();
        let ttl = ctx.ttl_ms();
        for t in candidates {
            let key = (p, t.clone());
            let Some(top) = lease.latest(&paths.lease_dir(&name, &t)).await? else {
                continue;
            };
            let seen = ctx.clock.now_ms();
            let before = view.spec_seen.insert(key.clone(), (top.seq, seen));
            let renewed = before.is_some_and(|(seq, at)| seq != top.seq && seen <= at + ttl);
            let ran = top.since_ms.map(|s| top.written_ms.saturating_sub(s));
            if top.kind != crate::protocol::records::LeaseKind::Lease
                || !renewed
                || ran.is_none_or(|r| r < threshold)
            {
                continue;
            }
            // Committed since this worker's last listing: nothing to back up.
            if is_committed(ctx, store, &name, &t).await? {
                view.terminal.insert(key);
                continue;
            }
            let slot = match ctx.job.spec.job.lease_caps.get(&name) {
                None => None,
                Some(&cap) => match acquire_slot(lease, ctx, &name, cap, offset).await? {
                    Some(s) => Some(s),
                    None => return Ok(None),
                },
            };
            let release_slot = async |slot: &Option<Held>| {
                if let Some(s) = slot {
                    let _ = lease.release(s, None).await;
                }
            };
            let held = match lease.claim(&paths.backup_dir(&name, &t), true).await {
                Ok(Claim::Acquired(h)) => h,
                Ok(Claim::Busy { .. }) => {
                    // Another worker backs it up.
                    view.backed_up.insert(key);
                    release_slot(&slot).await;
                    continue;
                }
                Err(e) => {
                    release_slot(&slot).await;
                    return Err(e);
                }
            };
            view.backed_up.insert(key);
            match take_token(
                ctx,
                store.as_ref(),
                &name,
                &t,
                &held,
                spec.budget(ids.len()),
            )
            .await
            {
                Ok(true) => {
                    tracing::info!(
                        phase = %name,
                        task = %t,
                        ran_secs = ran.unwrap_or(0) as f64 / 1000.0,
                        median_secs = median as f64 / 1000.0,
                        "starting a backup attempt of a straggler"
                    );
                    return Ok(Some((p, t, held, slot)));
                }
                Ok(false) => {
                    view.budget_spent.insert(p);
                    let _ = lease
                        .release(&held, Some(("speculation budget spent".into(), 0)))
                        .await;
                    release_slot(&slot).await;
                    break;
                }
                Err(e) => {
                    let _ = lease.release(&held, None).await;
                    release_slot(&slot).await;
                    return Err(e);
                }
            }
        }
    }
    Ok(None)
}

/// Takes one of a phase's `budget` backup tokens for `task` (create-only, lowest
/// free index first); false when every token is taken.
async fn take_token(
    ctx: &WorkerCtx,
    store: &dyn object_store::ObjectStore,
    phase: &str,
    task: &str,
    held: &Held,
    budget: u32,
) -> Result<bool, ProtoError> {
    let paths = &ctx.job.paths;
    let taken = list_all(store, &paths.speculation(phase), &ctx.retry)
        .await?
        .len() as u32;
    for k in taken..budget {
        let write_id = ctx.entropy.hex_id(8);
        let token = crate::protocol::records::SpeculationToken {
            version: VERSION,
            task: task.to_string(),
            worker: ctx.worker_id.clone(),
            attempt: held.attempt.clone(),
            write_id: write_id.clone(),
            written_ms: ctx.clock.now_ms(),
        };
        let path = paths.speculation_token(phase, k);
        if let crate::protocol::io::Created::Mine =
            crate::protocol::io::create_json(store, &path, &token, &write_id, &ctx.retry).await?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

async fn acquire_slot(
    lease: &LeaseCtx<'_>,
    ctx: &WorkerCtx,
    phase: &str,
    cap: u32,
    offset: usize,
) -> Result<Option<Held>, ProtoError> {
    for i in 0..cap {
        let slot = (i + offset as u32 % cap) % cap;
        if let Claim::Acquired(h) = lease
            .claim(&ctx.job.paths.slot_dir(phase, slot), false)
            .await?
        {
            return Ok(Some(h));
        }
    }
    Ok(None)
}

/// Writes the worker's counters (through an uncounted store: the write is counted
/// by hand first, so the file includes it).
async fn write_stats(ctx: &WorkerCtx, r: &WorkerReport, counts: &RequestCounts) {
    counts.put.fetch_add(1, Ordering::Relaxed);
    let stats = WorkerStats {
        version: VERSION,
        worker: r.worker_id.clone(),
        tasks_committed: r.committed,
        tasks_failed: r.failed,
        claims_lost: r.claims_lost,
        backups: r.backups,
        backups_won: r.backups_won,
        requests: counts.snapshot(),
        updated_ms: ctx.clock.now_ms(),
    };
    if let Ok(s) = ctx.base.open(&ctx.job.uri)
        && let Err(e) = put_json(
            s.as_ref(),
            &ctx.job.paths.worker(&r.worker_id),
            &stats,
            &ctx.retry,
        )
        .await
    {
        tracing::warn!(error = %e, "could not write worker stats");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_waits_grow_to_a_cap_that_grows_with_the_fleet() {
        let poll = Duration::from_millis(500);
        // A small fleet polls every `poll`, however long it idles.
        for rounds in [0, 1, 5, 40] {
            assert_eq!(idle_wait(poll, rounds, 3), poll);
        }
        // 1,000 workers: doubling from `poll` to 1,000 / 50 = 20 s.
        let w: Vec<u64> = (0..8)
            .map(|r| idle_wait(poll, r, 1000).as_millis() as u64)
            .collect();
        assert_eq!(w, [500, 1000, 2000, 4000, 8000, 16000, 20000, 20000]);
        // 10,000 workers: capped at MAX_IDLE_WAIT.
        assert_eq!(idle_wait(poll, 30, 10_000), MAX_IDLE_WAIT);
        // A poll longer than the fleet's cap stays as configured.
        assert_eq!(
            idle_wait(Duration::from_secs(60), 3, 10_000),
            Duration::from_secs(60)
        );
    }
}
