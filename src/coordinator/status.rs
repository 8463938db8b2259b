//! `mdf status`: per phase, tasks total / pending / leased / committed / failed,
//! records in / out / rejected and object-store requests, computed from commit
//! records (never from listings of data) plus the workers' own request counters.
//! The JSON form is stable: fields are only ever added.
use super::{JobError, load_job};
use crate::clock::Clock;
use crate::protocol::io::{Retry, get_all_json, get_json, list_all, list_dirs};
use crate::protocol::lease::LeaseCtx;
use crate::protocol::records::{
    CommitRecord, FINALIZE, FailedTask, LeaseKind, Submission, TaskStats, TaskStatus, WorkerStats,
};
use crate::protocol::task_of;
use crate::store::{Registry, RequestSnapshot};
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Serialize)]
pub struct TaskCounts {
    pub total: u64,
    pub pending: u64,
    pub leased: u64,
    pub committed: u64,
    pub failed: u64,
    /// Committed by a backup attempt of a straggler (`job.speculation`).
    pub by_backup: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseStatus {
    pub name: String,
    pub tasks: TaskCounts,
    pub records_in: u64,
    pub records_out: u64,
    pub rejected: u64,
    pub stats: TaskStats,
    /// Requests made by this phase's committed tasks.
    pub requests: RequestSnapshot,
    /// Sum of the terminal attempts' durations (worker-seconds spent in tasks).
    pub task_seconds: f64,
    /// The requests at the prices in `JobStatus::prices`.
    pub cost_usd: f64,
}

/// Object-store request prices, dollars per 1,000 requests (S3 Standard's published
/// prices by default; `MDF_PRICE_PUT_PER_1K` and `MDF_PRICE_GET_PER_1K` override).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Prices {
    /// PUT, COPY, POST and LIST.
    pub put_per_1k: f64,
    /// GET, HEAD and the rest (DELETE is free).
    pub get_per_1k: f64,
}

