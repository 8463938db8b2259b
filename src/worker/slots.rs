//! How many tasks one worker process runs at once, and running them: one worker loop
//! (leases, heartbeats, its own id) per slot, sharing the process's async runtime,
//! stores and kernel thread pool (docs/OPERATIONS.md, "Sizing workers").
//!
//! A task's pipeline is three threads (reader, stages, writer) and its stages' kernels
//! split each batch over the process's kernel pool (one thread per core). The reader
//! (inflate, WARC parsing, charset detection) is serial: about a fifth of a text
//! task's CPU, so one task alone cannot keep a large machine busy, and a task's serial
//! stretches (between batches, its reader, its stages' own code) leave cores another
//! task fills. Slots = cores ÷ max(1, the heaviest stage's `resources.cpu`) (see
//! [`TASK_CORES`]), and the shared kernel pool (not a pool per slot) keeps the
//! CPU-bound kernel threads at the core count however many slots are busy.
use super::{WorkerError, WorkerOptions, WorkerReport, run};
use crate::store::Registry;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one slot knew of the job after listing it: the tasks it saw terminal and
/// leased (its whole view, not only the phases it listed this time).
#[derive(Debug)]
pub struct Listing {
    pub at: Instant,
    pub generation: u64,
    pub terminal: HashSet<(usize, String)>,
    pub leased: HashSet<(usize, String)>,
}

/// The job's listings, shared by the task slots of one process: a slot about to list
/// the job's commits and leases takes another slot's view instead when that is younger
/// than half the poll interval, so a process with 32 idle slots lists at about one
/// worker's rate, not 32 times it (at 1,000 instances that is the difference between
/// S3's per-prefix limit and a SlowDown storm). A view a little older is what a
/// lagging LIST gives, which the protocol already tolerates: every claim and commit
/// checks by key.
///
/// The slots also tell each other of the tasks they end: a slot that commits (or fails
/// for good) a task appends it to a log and bumps a counter, and an idle slot waiting
/// out its poll interval wakes at once, takes the new terminal tasks into its view and
/// picks again from that view, without a request. A barrier one slot crosses is
/// crossed for every slot of the process at the same moment, not a poll interval
/// later; what other processes do is still seen by listing, as before
/// (docs/OPERATIONS.md, "Sizing workers").
#[derive(Debug)]
pub struct SharedListings {
    last: Mutex<Option<Arc<Listing>>>,
    ended: Mutex<EndedLog>,
    wake: tokio::sync::watch::Sender<u64>,
}

/// The last [`ENDED_KEPT`] tasks the process's slots ended; `base` is the number of
/// older ones dropped.
#[derive(Debug, Default)]
struct EndedLog {
    base: u64,
    tasks: std::collections::VecDeque<(usize, String)>,
}

/// Ended tasks the log keeps: a slot further behind than this lists the job instead.
pub const ENDED_KEPT: usize = 4096;

