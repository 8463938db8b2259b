//! The benchmark suite behind `mdf bench`: each benchmark measures one part of mdf on
//! this machine and returns a report whose `Display` is the markdown table that goes
//! to docs/PERFORMANCE.md. Benchmarks print nothing themselves (the CLI prints the
//! report) and never touch a real job's store: they work in a scratch directory or
//! in memory.
//!
//! - [`fleet`]: the fleet simulator, mdf's protocol at 10,000 workers on simulated S3.
//! - [`protocol`]: requests per task and the protocol's overhead on the local store.
//! - [`text`]: language identification, main-text extraction, the URL filter, MinHash.
//! - [`extract`]: main-text extraction scored per source on public benchmarks.
//! - [`images`]: the image kernels on one core.
//! - [`dedup`]: the exact-dedup shuffle on one core, without the store.
//! - [`fasttext`]: fastText prediction, and lid.176 beside the built-in identifier.
//! - [`semantic`]: semantic dedup's similarity kernels on one core.
pub mod dedup;
pub mod extract;
pub mod fasttext;
pub mod fleet;
pub mod images;
pub mod protocol;
pub mod semantic;
pub mod text;

pub use dedup::{DedupBench, DedupReport, dedup_shuffle};
pub use extract::{ExtractSources, extract_sources};
pub use fasttext::{FastTextReport, fasttext};
pub use fleet::{FleetBench, FleetReport, fleet};
pub use images::{ImagesReport, images};
pub use protocol::{ProtocolBench, ProtocolReport, protocol};
pub use text::{
    ExtractReport, ExtractSpeed, LangidReport, MinhashReport, UrlFilterReport, extract_quality,
    extract_speed, langid_accuracy, langid_dump, minhash, url_filter,
};

/// Why a benchmark could not run. Each message is whole (it names its cause), so the
/// variants carry no separate `source`.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{}: {error}", path.display())]
    Io {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    /// The benchmark's input is not what it expects.
    #[error("{0}")]
    Input(String),
    /// A step of mdf itself failed (submitting, running a worker, a pipeline, a
    /// shuffle section); `what` names the step.
    #[error("{what}: {error}")]
    Step {
        what: &'static str,
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The benchmark's own job finished without succeeding.
    #[error("the benchmark job did not succeed")]
    JobFailed,
}

impl BenchError {
    /// `map_err(BenchError::io(path))` for a file system call on `path`.
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> BenchError {
        let path = path.to_path_buf();
        move |error| BenchError::Io { path, error }
    }

    /// `map_err(BenchError::step("what"))` for any error of a step of mdf.
    pub(crate) fn step<E: Into<Box<dyn std::error::Error + Send + Sync>>>(
        what: &'static str,
    ) -> impl FnOnce(E) -> BenchError {
        move |e| BenchError::Step {
            what,
            error: e.into(),
        }
    }
}

/// Peak resident memory of this process (VmHWM), in MB.
pub(crate) fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The spec of a benchmark job: `text_length` over the JSONL files `input` (a glob)
/// into `output`, a task per file, with `job` as extra `job:` entries
/// (`poll_millis: 200`).
pub(crate) fn text_length_job(
    name: &str,
    input: &str,
    output: &str,
    job: &str,
) -> Result<crate::spec::Spec, BenchError> {
    let job = match job.trim() {
        "" => String::new(),
        j => format!(", {j}"),
    };
    let text = format!(
        "name: {name}\ninput: {{uris: [\"{input}\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{output}\"}}\njob: {{max_files_per_task: 1{job}}}\n"
    );
    crate::spec::Spec::from_text(
        &text,
        name,
        &crate::spec::Overrides::default(),
        &|_| None,
        &crate::ops::Catalog,
    )
    .map_err(BenchError::step("the benchmark spec"))
}
