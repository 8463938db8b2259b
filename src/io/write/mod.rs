//! Writers stage a task attempt's records as files in its attempt directory (never
//! visible to a reader of the output), and, for formats that need one, commit the
//! published files as one dataset at the end of the job (the finalize task). The
//! commit record lists every staged file; publishing copies the listed files to the
//! names the writer gives them; a zombie attempt's files stay in its staging
//! directory, which no commit names, and the janitor deletes them.
//!
//! One [`Writer`] per `output.format`, registered by name in [`WRITERS`]; the rejects
//! and intermediate phases are always Parquet. Adding an output format is one file
//! here, one line in [`WRITERS`] (and its name in `spec::OutputFormat`).
#[cfg(feature = "iceberg")]
pub mod iceberg;
#[cfg(feature = "iceberg")]
pub mod iceberg_glue;
pub mod jsonl;
#[cfg(feature = "lance")]
pub mod lance;
pub mod parquet;
pub mod tokens;
pub mod webdataset;

use crate::protocol::io::Retry;
use crate::protocol::records::OutputFile;
use crate::spec::OutputFormat;
use crate::store::{Registry, Uri};
use ::parquet::file::properties::WriterProperties;
use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The store failed under the writer: another attempt writes afresh.
    #[error("writing {uri}: {message}")]
    Storage { uri: String, message: String },
    /// What the writer was given does not fit it (a batch of another schema, a
    /// staged file it cannot read back): another attempt would fail the same way.
    #[error("writing {uri}: {message}")]
    Invalid { uri: String, message: String },
    /// The job's output format is not built into this mdf.
    #[error("this mdf was built without {format} support")]
    Unsupported { format: &'static str },
    /// The job-end commit of a dataset failed.
    #[error("committing the {format} dataset {uri}: {message}")]
    Commit {
        format: &'static str,
        uri: String,
        message: String,
    },
}

impl WriteError {
    /// Another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            WriteError::Invalid { .. } | WriteError::Unsupported { .. }
        )
    }
}

/// What one attempt's writer needs.
#[derive(Clone)]
pub struct WriteCtx {
    pub registry: Registry,
    pub handle: tokio::runtime::Handle,
    /// The attempt's staging directory.
    pub dir: Uri,
    /// The planned schema of every batch (never inferred from a batch).
    pub schema: SchemaRef,
    pub props: WriterProperties,
    /// A new file (fragment) is started once the current one reaches this size.
    pub target_bytes: u64,
    /// The task whose attempt this is.
    pub task: String,
    /// `output.tokens` (the token shard writers).
    pub tokens: Option<crate::spec::TokenShards>,
    /// `output.jsonl` (the JSON Lines writer).
    pub jsonl: Option<crate::spec::JsonlSpec>,
    /// `output.webdataset` (the WebDataset writer).
    pub webdataset: Option<crate::spec::WebDatasetSpec>,
    /// When the job was submitted (ms since the epoch): what a writer stamps on
    /// records (Dolma's `added`), the same for every attempt.
    pub created_ms: u64,
}

/// One attempt's writer; runs on a blocking thread.
pub trait Sink: Send {
    /// Appends a batch of the planned schema.
    fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError>;
    /// Closes the staged files; returns every file for the commit record.
    fn finish(self: Box<Self>) -> Result<Vec<OutputFile>, WriteError>;
    /// Abandons the attempt (its files stay staged for the janitor at worst).
    fn abort(self: Box<Self>);
}

/// What a dataset commit at the end of a job sees.
pub struct CommitCtx<'a> {
    pub registry: &'a Registry,
    pub retry: &'a Retry,
    /// The output prefix, its files already published under [`Writer::published_name`].
    pub output: &'a Uri,
    /// The planned output schema.
    pub schema: &'a Schema,
    /// The staged files of the last phase's committed tasks (as their commit records
    /// list them).
    pub staged: Vec<&'a OutputFile>,
    /// The data files as published (URI, rows, bytes), in name order.
    pub published: Vec<Published>,
    /// The job's URI (what a table's snapshot is stamped with).
    pub job_uri: &'a str,
    /// `output.iceberg` (the table and its catalog).
    pub iceberg: Option<&'a crate::spec::IcebergSpec>,
}

/// A published data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub uri: String,
    pub rows: u64,
    pub bytes: u64,
}

/// One output format.
#[async_trait::async_trait]
pub trait Writer: Send + Sync {
    /// The format's name in specs (`output.format`).
    fn name(&self) -> &'static str;

    /// Opens one attempt's writer of the last phase.
    fn open(&self, ctx: WriteCtx) -> Result<Box<dyn Sink>, WriteError>;

    /// The published name (relative to the output prefix) of the `n`th staged output
    /// file of a last-phase task, or `None` for a staged file that is not published
    /// (read back by [`commit`](Writer::commit) instead).
    fn published_name(&self, task: &str, n: usize, staged: &str) -> Option<String>;

    /// Where a writer that manages its own dataset under the output prefix puts the
    /// published data files: finalize only lists that folder (to skip files already
    /// published) and never sweeps the output prefix, whose other files (versions,
    /// older data) are the dataset's. `None`: the output prefix holds exactly the
    /// published files and `_manifest.json`, and finalize sweeps anything else.
    fn dataset_dir(&self) -> Option<&'static str> {
        None
    }

    /// Whether the output holds the records themselves (readable back as the planned
    /// schema); the token shard writers hold only a token column's ids.
    fn writes_records(&self) -> bool {
        true
    }

    /// Checks at submit, before any task starts, that the output can take the planned
    /// schema (an existing table's schema, a catalog that answers).
    async fn check(
        &self,
        _output: &crate::spec::OutputSpec,
        _reg: &Registry,
        _schema: &arrow_schema::Schema,
    ) -> Result<(), String> {
        Ok(())
    }

    /// The job-end commit, after every file is published and before the manifest is
    /// written; idempotent (a retried finalize commits again). Returns a version to
    /// log, if the format has one.
    async fn commit(&self, _ctx: CommitCtx<'_>) -> Result<Option<u64>, WriteError> {
        Ok(None)
    }
}

/// Every writer, by name.
pub static WRITERS: &[&dyn Writer] = &[
    &parquet::Parquet,
    &jsonl::Jsonl,
    &webdataset::WebDataset,
    &tokens::MEGATRON,
    &tokens::TOKENS,
    #[cfg(feature = "lance")]
    &lance::Lance,
    #[cfg(feature = "iceberg")]
    &iceberg::Iceberg,
];

/// The writer registered as `name`.
pub fn find(name: &str) -> Option<&'static dyn Writer> {
    WRITERS.iter().copied().find(|w| w.name() == name)
}

/// The writer of an output format. Lance without the feature is refused when the
/// spec is validated; a job planned elsewhere gets the error here.
pub fn writer(format: OutputFormat) -> Result<&'static dyn Writer, WriteError> {
    find(format.name()).ok_or(WriteError::Unsupported {
        format: format.name(),
    })
}
