//! The errors of operators: a stage's failure ([`OpError`], naming the stage), and
//! what an operator reports while binding to a schema ([`SchemaError`], naming the
//! param and column), loading its assets ([`LoadError`]) or processing a batch
//! ([`ProcessError`]). Per-record problems are never errors: they are rejects.
use arrow_schema::{ArrowError, DataType, Schema};

/// An error that fails the whole batch (and so the task attempt); per-record problems
/// are rejects instead.
#[derive(Debug, thiserror::Error)]
#[error("operator {operator}: {message}")]
pub struct OpError {
    pub operator: String,
    pub message: String,
    /// Whether another attempt may succeed: false when the operator's own failure is
    /// deterministic (a wrong column, an Arrow error on the same batch), so the task
    /// fails at once instead of spending `job.max_attempts` on it.
    pub retryable: bool,
}

impl OpError {
    /// The error of stage `stage`, retried (the cautious default).
    pub fn new(stage: &str, e: impl std::fmt::Display) -> OpError {
        OpError {
            operator: stage.to_string(),
            message: e.to_string(),
            retryable: true,
        }
    }

    /// The error of stage `stage` from its operator's [`ProcessError`].
    pub fn process(stage: &str, e: &ProcessError) -> OpError {
        OpError {
            retryable: e.is_retryable(),
            ..OpError::new(stage, e)
        }
    }
}

/// Why an operator's output fields do not fit the input schema (reported at
/// planning, at the param's path: `stages[2].params.field: ...`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// A column the operator reads is not in the input.
    #[error("params.{param}: no column {column:?}{hint}")]
    MissingColumn {
        param: String,
        column: String,
        /// The rest of the message: ` in the input (columns: id, text)`, or which
        /// stage would add the column.
        hint: String,
    },
    /// A column it reads has another type.
    #[error("params.{param}: column {column:?} is {found}, {expected}")]
    WrongType {
        param: String,
        column: String,
        found: DataType,
        /// `expected a string`, `not numeric`, ...
        expected: String,
    },
    /// A column the operator writes (and does not rewrite) is already in the input.
    #[error("the input already has a {0:?} column")]
    Clash(String),
    /// An added field is named like an input column the operator does not replace.
    #[error("adds column {0:?}, which already exists")]
    Exists(String),
    /// A check written before this type (the dedup stage's); its message starts
    /// with the param path.
    #[error("{0}")]
    Other(String),
}

impl SchemaError {
    /// `params.x` of a missing column, listing the input's columns.
    pub fn missing(param: &str, column: &str, what: &str, input: &Schema) -> SchemaError {
        let cols: Vec<&str> = input.fields().iter().map(|f| f.name().as_str()).collect();
        SchemaError::MissingColumn {
            param: param.to_string(),
            column: column.to_string(),
            hint: format!("{what} in the input (columns: {})", cols.join(", ")),
        }
    }
}

/// Why an operator could not process a batch: the batch fails (and with it the task
/// attempt, which is retried), unlike a record's reject.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("no column {0:?}")]
    MissingColumn(String),
    #[error("column {column:?} is not {expected}")]
    WrongType {
        column: String,
        expected: &'static str,
    },
    /// `process` before `load` (the worker loads every asset first).
    #[error("{0} used before its assets were loaded")]
    NotLoaded(&'static str),
    #[error(transparent)]
    Arrow(#[from] ArrowError),
    /// A model failed to run.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Why a model (of an ONNX operator) could not be loaded or run; the message names
/// the param (`params.model (models/clip.onnx): ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// No usable ONNX Runtime library (`params.library`, `ORT_DYLIB_PATH`, the CUDA
    /// provider).
    #[error("{0}")]
    Runtime(String),
    /// The model does not load, was not loaded, or does not fit its params (input
    /// type, shape, `dim`, `precision`).
    #[error("{0}")]
    Model(String),
    /// An inference call failed or returned a shape the params do not expect.
    #[error("{0}")]
    Inference(String),
}

impl ProcessError {
    /// Whether processing the same batch again may succeed: only an inference call's
    /// failure (a device out of memory, a driver hiccup) may pass; a missing or
    /// mistyped column, an unloaded operator or model, a model that does not fit its
    /// params or an Arrow error repeats on every attempt.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ProcessError::Model(ModelError::Inference(_)))
    }
}

/// Why an operator could not take its fetched assets.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A list or model file that does not parse.
    #[error("{param} ({uri}): {message}")]
    Asset {
        param: String,
        uri: String,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Model(#[from] ModelError),
}
