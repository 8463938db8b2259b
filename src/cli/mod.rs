//! The `mdf` command line: a thin layer over the library. `main` → `run` →
//! `anyhow::Result<ExitCode>`; exit 0 = success, 1 = the job failed or is incomplete,
//! 2 = bad usage or configuration (refused before anything was written).
pub mod bench;

use crate::clock::{Entropy, SystemClock};
use crate::coordinator::plan::PlanError;
use crate::coordinator::status::{self, render};
use crate::coordinator::submit::{self, SubmitError, SubmitOptions};
use crate::protocol::io::Retry;
use crate::spec::{Overrides, Spec};
use crate::store::Registry;
use crate::worker::{self, WorkerOptions};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser)]
#[command(
    name = "mdf",
    version,
    about = "Curate web-scale pretraining data on object storage"
)]
struct Cli {
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone, Default)]
struct SpecArgs {
    /// Pipeline spec (YAML).
    spec: PathBuf,
    /// Input URI or glob (repeatable); replaces input.uris.
    #[arg(short, long = "input")]
    input: Vec<String>,
    /// Output URI; replaces output.uri.
    #[arg(short, long)]
    output: Option<String>,
    /// Override a spec value: --set job.lease_ttl_secs=30 (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
}

impl SpecArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            input: self.input.clone(),
            output: self.output.clone(),
            set: self.set.clone(),
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a job on this machine: submit it and run in-process workers until done.
    Run {
        #[command(flatten)]
        spec: SpecArgs,
        /// In-process workers (default: number of cores).
        #[arg(long)]
        workers: Option<usize>,
        /// Where job manifests live.
        #[arg(long, default_value = ".mdf")]
        job_root: String,
        #[arg(long)]
        job_id: Option<String>,
        /// Reuse unchanged phases' committed tasks of this job.
        #[arg(long, value_name = "JOB_URI")]
        reuse: Option<String>,
    },
    /// Plan a job and write its manifests; prints the job URI last.
    Submit {
        #[command(flatten)]
        spec: SpecArgs,
        #[arg(long)]
        job_root: String,
        #[arg(long)]
        job_id: Option<String>,
        #[arg(long, value_name = "JOB_URI")]
        reuse: Option<String>,
    },
    /// Lease and run tasks of a job until it is complete.
    Worker {
        /// The job URI printed by submit.
        #[arg(long)]
        job: String,
        /// Stop after this many task attempts.
        #[arg(long)]
        max_tasks: Option<u64>,
        #[arg(long)]
        worker_id: Option<String>,
        /// Resource class: cpu, or gpu (may also take GPU phases).
        #[arg(long, default_value = "cpu")]
        resources: String,
    },
    /// Show a job's progress.
    Status {
        job: String,
        /// Machine-readable output with a top-level "complete".
        #[arg(long)]
        json: bool,
    },
    /// Check a spec (and, unless --offline, its inputs) and print a checklist.
    Validate {
        #[command(flatten)]
        spec: SpecArgs,
        /// Do not list inputs or read schemas.
        #[arg(long)]
        offline: bool,
    },
    /// List the operators a spec can use.
    Ops,
    /// Benchmarks that print a table.
    Bench {
        #[command(subcommand)]
        which: bench::Bench,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let default = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mdf: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn load_spec(a: &SpecArgs) -> Result<Spec, ExitCode> {
    Spec::load(&a.spec, &a.overrides()).map_err(|e| {
        eprintln!("mdf: {e}");
        ExitCode::from(2)
    })
}

/// Sets the flag on SIGTERM or Ctrl-C (spot interruption notices arrive as SIGTERM).
fn on_signals(flag: Arc<AtomicBool>) {
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        eprintln!("mdf: stopping: no new tasks, handing leases back");
        flag.store(true, Ordering::SeqCst);
    });
}

