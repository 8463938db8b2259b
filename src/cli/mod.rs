//! The `mdf` command line: a thin layer over the library. `main` → `run` →
//! `anyhow::Result<ExitCode>`; exit 0 = success, 1 = the job failed or is incomplete,
//! 2 = bad usage or configuration (refused before anything was written).
//!
//! One file per subcommand family; each handler parses nothing and decides nothing
//! beyond exit codes: it calls the library and prints what it returns.
mod bench;
mod ops;
mod plan;
mod run;
mod show;
mod submit;
mod worker;

use crate::coordinator::plan::PlanError;
use crate::coordinator::submit::SubmitError;
use crate::report::output;
use crate::spec::{Overrides, Spec};
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
    /// Only the first N records of the input (input.limit): one task over the first
    /// files, for trying a spec on a huge input.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
}

impl SpecArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            input: self.input.clone(),
            output: self.output.clone(),
            set: self
                .set
                .iter()
                .cloned()
                .chain(self.limit.map(|n| format!("input.limit={n}")))
                .collect(),
        }
    }
}

/// Where `mdf submit` starts workers for the job it wrote.
#[derive(Args, Debug, Clone)]
struct BackendArgs {
    /// local: N `mdf worker` processes here (none: plan only); aws-batch: array jobs
    /// through the AWS Batch API; fleet: an EC2 Auto Scaling group of spot instances
    /// tagged with the job and scaled to --workers; k8s: an Indexed Job manifest
    /// (applied with --apply).
    #[arg(long, default_value = "local", value_parser = clap::builder::PossibleValuesParser::new(crate::launch::names()))]
    backend: String,
    /// CPU workers (local default 0 = plan only; aws-batch, fleet and k8s default 1;
    /// fleet: instances, at most the group's max size).
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
    /// fleet: the CPU workers' Auto Scaling group (terraform/modules/fleet).
    #[arg(long, default_value = "mdf-cpu")]
    group: String,
    /// fleet: the GPU workers' Auto Scaling group.
    #[arg(long, default_value = "mdf-gpu")]
    gpu_group: String,
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
        /// In-process workers (default: sized as `mdf worker` sizes its task slots: the
        /// cores this process may use over max(1, the largest stage resources.cpu)).
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
        backend: Box<BackendArgs>,
    },
    /// Lease and run tasks of a job until it is complete.
    ///
    /// Examples:
    ///   mdf worker --job s3://bucket/mdf/jobs/cc-1a2b3c4d5e6f
    ///   mdf worker --job s3://bucket/mdf/jobs/cc-1a2b3c4d5e6f --resources gpu
    ///   mdf worker --fleet-group mdf-cpu       (on an instance of that group)
    /// SIGTERM stops leasing and hands leases back. With --spot-notices (implied by
    /// --fleet-group) a spot interruption notice stops leasing at once and hands the
    /// running task back 30 s before the instance is reclaimed, unless it finished;
    /// a rebalance recommendation stops leasing once a task has run. Stopped by a
    /// notice with the job incomplete, the worker exits 75 (outside a fleet).
    #[command(verbatim_doc_comment)]
    Worker {
        /// The job URI printed by submit (with --fleet-group: default, the group's
        /// mdf-job tag).
        #[arg(long, required_unless_present = "fleet_group")]
        job: Option<String>,
        /// Run as an instance of this EC2 Auto Scaling group: work on the job its
        /// `mdf-job` tag names, then on the next one it is tagged with; when there is
        /// none, terminate this instance and shrink the group by one.
        #[arg(long, value_name = "GROUP")]
        fleet_group: Option<String>,
        /// Watch the instance metadata service for spot interruption notices and
        /// rebalance recommendations (AWS_EC2_METADATA_SERVICE_ENDPOINT overrides
        /// its address).
        #[arg(long)]
        spot_notices: bool,
        /// With --fleet-group: terminate this instance and shrink its group by one,
        /// without working (the instance's failure handler runs this).
        #[arg(long, requires = "fleet_group")]
        leave: bool,
        /// Stop after this many task attempts.
        #[arg(long)]
        max_tasks: Option<u64>,
        /// Tasks this process runs at once (default: the cores it may use, which
        /// honours taskset and a container's CPU quota, over max(1, the job's largest
        /// stage resources.cpu), capped by a cgroup memory limit at 1 GiB a slot;
        /// 1 for --resources gpu or with --max-tasks). Containers that reserve CPU
        /// without a quota (a Kubernetes request, an AWS Batch VCPU) set MDF_SLOTS.
        #[arg(long, value_name = "N", env = "MDF_SLOTS")]
        slots: Option<usize>,
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
        /// The job root `run`/`submit` would use: the output prefix is checked as
        /// they check it (empty, or a finished job's output with overwrite).
        #[arg(long, default_value = ".mdf")]
        job_root: String,
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
        #[arg(long = "where", value_parser = output::parse_cond)]
        conds: Vec<output::Cond>,
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
        /// An operator (e.g. gopher_quality) or a preset (e.g. open_nsfw).
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
    kernel_threads();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mdf: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The process's one kernel thread pool, shared by every task slot: a thread per core
/// this process may use (`worker::slots::cores`, which honours taskset and cgroup
/// quotas), named `mdf-kernel-N`.
fn kernel_threads() {
    let mut b = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("mdf-kernel-{i}"));
    // RAYON_NUM_THREADS, when set, still sizes it (rayon reads it when no count is given).
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        b = b.num_threads(crate::worker::slots::cores());
    }
    // Fails only if the pool was already built: then it is used as it is.
    let _ = b.build_global();
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("mdf-io")
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
        eprintln!("mdf: stopping: no new tasks, handing leases back (interrupt again to exit now)");
        flag.store(true, Ordering::SeqCst);
        // A second signal exits at once: held leases expire after job.lease_ttl_secs
        // and other workers (or a rerun) take the tasks over; nothing is lost.
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        eprintln!("mdf: exiting now; leases held expire and their tasks are taken over");
        std::process::exit(130);
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
        Cmd::Ops { name, markdown } => ops::run(name, markdown),
        Cmd::Validate {
            spec,
            offline,
            job_root,
        } => plan::validate(&spec, offline, &job_root),
        Cmd::Plan { spec } => plan::plan_dry_run(&spec),
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
        } => show::inspect(&uri, rejects, limit, &conds, width),
        Cmd::Submit {
            spec,
            job_root,
            job_id,
            reuse,
            backend,
        } => submit::run(&spec, job_root, job_id, reuse, &backend),
        Cmd::Worker {
            job,
            fleet_group,
            spot_notices,
            leave,
            max_tasks,
            slots,
            worker_id,
            resources,
            cpu_work,
            give_up_after,
        } => worker::run(worker::Args {
            job,
            fleet_group,
            spot_notices,
            leave,
            max_tasks,
            slots,
            worker_id,
            resources,
            cpu_work,
            give_up_after,
        }),
        Cmd::Report {
            job,
            output,
            samples,
        } => show::report(&job, &output, samples),
        Cmd::Status { job, json, watch } => show::status(&job, json, watch),
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
            let n = workers
                .unwrap_or_else(|| run::default_workers(&spec))
                .max(1);
            let rt = runtime()?;
            rt.block_on(run::run_local(spec, n, job_root, job_id, reuse))
        }
        Cmd::Bench { which } => bench::run(which),
    }
}
