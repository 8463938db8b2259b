//! `output.format: lance` (docs/PROTOCOL.md §6). A task of the last phase writes its
//! records as Lance data files into a staging dataset inside its attempt directory —
//! never visible to a reader — and stages `fragments.json`, the fragment metadata of
//! those files. The commit record lists the data files (and the fragments file) like
//! any staged output. The finalize task copies the committed tasks' data files into
//! `<output>/data/` and commits all their fragments to the dataset in one Lance
//! transaction (an overwrite: a retried finalize commits the same fragments again),
//! then lets Lance remove older versions. A zombie attempt's files stay in its staging
//! directory, which no commit names, and the janitor deletes them.
use super::{CommitCtx, Sink, WriteCtx, WriteError, Writer};
use crate::protocol::records::OutputFile;
use crate::store::{Registry, Uri};
use arrow_array::RecordBatch;
use lance::dataset::transaction::{Operation, Transaction};
use lance::dataset::{InsertBuilder, WriteMode, WriteParams};
use lance_table::format::Fragment;
use object_store::ObjectStoreExt;
use std::collections::HashMap;

/// The staged fragment metadata of one attempt.
pub const FRAGMENTS: &str = "fragments.json";

/// A Lance URI for one of our URIs (local paths as plain paths).
pub fn lance_uri(u: &Uri) -> String {
    let s = u.to_uri_string();
    match s.strip_prefix("file://") {
        Some(p) => p.to_string(),
        None => s,
    }
}

/// Lance's object-store options from the standard AWS variables mdf honours too
/// (endpoint overrides for S3-compatible stores).
pub fn storage_options() -> Option<lance::io::ObjectStoreParams> {
    let mut o = HashMap::new();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(ep) = var("AWS_ENDPOINT_URL_S3").or_else(|| var("AWS_ENDPOINT_URL")) {
        if ep.starts_with("http://") {
            o.insert("allow_http".to_string(), "true".to_string());
        }
        o.insert("aws_endpoint".to_string(), ep);
    }
    if let Some(r) = var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")) {
        o.insert("aws_region".to_string(), r);
    }
    if o.is_empty() {
        return None;
    }
    Some(lance::io::ObjectStoreParams {
        storage_options_accessor: Some(std::sync::Arc::new(
            lance::io::StorageOptionsAccessor::with_static_options(o),
        )),
        ..Default::default()
    })
}

/// Writes one attempt's records as Lance fragments in `<attempt>/lance/`.
pub struct LanceWriter {
    registry: Registry,
    handle: tokio::runtime::Handle,
    attempt: Uri,
    target_bytes: u64,
    buffered: Vec<RecordBatch>,
    buffered_bytes: u64,
    fragments: Vec<Fragment>,
}

impl LanceWriter {
    pub fn new(
        registry: Registry,
        handle: tokio::runtime::Handle,
        attempt: Uri,
        target_bytes: u64,
    ) -> Self {
        LanceWriter {
            registry,
            handle,
            attempt,
            target_bytes,
            buffered: vec![],
            buffered_bytes: 0,
            fragments: vec![],
        }
    }

    fn dataset(&self) -> Uri {
        self.attempt.child("lance")
    }