fn submit_error(e: SubmitError) -> anyhow::Result<ExitCode> {
    match e {
        SubmitError::Plan(PlanError::Spec(errs)) => {
            eprintln!("mdf: {errs}");
            Ok(ExitCode::from(2))
        }
        SubmitError::Conflict { .. } => {
            eprintln!("mdf: {e}");
            Ok(ExitCode::from(2))
        }
        e => Err(e.into()),
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Ops => {
            for d in crate::ops::REGISTRY {
                println!("{:<16} {}", d.name, d.summary);
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Validate { spec, offline } => validate(&spec, offline),
        Cmd::Submit {
            spec,
            job_root,
            job_id,
            reuse,
        } => {
            let spec = match load_spec(&spec) {
                Ok(s) => s,
                Err(c) => return Ok(c),
            };
            let rt = runtime()?;
            rt.block_on(async {
                let reg = Registry::new(spec.s3.clone());
                let opts = SubmitOptions {
                    job_root,
                    job_id,
                    reuse,
                };
                match submit::submit(&spec, &reg, &opts, &SystemClock, &Entropy::from_os()).await {
                    Ok(s) => {
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
                        println!("{}", s.job_uri);
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(e) => submit_error(e),
                }
            })
        }
        Cmd::Worker {
            job,
            max_tasks,
            worker_id,
            resources,
        } => {
            let gpu = match resources.as_str() {
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
                    clock: Arc::new(SystemClock),
                    entropy: Entropy::from_os(),
                    shutdown,
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
        Cmd::Status { job, json } => {
            let rt = runtime()?;
            rt.block_on(async {
                let reg = Registry::new(Default::default());
                let retry = Retry::new(Entropy::from_os());
                let s = status::status(&reg, &job, &SystemClock, &retry).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&s)?);
                } else {
                    print!("{}", render(&s));
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        Cmd::Run {
            spec,
            workers,
            job_root,
            job_id,
            reuse,
        } => {
            let spec = match load_spec(&spec) {
                Ok(s) => s,
                Err(c) => return Ok(c),
            };
            // Default: as many workers as the cores allow at the stages' `resources.cpu`.
            let n = workers
                .unwrap_or_else(|| {
                    let cores = std::thread::available_parallelism()
                        .map(|n| n.get())
                        .unwrap_or(1);
                    (cores as f64 / spec.max_stage_cpu()).floor() as usize
                })
                .max(1);
            let rt = runtime()?;
            rt.block_on(run_local(spec, n, job_root, job_id, reuse))
        }
        Cmd::Bench { which } => bench::run(which),
    }
}

async fn run_local(
    spec: Spec,
    workers: usize,
    job_root: String,
    job_id: Option<String>,
    reuse: Option<String>,
) -> anyhow::Result<ExitCode> {
    let reg = Registry::new(spec.s3.clone());
    let entropy = Entropy::from_os();
    let opts = SubmitOptions {
        job_root,
        job_id,
        reuse,
    };
    let t0 = std::time::Instant::now();
    let s = match submit::submit(&spec, &reg, &opts, &SystemClock, &entropy).await {
        Ok(s) => s,
        Err(e) => return submit_error(e),
    };
    eprintln!(
        "{} job {}: {} tasks over {} input files, {} workers",
        if s.created { "submitted" } else { "resuming" },
        s.job_id,
        s.tasks,
        s.input_files,
        workers
    );
    let shutdown = Arc::new(AtomicBool::new(false));
    on_signals(shutdown.clone());
    let mut handles = Vec::new();
    for i in 0..workers {
        let reg = reg.clone();
        let opts = WorkerOptions {
            job_uri: s.job_uri.clone(),
            max_tasks: None,
            worker_id: Some(format!("local-{}-{i}", entropy.hex_id(3))),
            gpu: true,
            clock: Arc::new(SystemClock),
            entropy: Entropy::from_os(),
            shutdown: shutdown.clone(),
        };
        handles.push(tokio::spawn(async move { worker::run(&reg, opts).await }));
    }
    for h in handles {
        match h.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("mdf: worker error: {e}"),
            Err(e) => eprintln!("mdf: worker panicked: {e}"),
        }
    }
    let retry = Retry::new(entropy);
    let st = status::status(&reg, &s.job_uri, &SystemClock, &retry).await?;
    print!("{}", render(&st));
    println!("elapsed: {:.2}s", t0.elapsed().as_secs_f64());
    println!("job: {}", s.job_uri);
    Ok(if st.succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn validate(a: &SpecArgs, offline: bool) -> anyhow::Result<ExitCode> {
    println!("checking {}", a.spec.display());
    let spec = match Spec::load(&a.spec, &a.overrides()) {
        Ok(s) => s,
        Err(errs) => {
            println!("  ✗ spec: {} error(s)", errs.0.len());
            for e in &errs.0 {
                println!("      {e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    println!("  ✓ spec parses; every field is known and well-typed");
    println!(
        "  ✓ input: {} pattern(s), format {:?}",
        spec.input.uris.len(),
        spec.input.format
    );
    for (i, idxs) in spec.phases().iter().enumerate() {
        let names: Vec<&str> = idxs.iter().map(|&s| spec.stages[s].name.as_str()).collect();
        println!(
            "  ✓ phase p{i:02}: {}",
            if names.is_empty() {
                "(copy)".into()
            } else {
                names.join(" → ")
            }
        );
    }
    println!(
        "  ✓ output: {} ({:?})",
        spec.output.uri, spec.output.compression
    );
    if offline {
        return Ok(ExitCode::SUCCESS);
    }
    let rt = runtime()?;
    rt.block_on(async {
        let reg = Registry::new(spec.s3.clone());
        match crate::coordinator::plan::plan(&spec, &reg).await {
            Ok(p) => {
                println!(
                    "  ✓ inputs: {} files, {} bytes",
                    p.files.len(),
                    p.input_bytes()
                );
                let cols: Vec<String> = p.phases[0]
                    .input_schema
                    .fields()
                    .iter()
                    .map(|f| format!("{}: {}", f.name(), f.data_type()))
                    .collect();
                println!("  ✓ input columns: {}", cols.join(", "));
                for ph in &p.phases {
                    println!("  ✓ {}: {} tasks", ph.name, ph.tasks);
                }
                let cols: Vec<&str> = p
                    .phases
                    .last()
                    .map(|l| {
                        l.output_schema
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                println!("  ✓ output columns: {}", cols.join(", "));
                Ok(ExitCode::SUCCESS)
            }
            Err(PlanError::Spec(errs)) => {
                println!("  ✗ {} error(s)", errs.0.len());
                for e in &errs.0 {
                    println!("      {e}");
                }
                Ok(ExitCode::from(2))
            }
            Err(e) => {
                println!("  ✗ {e}");
                Ok(ExitCode::from(1))
            }
        }
    })
}
