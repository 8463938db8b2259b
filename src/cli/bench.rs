//! `mdf bench protocol`: measures the job protocol's object-store requests per task
//! and its time overhead against running the same tasks' pipelines in one process
//! without leases or commits.
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum Bench {
    /// Requests per task and protocol overhead on the local store.
    Protocol {
        #[arg(long, default_value_t = 2000)]
        tasks: usize,
        #[arg(long, default_value_t = 16)]
        workers: usize,
        #[arg(long, default_value_t = 100)]
        records_per_task: usize,
        /// Scratch directory (default: a new temporary directory).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

pub fn run(b: Bench) -> anyhow::Result<ExitCode> {
    match b {
        Bench::Protocol { .. } => anyhow::bail!("not built yet"),
    }
}
