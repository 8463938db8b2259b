//! `mdf submit`: plan and write a job, then start its workers with the chosen launch
//! backend (`--backend`, [`crate::launch`]); the job URI is the last line on stdout
//! (except for a k8s manifest printed without --apply, which is the whole stdout).
use super::{BackendArgs, SpecArgs, load_spec, runtime, submit_error};
use crate::clock::{Entropy, SystemClock};
use crate::coordinator::status::render;
use crate::coordinator::submit::{self, SubmitOptions};
use crate::launch::{self, Event, JobRef, LaunchOptions, Launched};
use crate::store::Registry;
use std::process::ExitCode;

impl BackendArgs {
    fn options(&self) -> LaunchOptions {
        LaunchOptions {
            workers: self.workers,
            gpu_workers: self.gpu_workers,
            queue: self.queue.clone(),
            gpu_queue: self.gpu_queue.clone(),
            job_definition: self.job_definition.clone(),
            gpu_job_definition: self.gpu_job_definition.clone(),
            image: self.image.clone(),
            gpu_image: self.gpu_image.clone(),
            namespace: self.namespace.clone(),
            apply: self.apply,
            group: self.group.clone(),
            gpu_group: self.gpu_group.clone(),
        }
    }
}

pub fn run(
    spec: &SpecArgs,
    job_root: String,
    job_id: Option<String>,
    reuse: Option<String>,
    backend: &BackendArgs,
) -> anyhow::Result<ExitCode> {
    let spec = match load_spec(spec) {
        Ok(s) => s,
        Err(c) => return Ok(c),
    };
    let options = backend.options();
    let backend = launch::backend(&backend.backend)
        .and_then(|b| b.validate(&options, &job_root, &spec).map(|()| b));
    let backend = match backend {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mdf: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let rt = runtime()?;
    rt.block_on(async {
        let reg = Registry::new(spec.s3.clone());
        let opts = SubmitOptions {
            job_root,
            job_id,
            reuse,
            plan_memory: crate::coordinator::plan::PLAN_MEMORY,
        };
        let s = match submit::submit(&spec, &reg, &opts, &SystemClock, &Entropy::from_os()).await {
            Ok(s) => s,
            Err(e) => return submit_error(e),
        };
        eprintln!(
            "{} job {}: {} tasks over {} input files ({} bytes){}",
            if s.created {
                "submitted"
            } else {
                "already submitted:"
            },
            s.job_id,
            s.tasks,
            s.input_files,
            s.input_bytes,
            if s.reused > 0 {
                format!(", {} reused", s.reused)
            } else {
                String::new()
            }
        );
        for n in &s.notes {
            eprintln!("note: {n}");
        }
        let job = JobRef {
            registry: &reg,
            uri: &s.job_uri,
            id: &s.job_id,
        };
        let events = |e: Event| match e {
            Event::Started { workers } => eprintln!("started {workers} local workers"),
            Event::Submitted(sub) => eprintln!("{}", backend.describe(&sub)),
            Event::Warning(w) => eprintln!("mdf: warning: {w}"),
        };
        let launched = backend.launch(&job, &options, &events).await?;
        match &launched {
            Launched::Manifest(yaml) => {
                print!("{yaml}");
                return Ok(ExitCode::SUCCESS);
            }
            Launched::Ran { status, .. } => eprint!("{}", render(status)),
            Launched::Planned | Launched::Submitted(_) => {}
        }
        println!("{}", s.job_uri);
        Ok(if launched.ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    })
}