impl Prices {
    pub fn from_env() -> Prices {
        let read = |k: &str, d: f64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d)
        };
        Prices {
            put_per_1k: read("MDF_PRICE_PUT_PER_1K", 0.005),
            get_per_1k: read("MDF_PRICE_GET_PER_1K", 0.0004),
        }
    }

    pub fn cost(&self, r: &RequestSnapshot) -> f64 {
        (r.put + r.copy + r.list) as f64 * self.put_per_1k / 1000.0
            + (r.get + r.head) as f64 * self.get_per_1k / 1000.0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct JobStatus {
    pub version: u32,
    pub job: String,
    pub job_id: String,
    pub output: String,
    /// Every task (finalize included) is committed or failed.
    pub complete: bool,
    /// Complete with no failed task.
    pub succeeded: bool,
    pub phases: Vec<PhaseStatus>,
    pub failed_tasks: Vec<FailedTask>,
    /// Requests outside tasks (listing, claims), from the workers' counters.
    pub worker_requests: RequestSnapshot,
    pub requests_total: u64,
    pub tasks_committed: u64,
    pub tasks_total: u64,
    /// All requests (tasks and workers) at `prices`.
    pub cost_usd: f64,
    pub prices: Prices,
    pub task_seconds: f64,
    /// Every terminal attempt's time span, for throughput over time (`mdf report`);
    /// not in the JSON form.
    #[serde(skip)]
    pub spans: Vec<TaskSpan>,
    /// What `mdf submit --backend aws-batch|k8s` asked a backend to run.
    pub submissions: Vec<Submission>,
}

/// When one task ran and how many records it read.
#[derive(Debug, Clone)]
pub struct TaskSpan {
    /// Index into [`JobStatus::phases`].
    pub phase: usize,
    pub started_ms: u64,
    pub finished_ms: u64,
    pub records_in: u64,
}

/// (phase name, task count) of every phase, finalize last.
fn phase_tasks(job: &super::LoadedJob) -> Vec<(String, u64)> {
    let mut names: Vec<(String, u64)> = job
        .manifest
        .phases
        .iter()
        .map(|p| (p.name.clone(), p.tasks))
        .collect();
    names.push((FINALIZE.to_string(), 1));
    names
}

/// A job's status from listings of its commit records: cheap, and conservative on a
/// store whose LIST lags (a commit it leaves out shows as pending, never the reverse).
pub async fn status(
    reg: &Registry,
    job_uri: &str,
    clock: &dyn Clock,
    retry: &Retry,
) -> Result<JobStatus, JobError> {
    status_with(reg, job_uri, clock, retry, false).await
}

/// [`status`] that accounts for every planned task by key: a phase whose listing
/// shows fewer commits than it has tasks has the missing ones read by id (`mdf run`'s
/// verdict once its workers report the job complete).
pub async fn status_by_key(
    reg: &Registry,
    job_uri: &str,
    clock: &dyn Clock,
    retry: &Retry,
) -> Result<JobStatus, JobError> {
    status_with(reg, job_uri, clock, retry, true).await
}

async fn status_with(
    reg: &Registry,
    job_uri: &str,
    clock: &dyn Clock,
    retry: &Retry,
    by_key: bool,
) -> Result<JobStatus, JobError> {
    let job = load_job(reg, job_uri, retry).await?;
    let store = reg.open(&job.uri)?;
    let names = phase_tasks(&job);
    let mut phases = Vec::new();
    let mut failed_tasks = Vec::new();
    let mut spans = Vec::new();
    let prices = Prices::from_env();
    let entropy = crate::clock::Entropy::seeded(0);
    let observed = crate::protocol::lease::Observations::default();
    let ctx = LeaseCtx {
        store: store.as_ref(),
        clock,
        entropy: &entropy,
        worker: "status",
        ttl_ms: 0,
        retry,
        observed: &observed,
    };
    for (name, total) in names {
        let commits = list_all(store.as_ref(), &job.paths.commits(&name), retry).await?;
        let mut locations: Vec<object_store::path::Path> =
            commits.iter().map(|m| m.location.clone()).collect();
        if by_key && (commits.len() as u64) < total {
            let listed: BTreeSet<String> = commits
                .iter()
                .filter_map(|m| task_of(&m.location))
                .collect();
            let ids = if name == FINALIZE {
                vec![job.manifest.finalize_task.clone()]
            } else {
                let plan = job
                    .manifest
                    .phases
                    .iter()
                    .find(|p| p.name == name)
                    .expect("a planned phase");
                crate::protocol::planned_task_ids(store.as_ref(), &job.paths, plan, retry).await?
            };
            locations.extend(
                ids.iter()
                    .filter(|t| !listed.contains(*t))
                    .map(|t| job.paths.commit(&name, t)),
            );
        }
        let records: Vec<CommitRecord> = futures::stream::iter(locations.iter().map(|loc| {
            let store = store.clone();
            let loc = loc.clone();
            async move { get_json::<CommitRecord>(store.as_ref(), &loc, retry).await }
        }))
        .buffer_unordered(32)
        .try_filter_map(|r| async move { Ok(r) })
        .try_collect()
        .await?;
        let done: BTreeSet<String> = records.iter().map(|r| r.task_id.clone()).collect();
        let mut p = PhaseStatus {
            name: name.clone(),
            tasks: TaskCounts {
                total,
                pending: 0,
                leased: 0,
                committed: 0,
                failed: 0,
                by_backup: 0,
            },
            records_in: 0,
            records_out: 0,
            rejected: 0,
            stats: TaskStats::default(),
            requests: RequestSnapshot::default(),
            task_seconds: 0.0,
            cost_usd: 0.0,
        };
        for r in &records {
            match r.status {
                TaskStatus::Committed => {
                    p.tasks.committed += 1;
                    p.tasks.by_backup += u64::from(r.speculative);
                }
                TaskStatus::Failed => {
                    p.tasks.failed += 1;
                    failed_tasks.push(FailedTask {
                        phase: name.clone(),
                        task: r.task_id.clone(),
                        error: r.error.clone().unwrap_or_default(),
                    });
                }
            }
            p.stats.add(&r.stats);
            spans.push(TaskSpan {
                phase: phases.len(),
                started_ms: r.started_ms,
                finished_ms: r.finished_ms,
                records_in: r.stats.records_in,
            });
            p.requests.add(&r.requests);
            p.task_seconds += r.finished_ms.saturating_sub(r.started_ms) as f64 / 1000.0;
        }
        p.cost_usd = prices.cost(&p.requests);
        p.records_in = p.stats.records_in;
        p.records_out = p.stats.records_out;
        p.rejected = p.stats.rejected;
        // A sharded phase's lease folders are one level down, in its shards' folders.
        let mut leased = list_dirs(store.as_ref(), &job.paths.leases(&name), retry).await?;
        if job.paths.shard_digits(&name) > 0 {
            let mut tasks = Vec::new();
            for prefix in leased {
                let shard = job.paths.leases_shard(&name, &prefix);
                tasks.extend(list_dirs(store.as_ref(), &shard, retry).await?);
            }
            leased = tasks;
        }
        for task in leased {
            if done.contains(&task) {
                continue;
            }
            let live = ctx
                .latest(&job.paths.lease_dir(&name, &task))
                .await?
                .is_some_and(|l| l.kind == LeaseKind::Lease && clock.now_ms() < l.expires_at_ms);
            if live {
                p.tasks.leased += 1;
            }
        }
        p.tasks.pending = total.saturating_sub(p.tasks.committed + p.tasks.failed + p.tasks.leased);
        phases.push(p);
    }
    let mut worker_requests = RequestSnapshot::default();
    for w in get_all_json::<WorkerStats>(store.as_ref(), &job.paths.workers(), retry).await? {
        worker_requests.add(&w.requests);
    }
    let mut submissions: Vec<Submission> =
        get_all_json(store.as_ref(), &job.paths.submissions(), retry).await?;
    submissions.sort_by_key(|x| x.submitted_ms);
    let complete = phases
        .iter()
        .all(|p| p.tasks.committed + p.tasks.failed >= p.tasks.total);
    let requests_total =
        worker_requests.total() + phases.iter().map(|p| p.requests.total()).sum::<u64>();
    Ok(JobStatus {
        version: 1,
        job: job.uri.to_uri_string(),
        job_id: job.manifest.job_id.clone(),
        output: job.manifest.output_uri.clone(),
        complete,
        succeeded: complete && failed_tasks.is_empty(),
        tasks_committed: phases.iter().map(|p| p.tasks.committed).sum(),
        tasks_total: phases.iter().map(|p| p.tasks.total).sum(),
        cost_usd: prices.cost(&worker_requests) + phases.iter().map(|p| p.cost_usd).sum::<f64>(),
        prices,
        task_seconds: phases.iter().map(|p| p.task_seconds).sum(),
        phases,
        failed_tasks,
        worker_requests,
        requests_total,
        spans,
        submissions,
    })
}

/// A byte count in B, KiB, MiB or GiB.
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn human_micros(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.1} s", us as f64 / 1e6)
    } else if us >= 1000 {
        format!("{:.1} ms", us as f64 / 1e3)
    } else {
        format!("{us} µs")
    }
}

