//! One attempt's result as the phase executors hand it to `task::run`: what it
//! produced, or why it failed, and whether that failure is worth another attempt.
//! Below both `task` (leases, commits) and `executor` (what a phase kind computes),
//! so neither imports the other's types in a loop.
use super::pipeline::PipelineError;
use crate::protocol::io::ProtoError;
use crate::protocol::records::{OutputFile, TaskStats};

/// What an attempt produced before committing.
pub(crate) struct Produced {
    pub outputs: Vec<OutputFile>,
    pub rejects: Vec<OutputFile>,
    /// Side table files by stage.
    pub tables: Vec<crate::protocol::records::TableFile>,
    pub stats: TaskStats,
    /// Dedup: keys object (map) or decisions object (reduce).
    pub shuffle: Option<OutputFile>,
    /// Near-duplicate record steps: labels changed.
    pub changed: Option<u64>,
}

pub(crate) enum Attempt {
    Done(Box<Produced>),
    /// Failed: retried up to `max_attempts` or failed for good, as the error says.
    Failed(TaskError),
    Cancelled,
}

/// Why an attempt failed. [`TaskError::is_retryable`] decides whether the failure
/// counts towards `job.max_attempts` (and the task is offered again) or fails the
/// task at once; the message is what the commit record's `error` says.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("the task's worker was lost {0} times (killed or out of memory)")]
    LostTooOften(u32),
    #[error("task manifest {phase}/{task} is missing")]
    ManifestMissing { phase: String, task: String },
    #[error("apply task {0} has no map task")]
    NoMapTask(String),
    #[error("phase {0} has no dedup plan")]
    NoDedupPlan(String),
    #[error("upstream task {phase}/{task} failed: {error}")]
    UpstreamFailed {
        phase: String,
        task: String,
        error: String,
    },
    #[error("upstream task {phase}/{task} is not committed")]
    UpstreamNotCommitted { phase: String, task: String },
    /// An upstream file this job may not read (`JobPaths::check_file`).
    #[error(transparent)]
    StaleInput(crate::protocol::ForeignFile),
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The pipeline panicked outside the operators' guard (the panic's message).
    #[error("{0}")]
    Panicked(String),
    #[error(transparent)]
    Dedup(#[from] crate::dedup::DedupError),
    #[error("{0}")]
    Finalize(String),
    /// The output format's writer cannot be had (a build without its feature).
    #[error(transparent)]
    Output(crate::io::write::WriteError),
}

impl TaskError {
    /// Whether another attempt may succeed. Not when the task's worker was lost too
    /// often, an upstream task failed, an input changed since planning (rereading
    /// will not bring the planned version back) or the plan does not fit the task.
    pub fn is_retryable(&self) -> bool {
        match self {
            TaskError::LostTooOften(_)
            | TaskError::ManifestMissing { .. }
            | TaskError::NoMapTask(_)
            | TaskError::NoDedupPlan(_)
            | TaskError::UpstreamFailed { .. }
            | TaskError::StaleInput(_) => false,
            TaskError::Pipeline(PipelineError::Read(e)) if e.is_fatal() => false,
            // A worker built without the output's writer: another worker may have it.
            TaskError::Output(_) => true,
            TaskError::Dedup(e) => e.is_retryable(),
            TaskError::Pipeline(PipelineError::Op(e)) => e.retryable,
            TaskError::Pipeline(PipelineError::Write(e)) => e.is_retryable(),
            TaskError::Proto(e) => e.is_retryable(),
            TaskError::UpstreamNotCommitted { .. }
            | TaskError::Pipeline(_)
            | TaskError::Panicked(_)
            | TaskError::Finalize(_) => true,
        }
    }
}
