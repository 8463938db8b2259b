//! How many tasks one worker process runs at once, and running them: one worker loop
//! (leases, heartbeats, its own id) per slot, sharing the process's async runtime,
//! stores and kernel thread pool (docs/OPERATIONS.md, "Sizing workers").
//!
//! A task's pipeline is three threads (reader, stages, writer) and its stages' kernels
//! split each batch over the process's kernel pool (one thread per core). The reader
//! (inflate, WARC parsing, charset detection) is serial: about a fifth of a text
//! task's CPU, so one task alone keeps ~5 cores busy at most. Slots = cores ÷ the
//! heaviest stage's `resources.cpu` keeps every core busy on a 64-core instance, and
//! the shared kernel pool (not a pool per slot) keeps the CPU-bound threads at the
//! core count when slots outnumber the work.
use super::{WorkerError, WorkerOptions, WorkerReport, run};
use crate::store::Registry;

/// The cores this process may use: the standard library's count honours the CPU
/// affinity mask (`taskset`, cpusets) and cgroup v1/v2 CPU quotas (a container's
/// `--cpus 2.5` gives 2), and is at least 1.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Task slots on `cores` for a job whose heaviest stage asks `max_stage_cpu` cores
/// (`resources.cpu`, at least 1): as many tasks as fit, at least one.
pub fn task_slots(cores: usize, max_stage_cpu: f64) -> usize {
    let per = if max_stage_cpu.is_finite() && max_stage_cpu >= 1.0 {
        max_stage_cpu
    } else {
        1.0
    };
    ((cores as f64 / per).floor() as usize).max(1)
}

/// Runs `slots` worker loops, the `k`-th with the options `make(k)` builds, and
/// merges their reports (counts summed; the job is complete if any loop saw it so).
/// The first error is returned once every loop has stopped.
pub async fn run_slots(
    reg: &Registry,
    slots: usize,
    make: impl Fn(usize) -> WorkerOptions,
) -> Result<WorkerReport, WorkerError> {
    if slots <= 1 {
        return run(reg, make(0)).await;
    }
    let runs = (0..slots).map(|k| {
        let (reg, opts) = (reg.clone(), make(k));
        async move { run(&reg, opts).await }
    });
    let mut merged: Option<WorkerReport> = None;
    let mut first_err = None;
    for r in futures::future::join_all(runs).await {
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
        // A 64-core spot instance: 64 one-core tasks, or 16 of a stage asking 4.
        assert_eq!(task_slots(64, 1.0), 64);
        assert_eq!(task_slots(64, 4.0), 16);
        assert_eq!(task_slots(64, 3.0), 21);
        // A container with `--cpus 2.5` (available_parallelism gives 2), a laptop.
        assert_eq!(task_slots(2, 1.0), 2);
        assert_eq!(task_slots(8, 1.5), 5);
        // Never zero, whatever the stage asks.
        assert_eq!(task_slots(1, 1.0), 1);
        assert_eq!(task_slots(2, 8.0), 1);
        assert_eq!(task_slots(4, 0.0), 4);
        assert_eq!(task_slots(4, f64::NAN), 4);
    }

    #[test]
    fn slot_ids_keep_the_given_id_for_the_first() {
        assert_eq!(slot_id("w-a", 0), "w-a");
        assert_eq!(slot_id("w-a", 3), "w-a-3");
    }
}
