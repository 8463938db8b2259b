//! `mdf worker`: lease and run tasks of a job until it is complete (or SIGTERM).
use super::{on_signals, runtime};
use crate::clock::{Entropy, SystemClock};
use crate::store::Registry;
use crate::worker::{self, WorkerOptions};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub fn run(
    job: String,
    max_tasks: Option<u64>,
    worker_id: Option<String>,
    resources: &str,
    cpu_work: bool,
    give_up_after: Option<u64>,
) -> anyhow::Result<ExitCode> {
    let gpu = match resources {
        "cpu" => false,
        "gpu" => true,
        other => {
            eprintln!("mdf: --resources: unknown class {other:?}, expected cpu or gpu");
            return Ok(ExitCode::from(2));
        }
    };
    let rt = runtime()?;
    rt.block_on(async {
        let shutdown = Arc::new(AtomicBool::new(false));
        on_signals(shutdown.clone());
        let reg = Registry::new(Default::default());
        let opts = WorkerOptions {
            job_uri: job,
            max_tasks,
            worker_id,
            gpu,
            cpu_work,
            clock: Arc::new(SystemClock),
            entropy: Entropy::from_os(),
            shutdown,
            give_up_after: give_up_after.map(std::time::Duration::from_secs),
        };
        let r = worker::run(&reg, opts).await?;
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
        Ok(ExitCode::SUCCESS)
    })
}
