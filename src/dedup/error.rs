//! The dedup subsystem's errors, typed so that callers decide from the kind, never
//! from the text: [`DedupError::is_retryable`] says whether another attempt of the
//! task can succeed. Messages name the object or column concerned; several of them
//! end up in commit records (`error`), so their wording is part of what users see.
use arrow_schema::DataType;

/// Why a dedup task (reduce, label step, apply's decisions, a map task's keys object)
/// could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum DedupError {
    /// A task this one reads failed for good: no retry can change that.
    #[error("upstream task {phase}/{task} failed: {error}")]
    UpstreamFailed {
        phase: String,
        task: String,
        error: String,
    },
    /// The label steps ran out of rounds before the clusters were final.
    #[error(
        "near-duplicate clusters failed to converge in max_rounds = {max_rounds} rounds ({changed} labels still changing): raise params.max_rounds of stage {stage:?}"
    )]
    NotConverged {
        max_rounds: u32,
        changed: u64,
        stage: String,
    },
    #[error("upstream task {phase}/{task} is not committed")]
    NotCommitted { phase: String, task: String },
    /// The task does not fit the job's plan (a reduce phase without a dedup plan, a
    /// task id that names no partition, a committed task without its object).
    #[error("{0}")]
    Plan(String),
    /// The earlier job of `params.against` cannot be read as planned.
    #[error("{0}")]
    Against(String),
    /// A committed file that this job may not read (protocol `check_file`).
    #[error(transparent)]
    Stale(#[from] crate::protocol::ForeignFile),
    #[error("reading {uri}: {source}")]
    Read {
        uri: String,
        source: object_store::Error,
    },
    #[error("writing {uri}: {source}")]
    Write { uri: String, source: std::io::Error },
    /// A shuffle object that does not decode.
    #[error("{uri}: {source}")]
    Format { uri: String, source: FormatError },
    /// Local disk: spilled runs and staged objects.
    #[error("{what}: {source}")]
    Local {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{what}: wrote {written} of {len} bytes")]
    ShortWrite {
        what: &'static str,
        written: u64,
        len: u64,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Proto(#[from] crate::protocol::io::ProtoError),
    /// A blocking computation panicked (the panic's message).
    #[error("{0}")]
    Panicked(String),
    #[error("cancelled")]
    Cancelled,
}

impl DedupError {
    /// Whether another attempt of the task may succeed: false when an upstream task
    /// failed or the clusters did not converge (the task fails at once); anything
    /// else, such as a storage error, counts towards `job.max_attempts`.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            DedupError::UpstreamFailed { .. } | DedupError::NotConverged { .. }
        )
    }

    pub(crate) fn upstream_failed(
        phase: &str,
        task: &str,
        rec: &crate::protocol::records::CommitRecord,
    ) -> Self {
        DedupError::UpstreamFailed {
            phase: phase.to_string(),
            task: task.to_string(),
            error: rec.error.clone().unwrap_or_default(),
        }
    }

    pub(crate) fn local(what: impl Into<String>, source: std::io::Error) -> Self {
        DedupError::Local {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn format(uri: &str, source: FormatError) -> Self {
        DedupError::Format {
            uri: uri.to_string(),
            source,
        }
    }

    /// A blocking computation that did not finish: its panic's message, never
    /// tokio's task id (which differs on every attempt and would defeat
    /// `job.max_attempts`).
    pub(crate) fn joined(e: tokio::task::JoinError) -> Self {
        DedupError::Panicked(crate::panic::join_error("a dedup computation", e))
    }
}

/// A shuffle object's bytes that are not what the layout says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("offsets: expected 16 bytes, got {0}")]
    OffsetsLength(usize),
    #[error("offsets out of order: {0} > {1}")]
    OffsetsOrder(u64, u64),
    #[error("not a dedup shuffle object of this version")]
    Magic,
    #[error("has {found} sections, expected {expected}")]
    Sections { found: u64, expected: u64 },
    #[error("{len} bytes is not a whole number of {size}-byte entries")]
    PartialEntry { len: usize, size: usize },
    #[error("object shorter than its header")]
    ShortHeader,
    #[error("section past the end of the object")]
    PastEnd,
}

/// Why a batch's key entries could not be read (map side).
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no string id column")]
    NoIdColumn,
    #[error("no column {0:?}")]
    NoRankColumn(String),
    #[error("no key column {0:?}")]
    NoKeyColumn(String),
    #[error("key column of type {0} does not fit the dedup kind")]
    KeyType(DataType),
    #[error("perceptual hash {0:?} is not 16 hex digits")]
    BadHash(String),
    #[error("record id {0:?} is not a hex id")]
    BadId(String),
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),
}

/// Defined with the stage's params in the operator layer.
pub use crate::ops::dedup::ParamsError;