    fn err(&self, e: impl std::fmt::Display) -> WriteError {
        WriteError::Storage {
            uri: self.dataset().to_uri_string(),
            message: e.to_string(),
        }
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.buffered_bytes += batch.get_array_memory_size() as u64;
        self.buffered.push(batch.clone());
        if self.buffered_bytes >= self.target_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered batches as data files (one or more fragments).
    fn flush(&mut self) -> Result<(), WriteError> {
        if self.buffered.is_empty() {
            return Ok(());
        }
        let batches = std::mem::take(&mut self.buffered);
        self.buffered_bytes = 0;
        let uri = lance_uri(&self.dataset());
        let params = WriteParams {
            mode: WriteMode::Create,
            store_params: storage_options(),
            ..Default::default()
        };
        let tx: Transaction = self
            .handle
            .block_on(async {
                InsertBuilder::new(uri.as_str())
                    .with_params(&params)
                    .execute_uncommitted(batches)
                    .await
            })
            .map_err(|e| self.err(e))?;
        match tx.operation {
            Operation::Overwrite { fragments, .. } | Operation::Append { fragments } => {
                self.fragments.extend(fragments)
            }
            other => return Err(self.err(format!("unexpected Lance operation {other:?}"))),
        }
        Ok(())
    }

    /// The staged data files (rows each) and the fragments file, for the commit record.
    pub fn finish(mut self) -> Result<Vec<OutputFile>, WriteError> {
        self.flush()?;
        let data = self.dataset().child("data");
        let mut out = Vec::new();
        for f in &self.fragments {
            let rows = f.physical_rows.unwrap_or(0) as u64;
            for (i, file) in f.files.iter().enumerate() {
                out.push(OutputFile {
                    uri: data.child(&file.path).to_uri_string(),
                    // A fragment's rows are counted once, on its first file.
                    rows: if i == 0 { rows } else { 0 },
                    bytes: file.file_size_bytes.get().map(|n| n.get()).unwrap_or(0),
                    blake3: String::new(),
                });
            }
        }
        let body = serde_json::to_vec(&self.fragments).map_err(|e| self.err(e))?;
        let furi = self.attempt.child(FRAGMENTS);
        let store = self.registry.open(&furi).map_err(|e| self.err(e))?;
        let len = body.len() as u64;
        let hash = blake3::hash(&body).to_hex().to_string();
        self.handle
            .block_on(store.put(&furi.path, body.into()))
            .map_err(|e| self.err(e))?;
        out.push(OutputFile {
            uri: furi.to_uri_string(),
            rows: 0,
            bytes: len,
            blake3: hash,
        });
        Ok(out)
    }
}

/// The finalize step of a Lance output: every committed task's fragments (their data
/// files already copied to `<output>/data/`) committed as one overwrite; returns the
/// dataset version.
pub async fn commit(
    output: &Uri,
    schema: &arrow_schema::Schema,
    fragments: Vec<Fragment>,
) -> Result<u64, WriteError> {
    let commit_err = |message: String| WriteError::Commit {
        format: "Lance",
        uri: lance_uri(output),
        message,
    };
    let schema =
        lance::datatypes::Schema::try_from(schema).map_err(|e| commit_err(e.to_string()))?;
    // Id 0 means "unassigned": the commit numbers the fragments afresh.
    let fragments = fragments
        .into_iter()
        .map(|mut f| {
            f.id = 0;
            f
        })
        .collect();
    let op = Operation::Overwrite {
        schema,
        fragments,
        config_upsert_values: None,
        initial_bases: None,
    };
    let uri = lance_uri(output);
    let mut b = lance::dataset::CommitBuilder::new(uri.as_str());
    if let Some(p) = storage_options() {
        b = b.with_store_params(p);
    }
    let ds = b
        .execute(Transaction::new(0, op, None))
        .await
        .map_err(|e| commit_err(e.to_string()))?;
    let version = ds.version().version;
    // Older versions (an earlier run of an overwritten output) and their files go.
    if let Err(e) = ds
        .cleanup_old_versions(chrono::TimeDelta::zero(), Some(true), Some(false))
        .await
    {
        tracing::warn!(dataset = %uri, error = %e, "could not remove old Lance versions");
    }
    Ok(version)
}

impl Sink for LanceWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        LanceWriter::write(self, batch)
    }
    fn finish(self: Box<Self>) -> Result<Vec<OutputFile>, WriteError> {
        LanceWriter::finish(*self)
    }
    /// A failed attempt's Lance files stay in its staging directory (the janitor's).
    fn abort(self: Box<Self>) {}
}

/// `output.format: lance`: a Lance dataset, committed in one transaction at the end.
pub struct Lance;

#[async_trait::async_trait]
impl Writer for Lance {
    fn name(&self) -> &'static str {
        "lance"
    }
    fn open(&self, ctx: WriteCtx) -> Result<Box<dyn Sink>, WriteError> {
        Ok(Box::new(LanceWriter::new(
            ctx.registry,
            ctx.handle,
            ctx.dir,
            ctx.target_bytes,
        )))
    }
    /// Data files go to `<output>/data/` under their own (unique) names, where the
    /// commit references them; `fragments.json` is read at the commit, not published.
    fn published_name(&self, _task: &str, _n: usize, staged: &str) -> Option<String> {
        staged
            .ends_with(".lance")
            .then(|| format!("data/{}", staged.rsplit('/').next().unwrap_or_default()))
    }
    fn dataset_dir(&self) -> Option<&'static str> {
        Some("data")
    }
    /// Every committed task's fragments (their data files already published to
    /// `<output>/data/`) committed as one overwrite.
    async fn commit(&self, ctx: CommitCtx<'_>) -> Result<Option<u64>, WriteError> {
        let mut fragments = Vec::new();
        for f in ctx.staged.iter().filter(|f| f.uri.ends_with(FRAGMENTS)) {
            let bad = |e: &dyn std::fmt::Display| WriteError::Invalid {
                uri: f.uri.clone(),
                message: e.to_string(),
            };
            let u = Uri::parse(&f.uri).map_err(|e| bad(&e))?;
            let s = ctx.registry.open(&u).map_err(|e| bad(&e))?;
            let body = ctx
                .retry
                .run(|| async { s.get(&u.path).await?.bytes().await })
                .await
                .map_err(|e| WriteError::Storage {
                    uri: f.uri.clone(),
                    message: e.to_string(),
                })?;
            let mut v: Vec<Fragment> = serde_json::from_slice(&body).map_err(|e| bad(&e))?;
            fragments.append(&mut v);
        }
        let version = commit(ctx.output, ctx.schema, fragments).await?;
        Ok(Some(version))
    }
}
