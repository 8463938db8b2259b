//! `mdf bench fleet`: the fleet simulator (docs/SCALE.md). Plans a job of `tasks`
//! tasks with the real `submit` and drains it with `workers` real `worker::run` loops
//! against [`SimStore`] (S3's latency, per-prefix rate limits, LIST pages and prices),
//! on a tokio runtime whose clock is paused: virtual time, so thousands of workers and
//! hours of fleet time run in minutes. Only a task's work is simulated
//! ([`SimulatedWork`]: a sleep and one staged object).
use super::BenchError;
use crate::clock::{Clock, Entropy, TokioClock};
use crate::coordinator::status::{self, JobStatus, Prices};
use crate::coordinator::submit;
use crate::protocol::io::Retry;
use crate::store::sim::{Op, SimConfig, SimCounts, SimStore};
use crate::store::{Registry, install_memory};
use crate::worker::{self, SimulatedWork, WorkerOptions};
use std::sync::Arc;
use std::time::Duration;

/// The simulated fleet and job.
#[derive(Debug, Clone)]
pub struct FleetBench {
    pub workers: usize,
    pub tasks: usize,
    /// Median seconds of a task's work, and the log-normal σ across tasks.
    pub work_secs: f64,
    pub work_sigma: f64,
    /// Bytes of each task's output object.
    pub output_bytes: u64,
    /// Workers start evenly over this many seconds (an Auto Scaling group's launch).
    pub ramp_secs: f64,
    /// Workers killed without notice at random times (each replaced by a new one).
    pub kills: usize,
    /// Extra `job:` settings of the spec, as YAML flow-mapping entries
    /// (`poll_millis: 2000, lease_ttl_secs: 120`).
    pub job: String,
    pub store: SimConfig,
}

/// What the simulation measured. Times are virtual.
pub struct FleetReport {
    pub bench: FleetBench,
    pub status: JobStatus,
    pub prices: Prices,
    /// Every request of the job, by kind.
    pub total: SimCounts,
    pub planning: Duration,
    pub planning_requests: SimCounts,
    /// From planning's end to the last commit of the last records phase.
    pub drain: Duration,
    /// `max(total work / workers + ramp / 2, longest task)`: a fleet without
    /// overhead, its workers starting evenly over the ramp.
    pub ideal: Duration,
    pub finalize: Duration,
    pub finalize_requests: u64,
    /// Until every worker stopped.
    pub end: Duration,
    pub worker_errors: Vec<String>,
    /// Workers killed (a kill drawn after its worker stopped is skipped).
    pub killed: usize,
    /// Data files under the output prefix at the end: each task's one output,
    /// published once.
    pub output_objects: u64,
    /// Records in shard markers that differ from the commit record at their task's
    /// key (or have none): 0 in a sound run.
    pub marker_mismatches: u64,
    pub reports: Vec<worker::WorkerReport>,
    /// Peak resident memory after planning, and over the run, bytes.
    pub rss_planning: Option<u64>,
    pub rss_run: Option<u64>,
    pub rss_before: Option<u64>,
    /// Objects the store holds at the end.
    pub store_objects: u64,
    /// Real seconds the simulation took.
    pub real_secs: f64,
}

/// Runs the simulation on a fresh paused runtime of its own (a thread: the caller may
/// be inside another runtime).
pub fn fleet(b: &FleetBench) -> Result<FleetReport, BenchError> {
    let b = b.clone();
    std::thread::Builder::new()
        .name("mdf-fleet-sim".into())
        .stack_size(64 << 20)
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .map_err(BenchError::step("the simulator's runtime"))?;
            rt.block_on(simulate(b))
        })
        .map_err(BenchError::step("the simulator's thread"))?
        .join()
        .map_err(|_| BenchError::Input("the simulator panicked".into()))?
}