/// The per-operator table: records in and out, pass rate, rejects, throughput per
/// core of operator time, batch latency quantiles, share of all operator time; the
/// operator with the largest share is named the bottleneck.
pub fn operators(s: &JobStatus) -> String {
    let rows: Vec<(&str, &crate::protocol::records::StageStats)> = s
        .phases
        .iter()
        .flat_map(|p| p.stats.stages.iter().map(move |st| (p.name.as_str(), st)))
        .collect();
    let total: u64 = rows.iter().map(|(_, st)| st.nanos).sum();
    if rows.is_empty() || total == 0 {
        return String::new();
    }
    let mut out = format!(
        "\n{:<20} {:<6} {:>11} {:>11} {:>7} {:>9} {:>10} {:>10} {:>10} {:>7}\n",
        "operator",
        "phase",
        "records in",
        "records out",
        "pass",
        "rejected",
        "records/s",
        "p50 batch",
        "p95 batch",
        "time"
    );
    let slowest = rows
        .iter()
        .max_by_key(|(_, st)| st.nanos)
        .map(|(p, st)| (p.to_string(), st.stage.clone()));
    for (phase, st) in &rows {
        let pass = if st.records_in > 0 {
            format!(
                "{:.1}%",
                100.0 * st.records_out as f64 / st.records_in as f64
            )
        } else {
            "-".into()
        };
        let rate = if st.nanos > 0 {
            format!("{:.0}", st.records_in as f64 / (st.nanos as f64 / 1e9))
        } else {
            "-".into()
        };
        let q = |x: f64| {
            st.batch_quantile_micros(x)
                .map(|u| format!("≤{}", human_micros(u)))
                .unwrap_or_else(|| "-".into())
        };
        let mark = if slowest.as_ref() == Some(&(phase.to_string(), st.stage.clone())) {
            "  ← bottleneck"
        } else {
            ""
        };
        out += &format!(
            "{:<20} {:<6} {:>11} {:>11} {:>7} {:>9} {:>10} {:>10} {:>10} {:>6.1}%{mark}\n",
            st.stage,
            phase,
            st.records_in,
            st.records_out,
            pass,
            st.rejected,
            rate,
            q(0.5),
            q(0.95),
            100.0 * st.nanos as f64 / total as f64
        );
    }
    let by_op: Vec<String> = rows
        .iter()
        .filter(|(_, st)| !st.reasons.is_empty())
        .map(|(_, st)| {
            let r: Vec<String> = st.reasons.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{}: {}", st.stage, r.join(" "))
        })
        .collect();
    if !by_op.is_empty() {
        out += &format!("rejects by operator: {}\n", by_op.join("; "));
    }
    out
}

