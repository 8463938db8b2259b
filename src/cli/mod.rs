//! The `mdf` command line: a thin layer over the library. `main` → `run` →
//! `anyhow::Result<ExitCode>`; exit 0 = success, 1 = the job failed or is incomplete,
//! 2 = bad usage or configuration (refused before anything was written).
mod backends;
pub mod bench;
pub mod inspect;
pub mod report;

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
use std::io::IsTerminal;
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
    /// Only errors and results: no progress line, no warnings.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Log lines as JSON objects (for cloud log collectors); also MDF_LOG_FORMAT=json.
    #[arg(long, global = true, value_parser = ["text", "json"], env = "MDF_LOG_FORMAT", default_value = "text")]
    log_format: String,
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

/// Where `mdf submit` starts workers for the job it wrote.
#[derive(Args, Debug, Clone)]
struct BackendArgs {
    /// local: N `mdf worker` processes here (none: plan only); aws-batch: array jobs
    /// through the AWS Batch API; k8s: an Indexed Job manifest (applied with --apply).
    #[arg(long, default_value = "local", value_parser = ["local", "aws-batch", "k8s"])]
    backend: String,
    /// CPU workers (local default 0 = plan only; aws-batch and k8s default 1).
    #[arg(long)]
    workers: Option<u32>,
    /// aws-batch: the CPU job queue.
    #[arg(long)]
    queue: Option<String>,
    /// aws-batch: the CPU job definition (name, name:revision or ARN).
    #[arg(long, default_value = "mdf-worker")]
    job_definition: String,
    /// GPU workers (`mdf worker --resources gpu`), for specs with GPU stages.
    #[arg(long, default_value_t = 0)]
    gpu_workers: u32,
    /// aws-batch: the GPU job queue.
    #[arg(long)]
    gpu_queue: Option<String>,
    /// aws-batch: the GPU job definition.
    #[arg(long, default_value = "mdf-worker-gpu")]
    gpu_job_definition: String,
    /// k8s: the CPU worker image (default: the template's).
    #[arg(long)]
    image: Option<String>,
    /// k8s: the GPU worker image.
    #[arg(long)]
    gpu_image: Option<String>,
    /// k8s: the namespace.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// k8s: apply the manifest with `kubectl apply -f -` instead of printing it.
    #[arg(long)]
    apply: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a job on this machine: submit it and run in-process workers until done.
    ///
    /// Examples:
    ///   mdf run examples/quickstart.yaml
    ///   mdf run examples/commoncrawl.yaml -i 'data/*.warc.gz' -o out/cc --workers 8
    ///   mdf run spec.yaml --set stages.length_filter.params.min_words=50 --reuse .mdf/jobs/OLD
    #[command(verbatim_doc_comment)]
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
    ///
    /// Example (then start workers anywhere with `mdf worker --job URI`):
    ///   mdf submit examples/commoncrawl.yaml --job-root s3://bucket/mdf \
    ///     -i 's3://commoncrawl/crawl-data/CC-MAIN-2024-51/segments/*/warc/*.warc.gz' -o s3://bucket/cc
    #[command(verbatim_doc_comment)]
    Submit {
        #[command(flatten)]
        spec: SpecArgs,
        #[arg(long)]
        job_root: String,
        #[arg(long)]
        job_id: Option<String>,
        #[arg(long, value_name = "JOB_URI")]
        reuse: Option<String>,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Lease and run tasks of a job until it is complete.
    ///
    /// Examples:
    ///   mdf worker --job s3://bucket/mdf/jobs/cc-1a2b3c4d5e6f
    ///   mdf worker --job s3://bucket/mdf/jobs/cc-1a2b3c4d5e6f --resources gpu
    /// SIGTERM (a spot interruption notice) stops leasing and hands leases back.
    #[command(verbatim_doc_comment)]
    Worker {
        /// The job URI printed by submit.
        #[arg(long)]
        job: String,
        /// Stop after this many task attempts.
        #[arg(long)]
        max_tasks: Option<u64>,
        #[arg(long)]
        worker_id: Option<String>,
        /// Resource class: cpu (CPU phases only) or gpu (GPU phases; CPU phases too
        /// with --cpu-work).
        #[arg(long, default_value = "cpu")]
        resources: String,
        /// A GPU worker also takes CPU tasks when no GPU task is ready.
        #[arg(long)]
        cpu_work: bool,
        /// Exit with an error once the store has been unavailable this long (seconds);
        /// by default a worker waits out any outage, backing off up to 30 s a try.
        #[arg(long, value_name = "SECS")]
        give_up_after: Option<u64>,
    },
    /// Show a job's progress: tasks per phase, the operator table, requests and cost.
    ///
    /// Examples:
    ///   mdf status .mdf/jobs/quickstart-b9f945eeb7bf
    ///   mdf status s3://bucket/mdf/jobs/cc-1a2b3c4d5e6f --watch 10
    ///   mdf status JOB --json | jq .succeeded
    #[command(verbatim_doc_comment)]
    Status {
        job: String,
        /// Machine-readable output with a top-level "complete".
        #[arg(long)]
        json: bool,
        /// Refresh every N seconds until the job is complete.
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "5")]
        watch: Option<u64>,
    },
    /// Check a spec (and, unless --offline, its inputs) and print a checklist.
    ///
    /// Examples:
    ///   mdf validate examples/commoncrawl.yaml
    ///   mdf validate spec.yaml --offline --set job.task_bytes=256MiB
    #[command(verbatim_doc_comment)]
    Validate {
        #[command(flatten)]
        spec: SpecArgs,
        /// Do not list inputs or read schemas.
        #[arg(long)]
        offline: bool,
    },
    /// A dry run: inputs, task split, phases, requests and memory; writes nothing.
    ///
    /// Lists the inputs, every phase (dedup reduce/apply included) and its tasks, the
    /// requests the job will make with their cost bound, and a worker's memory.
    ///
    /// Example:
    ///   mdf plan examples/commoncrawl.yaml -i 's3://commoncrawl/crawl-data/CC-MAIN-2024-51/segments/*/warc/*.warc.gz'
    #[command(verbatim_doc_comment)]
    Plan {
        #[command(flatten)]
        spec: SpecArgs,
    },
    /// Sample records of a finished output (or its rejects), pretty-printed.
    ///
    /// Examples:
    ///   mdf inspect out/commoncrawl --limit 3
    ///   mdf inspect out/commoncrawl --rejects --where reason=duplicate
    ///   mdf inspect s3://bucket/cc --where url~wikipedia
    #[command(verbatim_doc_comment)]
    Inspect {
        /// The output URI (the directory holding _manifest.json).
        uri: String,
        /// Show rejected records (with their reason, operator and detail) instead.
        #[arg(long)]
        rejects: bool,
        #[arg(long, default_value_t = 5)]
        limit: usize,
        /// Keep records where COL=VALUE (equal) or COL~TEXT (contains); repeatable.
        #[arg(long = "where", value_parser = inspect::parse_cond)]
        conds: Vec<inspect::Cond>,
        /// Strings longer than this many characters are shortened.
        #[arg(long, default_value_t = 300)]
        width: usize,
    },
    /// Write a self-contained HTML report of a job (committed tasks only).
    ///
    /// The funnel through the operators, rejects by reason, throughput over time,
    /// duplicate-cluster sizes, the score and length distributions the operators
    /// recorded, and samples of kept and rejected records. No external scripts,
    /// fonts or images: the file can be mailed or attached to a ticket.
    ///
    /// Examples:
    ///   mdf report .mdf/jobs/quickstart-b9f945eeb7bf -o report.html
    ///   mdf report s3://bucket/mdf/jobs/cc-1a2b3c4d5e6f -o cc.html --samples 10
    #[command(verbatim_doc_comment)]
    Report {
        job: String,
        /// Where to write the HTML file.
        #[arg(short, long, default_value = "report.html")]
        output: PathBuf,
        /// Kept records shown, and rejected records per reason.
        #[arg(long, default_value_t = 5)]
        samples: usize,
    },
    /// Print a shell completion script: `mdf completions bash > /etc/bash_completion.d/mdf`.
    Completions { shell: clap_complete::Shell },
    /// List the operators a spec can use; with a NAME, every param of that operator
    /// with its type, default and meaning.
    Ops {
        /// An operator, e.g. gopher_quality.
        name: Option<String>,
        /// Print the whole reference as Markdown (docs/OPERATORS.md).
        #[arg(long, conflicts_with = "name")]
        markdown: bool,
    },
    /// Benchmarks that print a table.
    Bench {
        #[command(subcommand)]
        which: bench::Bench,
    },
}

