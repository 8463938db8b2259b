//! `--backend local`: N `mdf worker` processes on this machine (their output on
//! stderr), waited for; with no workers asked for, the job is only planned. Also the
//! in-process worker pool of `mdf run` ([`in_process`]).
use super::{Backend, Event, JobRef, LaunchError, LaunchOptions, Launched};
use crate::clock::{Entropy, SystemClock};
use crate::coordinator::status;
use crate::protocol::io::Retry;
use crate::store::Registry;
use crate::worker::{self, WorkerOptions, WorkerReport};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub struct Local;

#[async_trait::async_trait(?Send)]
impl Backend for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn remote(&self) -> bool {
        false
    }

    /// Plan only, unless `--workers` says otherwise.
    fn default_workers(&self) -> u32 {
        0
    }

    async fn launch(
        &self,
        job: &JobRef<'_>,
        o: &LaunchOptions,
        events: &dyn Fn(Event),
    ) -> Result<Launched, LaunchError> {
        let classes = o.classes(self.default_workers());
        if classes.is_empty() {
            return Ok(Launched::Planned);
        }
        let io = |what: String| move |error| LaunchError::Io { what, error };
        let exe = std::env::current_exe().map_err(io("finding the mdf executable".into()))?;
        let mut children = Vec::new();
        for (class, n) in classes {
            for i in 0..n {
                let child = std::process::Command::new(&exe)
                    // One task each: the user asked for N processes, and N processes
                    // sized to the whole machine would run N × cores tasks.
                    .args([
                        "worker",
                        "--job",
                        job.uri,
                        "--resources",
                        class,
                        "--slots",
                        "1",
                    ])
                    .args([
                        "--worker-id",
                        &format!("local-{class}-{i}-{}", std::process::id()),
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .map_err(io(format!("starting {}", exe.display())))?;
                children.push(child);
            }
        }
        let workers = children.len();
        events(Event::Started { workers });
        let mut failed = 0;
        for mut c in children {
            let st = tokio::task::spawn_blocking(move || c.wait())
                .await
                .map_err(|e| LaunchError::Io {
                    what: "waiting for a worker".into(),
                    error: std::io::Error::other(e),
                })?
                .map_err(io("waiting for a worker".into()))?;
            if !st.success() {
                failed += 1;
            }
        }
        let retry = Retry::new(Entropy::from_os());
        let status = status::status(job.registry, job.uri, &SystemClock, &retry).await?;
        Ok(Launched::Ran {
            workers,
            failed,
            status: Box::new(status),
        })
    }
}

/// `mdf run`'s workers: `workers` in-process workers of the job at `job_uri`, each
/// doing every kind of task, until the job is complete or `shutdown` is set. Returns
/// a handle per worker.
pub fn in_process(
    reg: &Registry,
    job_uri: &str,
    workers: usize,
    shutdown: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Result<WorkerReport, worker::WorkerError>>> {
    let entropy = Entropy::from_os();
    crate::ops::size_image_decode_cache(workers);
    // In-process workers are task slots of one process: they share listings.
    let listings = Arc::new(crate::worker::slots::SharedListings::default());
    (0..workers)
        .map(|i| {
            let reg = reg.clone();
            let opts = WorkerOptions {
                job_uri: job_uri.to_string(),
                max_tasks: None,
                worker_id: Some(format!("local-{}-{i}", entropy.hex_id(3))),
                // In-process workers do every kind of task.
                gpu: true,
                cpu_work: true,
                clock: Arc::new(SystemClock),
                entropy: Entropy::from_os(),
                shutdown: shutdown.clone(),
                drain: Default::default(),
                drain_after_task: Default::default(),
                exit_when_class_done: false,
                give_up_after: None,
                listings: (workers > 1).then(|| listings.clone()),
                simulate: None,
            };
            tokio::spawn(async move { worker::run(&reg, opts).await })
        })
        .collect()
}
