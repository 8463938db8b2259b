//! `mdf worker`: lease and run tasks of a job until it is complete (or SIGTERM, or a
//! spot interruption notice); with `--fleet-group`, as an instance of an Auto Scaling
//! group that follows the group's job tag and leaves the group when there is no work.
use super::{on_signals, runtime};
use crate::clock::{Entropy, SystemClock};
use crate::launch::fleet::{Ended, Member, Next, next_step};
use crate::launch::imds::{self, Flags, Imds, Notice, Policy, Seen};
use crate::store::Registry;
use crate::worker::{self, WorkerOptions};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Exit status of a worker stopped early by an interruption notice with its job
/// incomplete (EX_TEMPFAIL): not a success, so AWS Batch and Kubernetes start the
/// worker again elsewhere.
const INTERRUPTED: u8 = 75;

pub struct Args {
    pub job: Option<String>,
    pub fleet_group: Option<String>,
    pub spot_notices: bool,
    pub leave: bool,
    pub max_tasks: Option<u64>,
    pub slots: Option<usize>,
    pub worker_id: Option<String>,
    pub resources: String,
    pub cpu_work: bool,
    pub give_up_after: Option<u64>,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let gpu = match a.resources.as_str() {
        "cpu" => false,
        "gpu" => true,
        other => {
            eprintln!("mdf: --resources: unknown class {other:?}, expected cpu or gpu");
            return Ok(ExitCode::from(2));
        }
    };
    let rt = runtime()?;
    rt.block_on(async {
        let flags = Flags::default();
        let shutdown = flags.shutdown.clone();
        on_signals(shutdown.clone());
        let seen = Arc::new(Seen::default());
        let imds = if a.fleet_group.is_some() || a.spot_notices {
            let i = Arc::new(Imds::from_env().map_err(anyhow::Error::msg)?);
            if !a.leave {
                imds::watch(
                    i.clone(),
                    Policy::default(),
                    Arc::new(SystemClock),
                    flags.clone(),
                    seen.clone(),
                );
            }
            Some(i)
        } else {
            None
        };
        let member = match (&a.fleet_group, &imds) {
            (Some(g), Some(i)) => Some(Member::discover(g, i).await?),
            _ => None,
        };
        if a.leave {
            // The instance's own failure handler (terraform/modules/fleet): it cannot
            // work, so it leaves the group rather than being replaced again and again.
            let Some(m) = &member else {
                anyhow::bail!("--leave needs --fleet-group");
            };
            eprintln!(
                "mdf: leaving Auto Scaling group {}: terminating instance {} (the group shrinks by one)",
                m.group, m.instance_id
            );
            m.leave(true).await?;
            return Ok(ExitCode::SUCCESS);
        }
        let reg = Registry::new(Default::default());
        let mut next = match (&a.job, &member) {
            (Some(j), _) => Next::Run(j.clone()),
            (None, Some(m)) => next_step(Ended::Start, None, m.job().await?.as_deref()),
            (None, None) => anyhow::bail!("--job or --fleet-group is required"),
        };
        loop {
            match next {
                Next::Run(job) => {
                    let slots = slots_for(&reg, &job, &a, gpu).await;
                    let base_id = match (&a.worker_id, slots) {
                        (Some(id), _) => Some(id.clone()),
                        (None, 1) => None,
                        (None, _) => Some(format!("w-{}", Entropy::from_os().hex_id(6))),
                    };
                    let make = |k: usize| WorkerOptions {
                        job_uri: job.clone(),
                        max_tasks: a.max_tasks,
                        worker_id: base_id.as_deref().map(|b| worker::slots::slot_id(b, k)),
                        gpu,
                        cpu_work: a.cpu_work,
                        clock: Arc::new(SystemClock),
                        entropy: Entropy::from_os(),
                        shutdown: shutdown.clone(),
                        drain: flags.drain.clone(),
                        drain_after_task: flags.drain_after_task.clone(),
                        exit_when_class_done: member.is_some(),
                        give_up_after: a.give_up_after.map(std::time::Duration::from_secs),
                        listings: None,
                        simulate: None,
                    };
                    let r = worker::slots::run_slots(&reg, slots, make).await?;
                    eprintln!(
                        "worker {}: {} committed, {} failed, {} released, {} fenced; job {}",
                        r.worker_id,
                        r.committed,
                        r.failed,
                        r.released,
                        r.fenced,
                        if r.job_complete {
                            "complete"
                        } else {
                            "not complete"
                        }
                    );
                    // Done wins over a notice: nothing is left to hand over.
                    let ended = match seen.get() {
                        _ if r.job_complete || r.class_done => Ended::Complete,
                        Some(Notice::Spot { .. }) => Ended::Reclaimed,
                        Some(Notice::Rebalance) => Ended::Rebalance,
                        None if shutdown.load(Ordering::SeqCst) => Ended::Reclaimed,
                        // --max-tasks reached.
                        None => return Ok(ExitCode::SUCCESS),
                    };
                    let Some(m) = &member else {
                        return Ok(match (ended, seen.get()) {
                            (Ended::Reclaimed | Ended::Rebalance, Some(_)) => {
                                eprintln!(
                                    "mdf: stopped by an interruption notice with the job incomplete (exit {INTERRUPTED}: start a worker elsewhere)"
                                );
                                ExitCode::from(INTERRUPTED)
                            }
                            _ => ExitCode::SUCCESS,
                        });
                    };
                    let tag = match ended {
                        Ended::Complete => m.job().await?,
                        _ => None,
                    };
                    next = next_step(ended, Some(&job), tag.as_deref());
                }
                Next::Leave { decrement } => {
                    let Some(m) = &member else {
                        return Ok(ExitCode::SUCCESS);
                    };
                    eprintln!(
                        "mdf: leaving Auto Scaling group {}: terminating instance {} ({})",
                        m.group,
                        m.instance_id,
                        if decrement {
                            "no work left: the group shrinks by one"
                        } else {
                            "its capacity is at risk: the group replaces it"
                        }
                    );
                    m.leave(decrement).await?;
                    return Ok(ExitCode::SUCCESS);
                }
                Next::Wait => {
                    eprintln!("mdf: this instance is being reclaimed; exiting");
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
    })
}

/// Task slots for this process on `job`: `--slots`, else one for a GPU worker or with
/// `--max-tasks`, else the cores this process may use over the job's largest stage
/// `resources.cpu` (a job that cannot be read gets one: the worker reports why).
async fn slots_for(reg: &Registry, job: &str, a: &Args, gpu: bool) -> usize {
    let (n, why) = match a.slots {
        Some(n) => (n.max(1), "--slots".to_string()),
        None if gpu => (1, "--resources gpu".to_string()),
        None if a.max_tasks.is_some() => (1, "--max-tasks".to_string()),
        None => {
            // Read as the worker reads it: an outage is waited out (and reported) here,
            // not taken for a job that cannot be read; a missing job or denied access
            // falls through to one slot and the worker's own error.
            let mut outage = worker::outage::Outage::new(
                Arc::new(SystemClock),
                Entropy::from_os(),
                a.give_up_after.map(std::time::Duration::from_secs),
            );
            let retry = crate::protocol::io::Retry::new(Entropy::from_os());
            let loaded = outage.load_job(reg, job, &retry).await;
            outage.over();
            match loaded {
                Ok(j) => worker::slots::default_slots(j.spec.max_stage_cpu()),
                Err(_) => (1, "job not readable yet".to_string()),
            }
        }
    };
    eprintln!(
        "mdf worker: {n} task slot{} ({why})",
        if n == 1 { "" } else { "s" }
    );
    n
}