/// `-q`: no progress output.
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    QUIET.store(cli.quiet, Ordering::Relaxed);
    let default = match cli.verbose {
        0 if cli.quiet => "error",
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if cli.log_format == "json" {
        fmt.json().init();
    } else {
        fmt.init();
    }
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
    Spec::load(&a.spec, &a.overrides(), &crate::ops::Catalog).map_err(|e| {
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
        Cmd::Ops { markdown: true, .. } => {
            print!("{}", crate::ops::reference_markdown());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Ops {
            name: Some(name), ..
        } => match crate::ops::describe(&name) {
            Some(s) => {
                print!("{s}");
                Ok(ExitCode::SUCCESS)
            }
            None => {
                eprintln!(
                    "mdf: unknown operator {name:?}, expected one of: {}",
                    crate::ops::REGISTRY
                        .iter()
                        .map(|d| d.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                Ok(ExitCode::from(2))
            }
        },
        Cmd::Ops { name: None, .. } => {
            for d in crate::ops::REGISTRY {
                match d.feature.filter(|_| d.build.is_none()) {
                    None => println!("{:<20} {}", d.name, d.summary),
                    Some(f) => println!("{:<20} {} (needs --features {f})", d.name, d.summary),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Validate { spec, offline } => validate(&spec, offline),
        Cmd::Plan { spec } => plan_dry_run(&spec),
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "mdf", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Inspect {
            uri,
            rejects,
            limit,
            conds,
            width,
        } => inspect::run(&uri, rejects, limit, &conds, width),
        Cmd::Submit {
            spec,
            job_root,
            job_id,
            reuse,
            backend,
        } => {
            let spec = match load_spec(&spec) {
                Ok(s) => s,
                Err(c) => return Ok(c),
            };
            if let Err(e) = backends::check(&backend, &job_root, &spec) {
                eprintln!("mdf: {e}");
                return Ok(ExitCode::from(2));
            }
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
                        backends::start(&backend, &reg, &s.job_uri, &s.job_id).await
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
            cpu_work,
            give_up_after,
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
        Cmd::Report {
            job,
            output,
            samples,
        } => {
            let rt = runtime()?;
            rt.block_on(async {
                let reg = Registry::new(Default::default());
                let retry = Retry::new(Entropy::from_os());
                let s = status::status(&reg, &job, &SystemClock, &retry).await?;
                let smp = report::samples(&reg, &s.output, samples, 100_000).await;
                let html = report::render(&s, &smp);
                std::fs::write(&output, html)
                    .with_context(|| format!("writing {}", output.display()))?;
                println!(
                    "wrote {} ({})",
                    output.display(),
                    if s.complete {
                        "job complete"
                    } else {
                        "job not complete: committed tasks so far"
                    }
                );
                Ok(ExitCode::SUCCESS)
            })
        }
        Cmd::Status { job, json, watch } => {
            let rt = runtime()?;
            rt.block_on(async {
                let reg = Registry::new(Default::default());
                let retry = Retry::new(Entropy::from_os());
                loop {
                    let s = status::status(&reg, &job, &SystemClock, &retry).await?;
                    if watch.is_some() && std::io::stdout().is_terminal() {
                        print!("\x1b[2J\x1b[H"); // clear the screen
                    }
                    if json {
                        println!("{}", serde_json::to_string_pretty(&s)?);
                    } else {
                        print!("{}", render(&s));
                    }
                    match watch {
                        Some(secs) if !s.complete => {
                            tokio::time::sleep(std::time::Duration::from_secs(secs.max(1))).await
                        }
                        _ => break,
                    }
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
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!(
            "{} job {}: {} tasks over {} input files, {} workers",
            if s.created { "submitted" } else { "resuming" },
            s.job_id,
            s.tasks,
            s.input_files,
            workers
        );
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    on_signals(shutdown.clone());
    let mut handles = Vec::new();
    for i in 0..workers {
        let reg = reg.clone();
        let opts = WorkerOptions {
            job_uri: s.job_uri.clone(),
            max_tasks: None,
            worker_id: Some(format!("local-{}-{i}", entropy.hex_id(3))),
            // In-process workers do every kind of task.
            gpu: true,
            cpu_work: true,
            clock: Arc::new(SystemClock),
            entropy: Entropy::from_os(),
            shutdown: shutdown.clone(),
            give_up_after: None,
        };
        handles.push(tokio::spawn(async move { worker::run(&reg, opts).await }));
    }
    // Progress: a line refreshed in place on a terminal, a plain line every 10 s
    // otherwise (cloud logs); one LIST per phase each time.
    let progress = {
        let (reg, uri) = (reg.clone(), s.job_uri.clone());
        let tty = std::io::stderr().is_terminal();
        let quiet = QUIET.load(Ordering::Relaxed);
        tokio::spawn(async move {
            if quiet {
                return;
            }
            let retry = Retry::new(Entropy::from_os());
            let every = std::time::Duration::from_secs(if tty { 1 } else { 10 });
            loop {
                tokio::time::sleep(every).await;
                if let Ok(p) = status::progress(&reg, &uri, &retry).await {
                    let line = status::progress_line(&p, t0.elapsed());
                    if tty {
                        eprint!("\r\x1b[2K{line}");
                    } else {
                        eprintln!("{line}");
                    }
                }
            }
        })
    };
    for h in handles {
        match h.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("mdf: worker error: {e}"),
            Err(e) => eprintln!("mdf: worker panicked: {e}"),
        }
    }
    progress.abort();
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    let retry = Retry::new(entropy);
    // Every task accounted for by key: a lagging LIST must not turn a finished job
    // into a failed run.
    let st = status::status_by_key(&reg, &s.job_uri, &SystemClock, &retry).await?;
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
    let spec = match Spec::load(&a.spec, &a.overrides(), &crate::ops::Catalog) {
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
    let names: Vec<&str> = spec.stages.iter().map(|s| s.name.as_str()).collect();
    println!(
        "  ✓ stages: {}",
        if names.is_empty() {
            "(none: copy)".into()
        } else {
            names.join(" → ")
        }
    );
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
                    println!(
                        "  ✓ {}: {} tasks: {}",
                        ph.name,
                        ph.tasks,
                        phase_line(&spec, ph)
                    );
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

/// One line about a planned phase: its kind, tasks and stages.
fn phase_line(spec: &Spec, ph: &crate::protocol::records::PhasePlan) -> String {
    use crate::protocol::records::PhaseKind;
    let stages: Vec<&str> = ph
        .stages
        .iter()
        .map(|&i| spec.stages[i].name.as_str())
        .collect();
    let what = match ph.kind {
        PhaseKind::Map if stages.is_empty() => "copy".to_string(),
        PhaseKind::Map => stages.join(" → "),
        PhaseKind::Reduce => match ph.dedup.as_ref().map(|d| &d.params.kind) {
            Some(k) if !k.is_exact() => format!(
                "near-dup candidates ({}), one task per band-key range (after every p{:02} task)",
                near_kind(k),
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
            _ => format!(
                "dedup reduce, one task per key range (after every p{:02} task)",
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
        },
        PhaseKind::Propagate => {
            let s = ph.dedup.as_ref().map_or(0, |d| d.step);
            format!(
                "near-dup components, round {}: labels by {} (skipped once labels stop changing)",
                s.div_ceil(2),
                if s % 2 == 1 { "record" } else { "bucket" }
            )
        }
        PhaseKind::Apply if stages.is_empty() => "dedup apply".to_string(),
        PhaseKind::Apply => format!("dedup apply → {}", stages.join(" → ")),
    };
    format!("{what}{}", if ph.gpu { " (GPU)" } else { "" })
}

fn near_kind(k: &crate::protocol::records::DedupPhaseKind) -> String {
    use crate::protocol::records::DedupPhaseKind as DedupKind;
    match k {
        DedupKind::Exact => "exact".into(),
        DedupKind::Minhash {
            bands,
            rows,
            threshold,
        } => format!("minhash {bands}×{rows}, Jaccard ≥ {threshold}"),
        DedupKind::Phash { radius } => format!("phash, Hamming ≤ {radius}"),
    }
}

fn plan_dry_run(a: &SpecArgs) -> anyhow::Result<ExitCode> {
    use crate::protocol::records::PhaseKind;
    let spec = match Spec::load(&a.spec, &a.overrides(), &crate::ops::Catalog) {
        Ok(s) => s,
        Err(errs) => {
            eprintln!("mdf: {errs}");
            return Ok(ExitCode::from(2));
        }
    };
    let rt = runtime()?;
    rt.block_on(async {
        let reg = Registry::new(spec.s3.clone());
        let p = match crate::coordinator::plan::plan(&spec, &reg).await {
            Ok(p) => p,
            Err(PlanError::Spec(errs)) => {
                eprintln!("mdf: {errs}");
                return Ok(ExitCode::from(2));
            }
            Err(e) => {
                eprintln!("mdf: {e}");
                return Ok(ExitCode::from(1));
            }
        };
        let bytes = p.input_bytes();
        println!("plan for {} (nothing written)", a.spec.display());
        println!();
        println!(
            "inputs: {} files, {:.1} MB, format {:?}",
            p.files.len(),
            bytes as f64 / 1e6,
            spec.input.format
        );
        for f in p.files.iter().take(5) {
            println!("  {} ({} bytes)", f.uri, f.size);
        }
        if p.files.len() > 5 {
            println!("  ... and {} more", p.files.len() - 5);
        }
        let sizes: Vec<u64> = {
            let mut v: Vec<u64> = p.tasks[0]
                .iter()
                .map(|t| t.inputs.iter().map(|s| s.end - s.start).sum())
                .collect();
            v.sort_unstable();
            v
        };
        if let (Some(lo), Some(hi)) = (sizes.first(), sizes.last()) {
            println!(
                "task split: {} tasks of {:.1}–{:.1} MB (median {:.1} MB; job.task_bytes {} MB)",
                sizes.len(),
                *lo as f64 / 1e6,
                *hi as f64 / 1e6,
                sizes[sizes.len() / 2] as f64 / 1e6,
                spec.job.task_bytes >> 20
            );
        }
        println!();
        // Requests: a map task ~8 (docs/PERFORMANCE.md: 7.8 amortised, with listing),
        // a reduce task 2 ranged GETs per map task, an apply task 2 per reduce task;
        // the finalize task one GET per commit.
        let mut requests = 0u64;
        let mut tasks_total = 0u64;
        println!("{:<9} {:>7} {:>10}  what", "phase", "tasks", "requests");
        for (i, ph) in p.phases.iter().enumerate() {
            let per = match ph.kind {
                PhaseKind::Map => 8,
                PhaseKind::Reduce | PhaseKind::Propagate => 8 + 2 * p.phases[i - 1].tasks,
                PhaseKind::Apply => 8 + 2 * p.phases[i - 1].tasks,
            };
            requests += per * ph.tasks;
            tasks_total += ph.tasks;
            println!(
                "{:<9} {:>7} {:>10}  {}",
                ph.name,
                ph.tasks,
                per * ph.tasks,
                phase_line(&spec, ph)
            );
        }
        requests += tasks_total + 10;
        println!(
            "{:<9} {:>7} {:>10}  one GET per commit record, publish, manifest",
            "finalize",
            1,
            tasks_total + 10
        );
        println!();
        println!(
            "requests: about {requests} (at most {:.2} $ at S3's published prices, all counted as PUTs at 0.005 $/1k)",
            requests as f64 * 0.005 / 1000.0
        );
        // Memory per worker: the pipeline's bounded channels (reader → stages →
        // writer), a row group being written, the dedup reduce buffer, and assets.
        let j = &spec.job;
        let pipeline = (2 * j.channel_batches + 3) as u64 * j.batch_bytes as u64;
        let row_group = spec.output.row_group_rows as u64 * 2048;
        let dedup = p
            .phases
            .iter()
            .filter_map(|ph| ph.dedup.as_ref())
            .map(|d| d.params.memory_bytes)
            .max()
            .unwrap_or(0);
        let mut assets = 0u64;
        for stage in crate::ops::stage_assets(&spec) {
            for asset in stage {
                if let Ok((store, u)) = reg.resolve(&asset.uri)
                    && let Ok(m) = object_store::ObjectStoreExt::head(store.as_ref(), &u.path).await
                {
                    assets += m.size;
                }
            }
        }
        // Image stages share one process-wide decode cache.
        let images = spec
            .stages
            .iter()
            .any(|s| matches!(s.op.as_str(), "image_quality" | "image_hash"));
        let cache = if images {
            crate::ops::image_decode_cache_bytes() as u64
        } else {
            0
        };
        let total = pipeline + row_group + dedup + assets * 4 + cache;
        println!(
            "memory per worker: at most about {:.0} MB = pipeline buffers {:.0} MB + row group {:.0} MB{}{} + operator assets ~{:.0} MB (4× their {:.1} MB on disk) + 64 MB",
            (total + (64 << 20)) as f64 / 1e6,
            pipeline as f64 / 1e6,
            row_group as f64 / 1e6,
            if dedup > 0 {
                format!(" + dedup reduce buffer {:.0} MB", dedup as f64 / 1e6)
            } else {
                String::new()
            },
            if cache > 0 {
                format!(" + image decode cache {:.0} MB", cache as f64 / 1e6)
            } else {
                String::new()
            },
            (assets * 4) as f64 / 1e6,
            assets as f64 / 1e6
        );
        Ok(ExitCode::SUCCESS)
    })
}