/// A terminal table of a status.
pub fn render(s: &JobStatus) -> String {
    let mut out = format!(
        "job {}  ({})\noutput {}\n\n{:<9} {:>7} {:>7} {:>7} {:>9} {:>7} {:>12} {:>12} {:>10} {:>9}\n",
        s.job_id,
        if s.succeeded {
            "complete"
        } else if s.complete {
            "complete with failures"
        } else {
            "running"
        },
        s.output,
        "phase",
        "tasks",
        "pending",
        "leased",
        "committed",
        "failed",
        "records in",
        "records out",
        "rejected",
        "requests"
    );
    let row = |name: &str, c: [u64; 9], note: &str| {
        format!(
            "{:<9} {:>7} {:>7} {:>7} {:>9} {:>7} {:>12} {:>12} {:>10} {:>9}{note}\n",
            name, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
        )
    };
    // A run of phases that are done with nothing to do (a near dedup's label steps
    // after its labels converged: up to 2 × max_rounds of them) is one line.
    let idle = |p: &PhaseStatus| {
        p.tasks.total > 0
            && p.tasks.committed == p.tasks.total
            && p.records_in == 0
            && p.records_out == 0
            && p.rejected == 0
            && p.requests.total() == 0
    };
    let mut i = 0;
    while i < s.phases.len() {
        let p = &s.phases[i];
        let run = s.phases[i..].iter().take_while(|q| idle(q)).count();
        if run >= 2 {
            let last = &s.phases[i + run - 1];
            let tasks: u64 = s.phases[i..i + run].iter().map(|q| q.tasks.total).sum();
            out += &row(
                &format!("{}–{}", p.name, last.name),
                [tasks, 0, 0, tasks, 0, 0, 0, 0, 0],
                &format!("  ({run} phases with nothing to do)"),
            );
            i += run;
            continue;
        }
        let t = &p.tasks;
        out += &row(
            &p.name,
            [
                t.total,
                t.pending,
                t.leased,
                t.committed,
                t.failed,
                p.records_in,
                p.records_out,
                p.rejected,
                p.requests.total(),
            ],
            "",
        );
        i += 1;
    }
    let backups: Vec<String> = s
        .phases
        .iter()
        .filter(|p| p.tasks.by_backup > 0)
        .map(|p| format!("{}:{}", p.name, p.tasks.by_backup))
        .collect();
    if !backups.is_empty() {
        out += &format!(
            "tasks committed by backup attempts of stragglers: {}\n",
            backups.join(" ")
        );
    }
    out += &operators(s);
    out += &super::totals::render(s, 10);
    let reasons: Vec<String> = s
        .phases
        .iter()
        .flat_map(|p| {
            p.stats
                .rejects_by_reason
                .iter()
                .map(move |(k, v)| format!("{}:{k}={v}", p.name))
        })
        .collect();
    if !reasons.is_empty() {
        out += &format!("\nrejects by reason: {}\n", reasons.join(", "));
    }
    out += &format!(
        "\nrequests: {} in tasks + {} by workers outside tasks = {} ({:.1} per task)\n",
        s.requests_total - s.worker_requests.total(),
        s.worker_requests.total(),
        s.requests_total,
        s.requests_total as f64 / s.tasks_total.max(1) as f64
    );
    // Phases done with nothing to do (no requests, so no bytes) are left out here
    // as in the table, and counted.
    let quiet = s.phases.iter().filter(|p| idle(p)).count();
    let mut per_phase: Vec<String> = s
        .phases
        .iter()
        .filter(|p| !idle(p))
        .map(|p| {
            format!(
                "{} {} read, {} written, {:.1} worker-s",
                p.name,
                human_bytes(p.requests.bytes_read),
                human_bytes(p.requests.bytes_written),
                p.task_seconds
            )
        })
        .collect();
    if quiet > 0 {
        per_phase.push(format!(
            "{quiet} phase{} with nothing to do",
            if quiet == 1 { "" } else { "s" }
        ));
    }
    out += &format!(
        "cost: ${:.4} in requests (${}/1k PUT·COPY·LIST, ${}/1k GET·HEAD); {:.1} worker-seconds in tasks\n  {}\n",
        s.cost_usd,
        s.prices.put_per_1k,
        s.prices.get_per_1k,
        s.task_seconds,
        per_phase.join("; ")
    );
    for f in &s.failed_tasks {
        out += &format!("failed: {}/{}: {}\n", f.phase, f.task, f.error);
    }
    for x in &s.submissions {
        out += &format!(
            "submitted to {}: {} {} ({} {} workers, {} {}, {})\n",
            x.backend,
            x.id,
            x.name,
            x.workers,
            x.resources,
            if x.backend == "k8s" {
                "namespace"
            } else {
                "queue"
            },
            x.queue,
            x.job_definition
        );
    }
    out
}