/// Peak (`VmHWM`) or current (`VmRSS`) resident memory of this process, bytes.
fn proc_status(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak resident memory to the current one (Linux).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn simulate(b: FleetBench) -> Result<FleetReport, BenchError> {
    let real = std::time::Instant::now();
    if b.tasks == 0 {
        return Err(BenchError::Input("--tasks must be at least 1".into()));
    }
    let store = SimStore::new(b.store.clone());
    // The same name for the same seed (task ids derive from the input paths, so a
    // run is repeatable), and a new one for each simulation of this process.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("fleet-sim-{}-{run}", b.store.seed);
    install_memory(&name, Arc::new(store.clone()));
    let root = format!("memory://{name}");
    // The inputs, written for free: one tiny JSONL file per task.
    let backing = store.backing();
    for t in 0..b.tasks {
        store
            .seed(
                &object_store::path::Path::from(format!("in/{t:08}.jsonl")),
                "{\"text\": \"x\"}\n".into(),
            )
            .await
            .map_err(BenchError::step("seeding the inputs"))?;
    }
    let spec = super::text_length_job(
        "fleet",
        &format!("{root}/in/*.jsonl"),
        &format!("{root}/out"),
        &b.job,
    )?;
    let reg = Registry::with_wrapper(spec.s3.clone(), None);
    // Virtual epoch milliseconds: any fixed start will do.
    let clock = TokioClock::new(1_800_000_000_000);
    let entropy = Entropy::seeded(b.store.seed);

    let rss_before = proc_status("VmRSS:");
    reset_peak();
    let t0 = tokio::time::Instant::now();
    let before = store.counts();
    let sub = submit::submit(
        &spec,
        &reg,
        &submit::SubmitOptions {
            job_root: root.clone(),
            job_id: Some("fleet".into()),
            reuse: None,
            plan_memory: crate::coordinator::plan::PLAN_MEMORY,
        },
        &clock,
        &entropy,
    )
    .await
    .map_err(BenchError::step("submitting"))?;
    let planning = t0.elapsed();
    let planning_requests = store.counts().since(&before);
    let rss_planning = proc_status("VmHWM:");
    let planned_ms = clock.now_ms();

    let work = SimulatedWork::new(b.work_secs, b.work_sigma, b.output_bytes);
    // Worker `i`'s loop, started after `delay`; a replacement of a killed worker is a
    // new worker (a new instance: new id, nothing carried over).
    let spawn = |i: usize, delay: Duration| {
        let (reg, job_uri, work) = (reg.clone(), sub.job_uri.clone(), work.clone());
        let seed = b.store.seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let o = WorkerOptions {
                job_uri,
                max_tasks: None,
                worker_id: Some(format!("sim-{i:05}")),
                gpu: false,
                cpu_work: false,
                clock: Arc::new(clock),
                entropy: Entropy::seeded(seed),
                shutdown: Default::default(),
                drain: Default::default(),
                drain_after_task: Default::default(),
                exit_when_class_done: false,
                give_up_after: None,
                listings: None,
                simulate: Some(work),
            };
            worker::run(&reg, o).await
        })
    };
    let mut hs: Vec<_> = (0..b.workers)
        .map(|i| {
            spawn(
                i,
                Duration::from_secs_f64(b.ramp_secs * i as f64 / b.workers as f64),
            )
        })
        .collect();
    // Spot interruptions without notice: at random times over the expected drain, a
    // random worker dies mid-task (its leases expire, its staged files stay) and a new
    // one takes its place.
    let kills = if b.workers == 0 { 0 } else { b.kills };
    let mut kills: Vec<(Duration, usize)> = {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(b.store.seed ^ 0x6b696c6c);
        let span = b.ramp_secs + b.work_secs * (b.tasks as f64 / b.workers as f64).max(1.0);
        (0..kills)
            .map(|_| {
                (
                    Duration::from_secs_f64(rng.random::<f64>() * span),
                    rng.random_range(0..b.workers),
                )
            })
            .collect()
    };
    kills.sort();
    let mut killed = 0usize;
    for (at, k) in kills {
        tokio::time::sleep_until(t0 + planning + at).await;
        if hs[k].is_finished() {
            continue;
        }
        hs[k].abort();
        killed += 1;
        let id = b.workers + killed;
        hs.push(spawn(id, Duration::ZERO));
    }
    let mut reports = Vec::new();
    let mut worker_errors = Vec::new();
    for h in hs {
        match h.await {
            Ok(Ok(r)) => reports.push(r),
            Ok(Err(e)) => worker_errors.push(e.to_string()),
            Err(e) if e.is_cancelled() => {}
            Err(e) => worker_errors.push(format!("a simulated worker panicked: {e}")),
        }
    }
    let end = t0.elapsed() - planning;
    let rss_run = proc_status("VmHWM:");
    let total = store.counts();
    let retry = Retry::new(entropy.clone());
    let status = status::status(&reg, &sub.job_uri, &clock, &retry)
        .await
        .map_err(BenchError::step("the job's status"))?;

    // Drain: the last commit of the last records phase; ideal: the work itself.
    let nphases = status.phases.len().saturating_sub(1);
    let last_commit = status
        .spans
        .iter()
        .filter(|s| s.phase + 1 == nphases)
        .map(|s| s.finished_ms)
        .max()
        .unwrap_or(planned_ms);
    let drain = Duration::from_millis(last_commit.saturating_sub(planned_ms));
    let fin = status.spans.iter().find(|s| s.phase == nphases);
    let finalize = fin.map_or(Duration::ZERO, |s| {
        Duration::from_millis(s.finished_ms.saturating_sub(s.started_ms))
    });
    let finalize_requests = status.phases.last().map_or(0, |p| p.requests.total());
    // The planned ids, read as workers read them (a sharded phase from its shards).
    let job = crate::protocol::job::load_job(&reg, &sub.job_uri, &retry)
        .await
        .map_err(BenchError::step("the job"))?;
    let ids = match job.manifest.phases.first() {
        Some(p) => crate::protocol::planned_task_ids(&*backing, &job.paths, p, &retry)
            .await
            .map_err(BenchError::step("the job's task ids"))?,
        None => Vec::new(),
    };
    // Every shard marker holds each task's commit record exactly as its object does
    // (a marker's writer takes its own records from memory, the others' by GET).
    let mut marker_mismatches = 0u64;
    for phase in &job.manifest.phases {
        let k = job.paths.shard_digits(&phase.name);
        if k == 0 {
            continue;
        }
        for prefix in crate::protocol::shard_prefixes(k) {
            let path = job.paths.shard_done(&phase.name, &prefix);
            let marker: Option<crate::protocol::records::ShardDone> =
                crate::protocol::io::get_json(&*backing, &path, &retry)
                    .await
                    .map_err(BenchError::step("a shard marker"))?;
            for r in marker.map(|m| m.records).unwrap_or_default() {
                let path = job.paths.commit(&phase.name, &r.task_id);
                let stored: Option<crate::protocol::records::CommitRecord> =
                    crate::protocol::io::get_json(&*backing, &path, &retry)
                        .await
                        .map_err(BenchError::step("a commit record"))?;
                marker_mismatches += u64::from(stored.as_ref() != Some(&r));
            }
        }
    }
    let works: Vec<f64> = ids.iter().map(|t| work.duration(t).as_secs_f64()).collect();
    let longest = works.iter().cloned().fold(0.0, f64::max);
    // Worker i starts at ramp × i / W: on average a little under half the ramp is
    // lost to each (a lower bound of the drain, as the longest task is).
    let w = b.workers.max(1) as f64;
    let mean_start = b.ramp_secs * (w - 1.0) / (2.0 * w);
    let ideal = Duration::from_secs_f64((works.iter().sum::<f64>() / w + mean_start).max(longest));
    let store_objects = backing.list(None).count().await as u64;
    // Published data files (not the manifest or the owner marker).
    let output_objects = backing
        .list(Some(&object_store::path::Path::from("out")))
        .filter(|m| {
            let data = m
                .as_ref()
                .is_ok_and(|m| m.location.filename().is_some_and(|f| !f.starts_with('_')));
            async move { data }
        })
        .count()
        .await as u64;
    Ok(FleetReport {
        bench: b,
        status,
        prices: Prices::from_env(),
        total,
        planning,
        planning_requests,
        drain,
        ideal,
        finalize,
        finalize_requests,
        marker_mismatches,
        end,
        worker_errors,
        reports,
        rss_planning,
        rss_run,
        rss_before,
        store_objects,
        killed,
        output_objects,
        real_secs: real.elapsed().as_secs_f64(),
    })
}