impl Default for SharedListings {
    fn default() -> Self {
        SharedListings {
            last: Mutex::new(None),
            ended: Mutex::new(EndedLog::default()),
            wake: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl SharedListings {
    /// A slot ended `task` (committed, failed for good, or found committed): the
    /// other slots see it terminal when they next merge, and the idle ones wake.
    pub fn ended(&self, task: (usize, String)) {
        let n = {
            let mut e = self.ended.lock().expect("ended tasks");
            e.tasks.push_back(task);
            if e.tasks.len() > ENDED_KEPT {
                e.tasks.pop_front();
                e.base += 1;
            }
            e.base + e.tasks.len() as u64
        };
        self.wake.send_replace(n);
    }

    /// Adds the tasks ended since `*seen` (a count of ended tasks) to `terminal` and
    /// moves `*seen` to the latest. False when some of them have left the log: the
    /// caller's view misses them and it must list the job.
    #[must_use]
    pub fn merge_ended(&self, terminal: &mut HashSet<(usize, String)>, seen: &mut u64) -> bool {
        let e = self.ended.lock().expect("ended tasks");
        let end = e.base + e.tasks.len() as u64;
        let complete = *seen >= e.base;
        let from = (*seen).max(e.base);
        if from < end {
            terminal.extend(e.tasks.range((from - e.base) as usize..).cloned());
        }
        *seen = end;
        complete
    }

    /// The count of ended tasks, watched: an idle slot waits for it to pass what it
    /// merged.
    pub fn wake(&self) -> tokio::sync::watch::Receiver<u64> {
        self.wake.subscribe()
    }

    /// The latest listing if it is at most `max_age` old.
    pub fn recent(&self, max_age: Duration) -> Option<Arc<Listing>> {
        self.last
            .lock()
            .expect("shared listings")
            .clone()
            .filter(|l| l.at.elapsed() <= max_age)
    }

    /// Publishes a slot's view after it listed the job.
    pub fn publish(&self, terminal: HashSet<(usize, String)>, leased: HashSet<(usize, String)>) {
        let mut last = self.last.lock().expect("shared listings");
        let generation = last.as_ref().map_or(1, |l| l.generation + 1);
        *last = Some(Arc::new(Listing {
            at: Instant::now(),
            generation,
            terminal,
            leased,
        }));
    }
}

/// The cores this process may use: the standard library's count honours the CPU
/// affinity mask (`taskset`, cpusets) and cgroup v1/v2 CPU quotas (a container's
/// `--cpus 2.5` gives 2), and is at least 1.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The cores a task slot counts for: one. A running task keeps more than one core busy
/// at times (its reader and writer threads and its share of the kernel pool), but
/// between batches and in its serial stretches it leaves cores idle that another
/// task's reader or kernels fill. Measured on 2 cores (docs/PERFORMANCE.md, issue
/// 32): two tasks at once against one, held-out text 0.94 of the wall time and images
/// 0.96, at 1–3 % more CPU. (Two tasks cost 15 % for text while most spans ran spaCy's
/// patterns, through a cache each kernel thread filled anew, and while a slot waited
/// out its poll interval at every barrier another slot crossed; now the patterns run
/// only for spans with non-ASCII ends and the slots wake each other.)
pub const TASK_CORES: f64 = 1.0;

/// Task slots on `cores` for a job whose heaviest stage asks `max_stage_cpu` cores
/// (`resources.cpu`): a task counts as the larger of that and [`TASK_CORES`]; as many
/// tasks as fit, at least one.
pub fn task_slots(cores: usize, max_stage_cpu: f64) -> usize {
    let per = if max_stage_cpu.is_finite() {
        max_stage_cpu.max(TASK_CORES)
    } else {
        TASK_CORES
    };
    ((cores as f64 / per).floor() as usize).max(1)
}

/// Runs `slots` worker loops, the `k`-th with the options `make(k)` builds, each on
/// the runtime's threads (not polled together on the caller's), and merges their
/// reports (counts summed; the job is complete if any loop saw it so). A loop that
/// stops with an error sets the shared shutdown flag, so the others hand their leases
/// back and stop; the first error is returned once all have.
pub async fn run_slots(
    reg: &Registry,
    slots: usize,
    make: impl Fn(usize) -> WorkerOptions,
) -> Result<WorkerReport, WorkerError> {
    crate::ops::size_image_decode_cache(slots);
    if slots <= 1 {
        return run(reg, make(0)).await;
    }
    let mut set = tokio::task::JoinSet::new();
    let mut stop = None;
    let listings = Arc::new(SharedListings::default());
    for k in 0..slots {
        let (reg, mut opts) = (reg.clone(), make(k));
        opts.listings = Some(listings.clone());
        stop.get_or_insert_with(|| opts.shutdown.clone());
        set.spawn(async move { run(&reg, opts).await });
    }
    let stop = stop.expect("at least two slots");
    let mut merged: Option<WorkerReport> = None;
    let mut first_err = None;
    while let Some(joined) = set.join_next().await {
        let r = joined
            .map_err(|e| WorkerError::Plan(format!("a task slot panicked: {e}")))
            .and_then(|r| r);
        match r {
            Ok(r) => {
                let m = merged.get_or_insert_with(|| WorkerReport {
                    worker_id: r.worker_id.clone(),
                    ..Default::default()
                });
                m.committed += r.committed;
                m.failed += r.failed;
                m.released += r.released;
                m.fenced += r.fenced;
                m.claims_lost += r.claims_lost;
                m.backups += r.backups;
                m.backups_won += r.backups_won;
                m.job_complete |= r.job_complete;
                m.class_done |= r.class_done;
            }
            Err(e) => {
                if first_err.is_none() {
                    tracing::error!(error = %e, "a task slot stopped with an error: the others hand their leases back");
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                first_err.get_or_insert(e);
            }
        }
    }
    match (first_err, merged) {
        (Some(e), _) => Err(e),
        (None, Some(m)) => Ok(m),
        (None, None) => unreachable!("at least two slots ran"),
    }
}

/// Memory a task slot is given when a memory limit caps the slots: its batches in
/// flight at the defaults (~80 MiB), the operators' working sets, a dedup map task's
/// key buffer and the Parquet writers' pages (measured peaks: 200–320 MiB for a whole
/// text or image job), and a dedup reduce task's key table, 1 GiB by default
/// (`memory_bytes`, docs/DEDUP.md): every slot may run one at once.
pub const SLOT_MEMORY: u64 = 1 << 30;

/// This process's memory limit, from its cgroup (v2 `memory.max`, v1
/// `memory.limit_in_bytes`); `None` when there is none.
pub fn memory_limit() -> Option<u64> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let v = read("/sys/fs/cgroup/memory.max")
        .or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))?;
    // "max" (v2) or a page-rounded i64::MAX (v1) when unlimited.
    v.trim().parse::<u64>().ok().filter(|&b| b < 1 << 60)
}

/// The slots this process runs for a job whose largest stage asks `max_stage_cpu`
/// cores: [`task_slots`] on [`cores`], capped by the [`memory_limit`]; with why, for
/// the worker's first line.
pub fn default_slots(max_stage_cpu: f64) -> (usize, String) {
    let (c, mem) = (cores(), memory_limit());
    let by_cores = task_slots(c, max_stage_cpu);
    let n = fit_memory(by_cores, mem);
    let mut why = format!(
        "{c} core{}, stages need up to {max_stage_cpu} each",
        if c == 1 { "" } else { "s" }
    );
    if let Some(m) = mem.filter(|_| n < by_cores) {
        why += &format!(", {} MiB memory limit", m >> 20);
    }
    (n, why)
}

/// `slots` capped so that each gets [`SLOT_MEMORY`] of `limit`, at least one.
pub fn fit_memory(slots: usize, limit: Option<u64>) -> usize {
    match limit {
        Some(l) => slots.min((l / SLOT_MEMORY) as usize).max(1),
        None => slots,
    }
}

/// The id of slot `k` of a process whose worker id is `base`: slot 0 keeps it, the
/// others add `-k`.
pub fn slot_id(base: &str, k: usize) -> String {
    if k == 0 {
        base.to_string()
    } else {
        format!("{base}-{k}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_fill_the_cores_at_the_heaviest_stage() {
        // A 64-core spot instance: 64 tasks of one-core stages, 16 of a job with a
        // stage asking 4.
        assert_eq!(task_slots(64, 1.0), 64);
        assert_eq!(task_slots(64, 4.0), 16);
        assert_eq!(task_slots(64, 3.0), 21);
        // A container with `--cpus 2.5` (available_parallelism gives 2), a laptop.
        assert_eq!(task_slots(2, 1.0), 2);
        assert_eq!(task_slots(8, 1.0), 8);
        assert_eq!(task_slots(9, 1.5), 6);
        // Never zero, whatever the stage asks.
        assert_eq!(task_slots(1, 1.0), 1);
        assert_eq!(task_slots(2, 8.0), 1);
        assert_eq!(task_slots(4, 0.0), 4);
        assert_eq!(task_slots(4, f64::NAN), 4);
        assert_eq!(task_slots(4, 0.5), 4);
    }

    #[test]
    fn a_memory_limit_caps_the_slots() {
        // A pod with 8 GiB on a 96-core node: 96 slots by cores, 8 by memory.
        assert_eq!(fit_memory(task_slots(96, 1.0), Some(8 << 30)), 8);
        assert_eq!(fit_memory(4, Some(100 << 20)), 1);
        assert_eq!(fit_memory(4, None), 4);
        assert_eq!(fit_memory(4, Some(64 << 30)), 4);
    }

    #[test]
    fn a_listing_is_shared_while_it_is_young() {
        let sh = SharedListings::default();
        assert!(sh.recent(Duration::from_secs(1)).is_none());
        let t: HashSet<(usize, String)> = [(0, "a".to_string())].into();
        sh.publish(t.clone(), HashSet::new());
        let l = sh.recent(Duration::from_secs(60)).unwrap();
        assert_eq!((l.generation, &l.terminal), (1, &t));
        sh.publish(HashSet::new(), t.clone());
        assert_eq!(sh.recent(Duration::from_secs(60)).unwrap().generation, 2);
        std::thread::sleep(Duration::from_millis(20));
        assert!(sh.recent(Duration::from_millis(10)).is_none());
    }

    /// A task one slot ends is terminal in the other slots' views when they merge,
    /// each once; an idle slot waiting for more than it merged wakes at once; a slot
    /// that fell behind the log is told to list.
    #[tokio::test]
    async fn an_ended_task_wakes_the_other_slots() {
        let sh = Arc::new(SharedListings::default());
        let (mut view, mut seen) = (HashSet::new(), 0u64);
        let waiter = {
            let mut rx = sh.wake();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|&n| n > 0))
                    .await
                    .map(|r| r.map(|n| *n))
            })
        };
        tokio::task::yield_now().await;
        sh.ended((0, "a".into()));
        assert!(
            matches!(waiter.await.unwrap(), Ok(Ok(1))),
            "the idle slot woke"
        );
        assert!(sh.merge_ended(&mut view, &mut seen));
        assert_eq!((view.len(), seen), (1, 1));
        sh.ended((2, "b".into()));
        assert!(sh.merge_ended(&mut view, &mut seen));
        assert!(sh.merge_ended(&mut view, &mut seen));
        assert_eq!(seen, 2);
        assert!(view.contains(&(2, "b".to_string())) && view.contains(&(0, "a".to_string())));
        // Nothing ended since the merge: a wait for more does not end.
        let mut rx = sh.wake();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), rx.wait_for(|&n| n > seen))
                .await
                .is_err()
        );
        // The log keeps the last ENDED_KEPT: a slot further behind must list.
        for i in 0..ENDED_KEPT + 10 {
            sh.ended((1, format!("t{i}")));
        }
        let (mut v2, mut s2) = (HashSet::new(), 2u64);
        assert!(!sh.merge_ended(&mut v2, &mut s2), "fell behind");
        assert_eq!(s2, (ENDED_KEPT + 12) as u64);
        assert_eq!(v2.len(), ENDED_KEPT);
        let mut s3 = s2 - 5;
        assert!(sh.merge_ended(&mut v2, &mut s3));
    }

    #[test]
    fn slot_ids_keep_the_given_id_for_the_first() {
        assert_eq!(slot_id("w-a", 0), "w-a");
        assert_eq!(slot_id("w-a", 3), "w-a-3");
    }
}