/// Tasks terminal (committed or failed) / total per phase, from one LIST of each
/// phase's commit prefix: cheap enough to poll while a job runs.
pub async fn progress(
    reg: &Registry,
    job_uri: &str,
    retry: &Retry,
) -> Result<Vec<(String, u64, u64)>, JobError> {
    let job = load_job(reg, job_uri, retry).await?;
    let store = reg.open(&job.uri)?;
    let mut out = Vec::new();
    let names = phase_tasks(&job);
    for (name, total) in names {
        let done = list_all(store.as_ref(), &job.paths.commits(&name), retry)
            .await?
            .len() as u64;
        out.push((name, done.min(total), total));
    }
    Ok(out)
}

/// One progress line: per phase done/total, the share of all tasks, and an ETA from
/// the rate so far.
pub fn progress_line(p: &[(String, u64, u64)], elapsed: std::time::Duration) -> String {
    let done: u64 = p.iter().map(|x| x.1).sum();
    let total: u64 = p.iter().map(|x| x.2).sum::<u64>().max(1);
    let phases: Vec<String> = p.iter().map(|(n, d, t)| format!("{n} {d}/{t}")).collect();
    let secs = elapsed.as_secs_f64();
    let eta = if done > 0 && done < total {
        format!(", ETA {:.0}s", secs / done as f64 * (total - done) as f64)
    } else {
        String::new()
    };
    format!(
        "[{secs:.0}s] {}  {:.0}% of tasks{eta}",
        phases.join("  "),
        100.0 * done as f64 / total as f64
    )
}