use futures::StreamExt;

impl FleetReport {
    /// Planning's peak resident memory less what the process held before it and the
    /// bytes planning wrote (the simulated store holds them; S3 would).
    pub fn planner_own(&self) -> Option<u64> {
        Some(
            self.rss_planning?
                .saturating_sub(self.rss_before?)
                .saturating_sub(self.planning_requests.bytes_written),
        )
    }
}

fn mib(b: Option<u64>) -> String {
    b.map_or("n/a".into(), |b| format!("{:.0} MiB", b as f64 / 1048576.0))
}

fn mins(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

impl std::fmt::Display for FleetReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = &self.bench;
        let t = &self.total;
        let n = (b.tasks + 1) as f64;
        writeln!(
            f,
            "mdf bench fleet: {} workers, {} tasks of {:.0} s (σ {}), simulated S3 (partition depth {}, {:.0}/{:.0} writes/reads per s, latency ×{:.2}), virtual time",
            b.workers,
            b.tasks,
            b.work_secs,
            b.work_sigma,
            b.store.prefix_depth,
            b.store.write_rate,
            b.store.read_rate,
            b.store.get_ms / 20.0
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        if b.workers == 0 {
            // --workers 0: planning only.
            let p = &self.planning_requests;
            let by: Vec<String> = Op::ALL
                .iter()
                .filter(|op| p.get(**op) > 0)
                .map(|op| format!("{} {}", op.name(), p.get(*op)))
                .collect();
            writeln!(
                f,
                "| planning (submit) of {} input files | {} virtual, {} requests ({}), ${:.3} |",
                b.tasks,
                mins(self.planning),
                p.total(),
                by.join(", "),
                self.prices.cost(&p.snapshot())
            )?;
            writeln!(
                f,
                "| memory | before {}, planning peak {}; the planner's own {} (less the bytes it wrote into the simulated store) |",
                mib(self.rss_before),
                mib(self.rss_planning),
                mib(self.planner_own())
            )?;
            return writeln!(f, "| simulation | {:.1} s real |", self.real_secs);
        }
        writeln!(
            f,
            "| job | {} ({} of {} tasks committed, {} failed) |",
            if self.status.succeeded {
                "succeeded"
            } else {
                "DID NOT SUCCEED"
            },
            self.status.tasks_committed,
            self.status.tasks_total,
            self.status.failed_tasks.len()
        )?;
        writeln!(
            f,
            "| requests per task, amortised | {:.2} ({} in all) |",
            t.total() as f64 / n,
            t.total()
        )?;
        let by: Vec<String> = Op::ALL
            .iter()
            .map(|op| format!("{} {:.2}", op.name(), t.get(*op) as f64 / n))
            .collect();
        writeln!(f, "| per task by kind | {} |", by.join(", "))?;
        let mut areas: Vec<(&(Op, &str), &u64)> = t.by_area.iter().collect();
        areas.sort_by(|a, b| b.1.cmp(a.1).then(a.0.1.cmp(b.0.1)));
        let areas: Vec<String> = areas
            .iter()
            .filter(|(_, v)| **v as f64 / n >= 0.005)
            .map(|((op, a), v)| format!("{} {a} {:.2}", op.name(), **v as f64 / n))
            .collect();
        writeln!(f, "| per task by area | {} |", areas.join(", "))?;
        let cost = self.prices.cost(&t.snapshot());
        writeln!(
            f,
            "| request cost | ${cost:.2} (${:.2} per 1,000 tasks) |",
            cost / n * 1000.0
        )?;
        let thr: Vec<String> = Op::ALL
            .iter()
            .filter_map(|op| {
                let v = t.throttled.get(op).copied().unwrap_or(0);
                (v > 0).then(|| format!("{} {v}", op.name()))
            })
            .collect();
        writeln!(
            f,
            "| throttled (503 SlowDown) | {}{} |",
            t.throttled_total(),
            if thr.is_empty() {
                String::new()
            } else {
                format!(
                    " ({}; hottest prefix {})",
                    thr.join(", "),
                    t.hottest
                        .as_ref()
                        .map_or("-".into(), |(p, n)| format!("{p}: {n}"))
                )
            }
        )?;
        let released: u64 = self.reports.iter().map(|r| r.released).sum();
        let lost: u64 = self.reports.iter().map(|r| r.claims_lost).sum();
        writeln!(
            f,
            "| surfaced as failures | {} failed tasks, {} released attempts, {} worker errors{} |",
            self.status.failed_tasks.len(),
            released,
            self.worker_errors.len(),
            self.worker_errors
                .first()
                .map_or(String::new(), |e| format!(" (first: {e})"))
        )?;
        writeln!(f, "| claims lost to another worker | {lost} |")?;
        writeln!(
            f,
            "| workers killed mid-run (replaced) | {}; output files {} for {} tasks; shard-marker records unlike their commit record {} |",
            self.killed, self.output_objects, b.tasks, self.marker_mismatches
        )?;
        writeln!(
            f,
            "| planning (submit) | {} virtual, {} requests |",
            mins(self.planning),
            self.planning_requests.total()
        )?;
        writeln!(
            f,
            "| drain (to the last commit) | {} virtual; ideal {} ({:+.1} %) |",
            mins(self.drain),
            mins(self.ideal),
            (self.drain.as_secs_f64() / self.ideal.as_secs_f64().max(1e-9) - 1.0) * 100.0
        )?;
        writeln!(
            f,
            "| finalize | {} virtual, {} requests |",
            mins(self.finalize),
            self.finalize_requests
        )?;
        writeln!(
            f,
            "| until every worker stopped | {} virtual |",
            mins(self.end)
        )?;
        // The run's growth over planning, spread over the workers: an upper bound of
        // one worker's state, as it includes the store's growth (leases, commits).
        let per_worker = match (self.rss_run, self.rss_planning) {
            (Some(r), Some(p)) => Some(r.saturating_sub(p) / b.workers as u64),
            _ => None,
        };
        writeln!(
            f,
            "| memory | before {}, planning peak {} (the planner's own {}), run peak {} ({} objects in the store); per worker ≤ {} |",
            mib(self.rss_before),
            mib(self.rss_planning),
            mib(self.planner_own()),
            mib(self.rss_run),
            self.store_objects,
            per_worker.map_or("n/a".into(), |b| format!("{:.1} KiB", b as f64 / 1024.0))
        )?;
        writeln!(f, "| simulation | {:.1} s real |", self.real_secs)
    }
}
