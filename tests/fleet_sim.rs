//! The fleet simulator (docs/SCALE.md) end to end: mdf's real submit, workers, leases,
//! commits and finalize against the simulated S3, in virtual time. A small fleet with
//! workers killed mid-task and a store throttling hard still commits every task once
//! and publishes each output exactly once.
use mdf::bench::{FleetBench, fleet};
use mdf::store::sim::SimConfig;

/// One simulation at a time: the virtual clock advances whenever the runtime is idle,
/// including while a task's blocking reader or writer thread works, so simulations
/// competing for the cores drain later in virtual time (a 20-worker drain measured
/// 1.44× the ideal in one of three parallel runs, under 1.35× alone).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn bench(workers: usize, tasks: usize, kills: usize, store: SimConfig) -> FleetBench {
    FleetBench {
        workers,
        tasks,
        work_secs: 30.0,
        work_sigma: 0.5,
        output_bytes: 1024,
        ramp_secs: 10.0,
        kills,
        job: String::new(),
        store,
    }
}

/// Every task (and finalize) committed once, none failed, no worker error, each
/// output published once, and some worker was killed on the way.
fn every_task_once_despite_kills(r: &mdf::bench::FleetReport, tasks: u64) {
    let table = r.to_string();
    assert!(r.status.succeeded, "{table}");
    assert_eq!(r.status.tasks_committed, tasks + 1, "{table}");
    assert!(r.status.failed_tasks.is_empty(), "{table}");
    assert!(r.worker_errors.is_empty(), "{table}");
    assert_eq!(r.output_objects, tasks, "{table}");
    assert!(r.killed > 0, "{table}");
}

#[test]
fn killed_workers_and_slow_downs_lose_nothing_and_publish_each_output_once() {
    let _one = serial();
    let r = fleet(&bench(
        40,
        400,
        8,
        SimConfig {
            // A partition that takes 40 writes and 60 reads a second: the fleet's
            // claims, heartbeats and commits overrun it.
            write_rate: 40.0,
            read_rate: 60.0,
            seed: 7,
            ..SimConfig::default()
        },
    ))
    .unwrap();
    let table = r.to_string();
    every_task_once_despite_kills(&r, 400);
    assert!(
        r.total.throttled_total() > 0,
        "the store never throttled: {table}"
    );
    // Virtual time: drain is at least the work itself, and the whole run took real
    // seconds, not the virtual minutes.
    assert!(r.drain >= r.ideal, "{table}");
    assert!(r.real_secs < r.drain.as_secs_f64(), "{table}");
}

#[test]
fn an_unthrottled_fleet_drains_near_the_ideal() {
    let _one = serial();
    let r = fleet(&bench(20, 200, 0, SimConfig::default())).unwrap();
    let table = r.to_string();
    assert!(r.status.succeeded, "{table}");
    assert_eq!(r.total.throttled_total(), 0, "{table}");
    assert_eq!(r.output_objects, 200, "{table}");
    // 10 tasks a worker: the tail of the last round and the ramp are the overhead.
    let over = r.drain.as_secs_f64() / r.ideal.as_secs_f64();
    assert!(over < 1.35, "{over}: {table}");
}

#[test]
fn no_workers_plans_only_and_counts_the_planning_requests() {
    let _one = serial();
    let r = fleet(&bench(0, 500, 3, SimConfig::default())).unwrap();
    let table = r.to_string();
    // A manifest a task and the finalize task's, job.json, the owner markers: all
    // PUTs; the input listing is one page.
    let p = &r.planning_requests;
    assert!(p.get(mdf::store::sim::Op::Put) >= 501, "{table}");
    assert_eq!(p.get(mdf::store::sim::Op::List), 2, "{table}");
    assert!(r.planning > std::time::Duration::ZERO, "{table}");
    assert_eq!(r.status.tasks_committed, 0, "{table}");
    assert!(
        table.contains("planning (submit) of 500 input files"),
        "{table}"
    );
}

/// A sharded job (docs/PROTOCOL.md §1: `shard_tasks: 25`, 16 shards of about 25
/// tasks) under the same kills and throttling: every task commits once, each output
/// is published once, and finalize reads the shards' done markers, not every commit.
/// Against the same job unsharded, a worker's listings stop covering the whole phase:
/// fewer LISTs a task, and finalize needs a request per shard, not per task.
#[test]
fn a_sharded_job_loses_nothing_under_kills_and_lists_a_shard_not_the_phase() {
    let _one = serial();
    let throttled = SimConfig {
        write_rate: 40.0,
        read_rate: 60.0,
        seed: 7,
        ..SimConfig::default()
    };
    let mut b = bench(40, 400, 8, throttled.clone());
    b.job = "shard_tasks: 25".into();
    let r = fleet(&b).unwrap();
    let table = r.to_string();
    every_task_once_despite_kills(&r, 400);
    // Each marker holds every record as stored, whether its writer read the record
    // back or held it as its own (killed workers' records are read back).
    assert_eq!(r.marker_mismatches, 0, "{table}");
    // Finalize: 16 markers (and its own claim, heartbeats, commit, publishing), where
    // the unsharded job reads 400 commit records.
    let plain = fleet(&bench(40, 400, 8, throttled)).unwrap();
    let plain_table = plain.to_string();
    assert!(plain.status.succeeded, "{plain_table}");
    assert!(
        r.finalize_requests * 2 < plain.finalize_requests,
        "{} vs {}: {table}\n{plain_table}",
        r.finalize_requests,
        plain.finalize_requests
    );
    // The unsharded job overruns the throttled partitions (its submit alone writes
    // 401 manifests into one); the sharded one, with a manifest object a shard and
    // fewer listings, less so.
    assert!(plain.total.throttled_total() > 0, "{plain_table}");
    assert!(
        r.total.throttled_total() < plain.total.throttled_total(),
        "{table}\n{plain_table}"
    );
    let lists = |x: &mdf::bench::FleetReport| x.total.get(mdf::store::sim::Op::List);
    assert!(
        lists(&r) < lists(&plain),
        "LISTs sharded {} vs unsharded {}: {table}\n{plain_table}",
        lists(&r),
        lists(&plain)
    );
}