/// A job status to render in tests (here and in the report's).
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;

    /// A phase of 2 tasks, `committed` of them done, `records` in and out.
    pub fn phase(name: &str, committed: u64, records: u64) -> PhaseStatus {
        PhaseStatus {
            name: name.into(),
            tasks: TaskCounts {
                total: 2,
                pending: 2 - committed,
                leased: 0,
                committed,
                failed: 0,
                by_backup: 0,
            },
            records_in: records,
            records_out: records,
            rejected: 0,
            stats: TaskStats::default(),
            requests: RequestSnapshot::default(),
            task_seconds: 0.0,
            cost_usd: 0.0,
        }
    }

    pub fn job(phases: Vec<PhaseStatus>) -> JobStatus {
        JobStatus {
            version: 1,
            job: "j".into(),
            job_id: "j".into(),
            output: "o".into(),
            complete: false,
            succeeded: false,
            phases,
            failed_tasks: vec![],
            worker_requests: RequestSnapshot::default(),
            requests_total: 0,
            tasks_committed: 0,
            tasks_total: 0,
            cost_usd: 0.0,
            prices: Prices {
                put_per_1k: 0.005,
                get_per_1k: 0.0004,
            },
            task_seconds: 0.0,
            spans: vec![],
            submissions: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_show_phases_share_and_eta() {
        let p = vec![
            ("p00".to_string(), 10, 20),
            ("p01".to_string(), 0, 4),
            ("finalize".to_string(), 0, 1),
        ];
        let l = progress_line(&p, std::time::Duration::from_secs(20));
        assert_eq!(
            l,
            "[20s] p00 10/20  p01 0/4  finalize 0/1  40% of tasks, ETA 30s"
        );
        let done = vec![("p00".to_string(), 2, 2), ("finalize".to_string(), 1, 1)];
        assert!(!progress_line(&done, std::time::Duration::from_secs(3)).contains("ETA"));
    }

    #[test]
    fn phases_with_nothing_to_do_print_as_one_line() {
        let phase = fixture::phase;
        let mut phases = vec![phase("p00", 2, 50)];
        phases.extend((1..=60).map(|k| phase(&format!("p{k:02}"), 2, 0)));
        // A phase not yet run is never folded, nor is a lone idle phase.
        phases.extend([
            phase("p61", 2, 50),
            phase("p62", 2, 0),
            phase("p63", 0, 0),
            phase("p64", 0, 0),
        ]);
        let st = fixture::job(phases);
        let text = render(&st);
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('p')).collect();
        assert_eq!(lines.len(), 7, "{text}");
        assert!(lines[0].starts_with("phase"));
        assert!(lines[1].starts_with("p00 "));
        assert!(lines[2].starts_with("p01–p60 "), "{text}");
        assert!(
            lines[2].contains("(60 phases with nothing to do)"),
            "{text}"
        );
        let cols: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(&cols[1..6], ["120", "0", "0", "120", "0"], "{text}");
        assert!(
            lines[3].starts_with("p61 ") && lines[4].starts_with("p62 "),
            "{text}"
        );
        assert!(
            lines[5].starts_with("p63 ") && lines[6].starts_with("p64 "),
            "{text}"
        );
        // The cost line's per-phase bytes leave the idle phases out too (p01–p60 and
        // the lone p62), and count them.
        let bytes = text
            .lines()
            .find(|l| l.starts_with("  p00 "))
            .expect("per-phase bytes line");
        assert!(bytes.contains("p61 0 B read"), "{bytes}");
        assert!(bytes.contains("p63 0 B read"), "{bytes}");
        assert!(
            !bytes.contains("p01 ") && !bytes.contains("p62 "),
            "{bytes}"
        );
        assert!(bytes.ends_with("; 61 phases with nothing to do"), "{bytes}");
    }

    #[test]
    fn prices_count_writes_and_lists_above_reads() {
        let p = Prices {
            put_per_1k: 0.005,
            get_per_1k: 0.0004,
        };
        let r = RequestSnapshot {
            get: 1000,
            head: 1000,
            put: 1000,
            list: 1000,
            delete: 1000,
            copy: 0,
            bytes_read: 0,
            bytes_written: 0,
        };
        assert!((p.cost(&r) - (2.0 * 0.005 + 2.0 * 0.0004)).abs() < 1e-12);
    }
}
