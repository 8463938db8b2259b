//! Parquet input (and the staged output of earlier phases). Reads through the async
//! object store with ranged requests; a byte-range task owns the row groups that start
//! in its range. Columns are conformed to the planned schema (renames, safe casts);
//! a file that cannot be conformed is rejected whole with the reason.
use super::{Item, ReadCtx, ReadError, SliceStats, file_reject};
use crate::protocol::records::InputSlice;
use crate::records::{file_key, record_id};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use std::ops::Range;
use std::sync::Arc;

/// [`AsyncFileReader`] over any object store.
pub struct ObjectReader {
    pub store: Arc<dyn ObjectStore>,
    pub path: Path,
    pub size: u64,
    /// The planned version: every read (the footer, the coalesced column chunks) is
    /// pinned to it, so a file rewritten after planning fails with `Precondition`
    /// instead of being read under the old size and offsets.
    pub etag: Option<String>,
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        Box::pin(async move {
            let r = match &self.etag {
                None => self.store.get_range(&self.path, range).await,
                Some(etag) => {
                    let opts = object_store::GetOptions {
                        range: Some(range.into()),
                        if_match: Some(etag.clone()),
                        ..Default::default()
                    };
                    match self.store.get_opts(&self.path, opts).await {
                        Ok(g) => g.bytes().await,
                        Err(e) => Err(e),
                    }
                }
            };
            r.map_err(|e| ParquetError::External(Box::new(e)))
        })
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        Box::pin(async move {
            let r = match &self.etag {
                None => self.store.get_ranges(&self.path, &ranges).await,
                // Pinned: coalesced like get_ranges, each request If-Match the plan.
                Some(etag) => pinned_ranges(self.store.as_ref(), &self.path, etag, &ranges).await,
            };
            r.map_err(|e| ParquetError::External(Box::new(e)))
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        Box::pin(async move {
            let size = self.size;
            let md = ParquetMetaDataReader::new()
                .with_prefetch_hint(Some(64 << 10))
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(md))
        })
    }
}

/// The read error for a storage failure under the Parquet reader: the planned version
/// gone (`input_changed`), or a storage error to retry.
fn store_error(
    slice: &InputSlice,
    e: &(dyn std::error::Error + Send + Sync + 'static),
) -> ReadError {
    match e.downcast_ref::<object_store::Error>() {
        Some(object_store::Error::Precondition { .. }) => ReadError::Changed {
            uri: slice.uri.clone(),
            message: e.to_string(),
        },
        _ => ReadError::Storage {
            uri: slice.uri.clone(),
            message: e.to_string(),
        },
    }
}

/// Reads `ranges` of the object's version `etag`: ranges less than 1 MiB apart are
/// fetched as one request (as object_store's `get_ranges` does), up to 10 at a time,
/// each a GET with `If-Match`.
async fn pinned_ranges(
    store: &dyn ObjectStore,
    path: &Path,
    etag: &str,
    ranges: &[Range<u64>],
) -> object_store::Result<Vec<Bytes>> {
    const GAP: u64 = 1 << 20;
    let mut sorted: Vec<Range<u64>> = ranges.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for r in sorted {
        match merged.last_mut() {
            Some(m) if r.start <= m.end.saturating_add(GAP) => m.end = m.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let fetched: Vec<Bytes> =
        futures::stream::iter(merged.iter().cloned().map(|range| async move {
            let opts = object_store::GetOptions {
                range: Some(range.into()),
                if_match: Some(etag.to_string()),
                ..Default::default()
            };
            store.get_opts(path, opts).await?.bytes().await
        }))
        .buffered(10)
        .try_collect()
        .await?;
    Ok(ranges
        .iter()
        .map(|r| {
            let i = merged.partition_point(|m| m.start <= r.start) - 1;
            let m = &merged[i];
            fetched[i].slice((r.start - m.start) as usize..(r.end - m.start) as usize)
        })
        .collect())
}

/// Types a planned schema uses for a Parquet column (large/view strings → Utf8).
pub fn normalise_type(dt: &DataType) -> DataType {
    match dt {
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

/// Why a Parquet file's footer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FooterError {
    #[error(transparent)]
    Store(#[from] object_store::Error),
    #[error(transparent)]
    Parquet(#[from] ParquetError),
}

/// Why a file's columns do not give the planned schema (the file is rejected).
#[derive(Debug, thiserror::Error)]
pub enum ConformError {
    #[error("column {0:?} is missing from this file")]
    Missing(String),
    #[error("column {column:?} is {found}, expected {expected}")]
    Type {
        column: String,
        found: DataType,
        expected: DataType,
    },
    #[error("column {column:?}: {source}")]
    Cast {
        column: String,
        source: arrow_schema::ArrowError,
    },
    #[error(transparent)]
    Batch(#[from] arrow_schema::ArrowError),
}

/// The columns of a Parquet file, normalised, for planning.
pub async fn read_columns(
    store: Arc<dyn ObjectStore>,
    path: &Path,
) -> Result<Vec<(String, DataType)>, FooterError> {
    let size = store.head(path).await?.size;
    let reader = ObjectReader {
        store,
        path: path.clone(),
        size,
        etag: None,
    };
    let b = ParquetRecordBatchStreamBuilder::new(reader).await?;
    Ok(b.schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), normalise_type(f.data_type())))
        .collect())
}

pub fn read(
    ctx: &ReadCtx,
    slice: &InputSlice,
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    let storage = |e: String| ReadError::Storage {
        uri: slice.uri.clone(),
        message: e,
    };
    let (store, u) = ctx
        .registry
        .resolve(&slice.uri)
        .map_err(|e| storage(e.to_string()))?;
    let reader = ObjectReader {
        store,
        path: u.path.clone(),
        size: slice.size,
        etag: slice.etag.clone(),
    };
    let mut stats = SliceStats::default();
    let reject_file = |reason: &str, e: String, out: &mut dyn FnMut(Item) -> bool| {
        out(Item::Rejects(vec![file_reject(slice, 0, reason, e)]));
        SliceStats {
            rejected: 1,
            ..Default::default()
        }
    };
    let builder = match ctx
        .handle
        .block_on(ParquetRecordBatchStreamBuilder::new(reader))
    {
        Ok(b) => b,
        Err(ParquetError::External(e)) => {
            if let Some(object_store::Error::NotFound { .. }) =
                e.downcast_ref::<object_store::Error>()
            {
                return Ok(reject_file("input_missing", e.to_string(), out));
            }
            return Err(store_error(slice, &*e));
        }
        Err(e) => return Ok(reject_file("corrupt_input", e.to_string(), out)),
    };
    let md = builder.metadata().clone();
    let mut selected = Vec::new();
    let mut first_rows = Vec::new();
    let mut row = 0u64;
    for (i, rg) in md.row_groups().iter().enumerate() {
        let c0 = rg.column(0);
        let start = c0
            .dictionary_page_offset()
            .unwrap_or(c0.data_page_offset())
            .max(0) as u64;
        if start >= slice.start && start < slice.end {
            selected.push(i);
            first_rows.push(row);
        }
        row += rg.num_rows().max(0) as u64;
    }
    if selected.is_empty() {
        return Ok(stats);
    }
    let file_schema = builder.schema().clone();
    let plan = match conform_plan(&file_schema, schema, ctx.assign_ids) {
        Ok(p) => p,
        Err(e) => return Ok(reject_file("schema_mismatch", e.to_string(), out)),
    };
    let mut stream = match builder
        .with_row_groups(selected.clone())
        .with_batch_size(ctx.batch_rows)
        .build()
    {
        Ok(s) => s,
        Err(e) => return Ok(reject_file("corrupt_input", e.to_string(), out)),
    };
    let key = file_key(&slice.uri);
    // Row numbers: batches arrive in row-group order; track the position within.
    let rg_rows: Vec<u64> = selected
        .iter()
        .map(|&i| md.row_group(i).num_rows().max(0) as u64)
        .collect();
    let (mut rg_idx, mut in_rg) = (0usize, 0u64);
    loop {
        if ctx.cancelled() {
            return Err(ReadError::Cancelled);
        }
        let next = ctx.handle.block_on(stream.next());
        let batch = match next {
            None => break,
            Some(Ok(b)) => b,
            Some(Err(ParquetError::External(e))) => return Err(store_error(slice, &*e)),
            Some(Err(e)) => {
                let at = first_rows.get(rg_idx).copied().unwrap_or(0) + in_rg;
                out(Item::Rejects(vec![file_reject(
                    slice,
                    at,
                    "corrupt_input",
                    e.to_string(),
                )]));
                stats.rejected += 1;
                break;
            }
        };
        let n = batch.num_rows();
        let ids = ctx.assign_ids.then(|| {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                while rg_idx < rg_rows.len() && in_rg >= rg_rows[rg_idx] {
                    rg_idx += 1;
                    in_rg = 0;
                }
                v.push(record_id(
                    &key,
                    first_rows.get(rg_idx).copied().unwrap_or(0) + in_rg,
                ));
                in_rg += 1;
            }
            v
        });
        match apply_plan(&plan, &batch, schema, ids) {
            Ok(b) => {
                stats.records += n as u64;
                if !out(Item::Batch(b)) {
                    return Err(ReadError::Cancelled);
                }
            }
            Err(e) => {
                out(Item::Rejects(vec![file_reject(
                    slice,
                    0,
                    "schema_mismatch",
                    e.to_string(),
                )]));
                stats.rejected += n as u64;
            }
        }
    }
    Ok(stats)
}

/// For each target column after `id` (or every column when ids exist): the file
/// column index it comes from.
struct Plan {
    sources: Vec<usize>,
}

fn conform_plan(file: &Schema, target: &Schema, assign_ids: bool) -> Result<Plan, ConformError> {
    let skip = usize::from(assign_ids);
    let mut sources = Vec::new();
    for f in target.fields().iter().skip(skip) {
        let src_name = if assign_ids {
            crate::records::input_column(f)
        } else {
            f.name().as_str()
        };
        let idx = file
            .index_of(src_name)
            .map_err(|_| ConformError::Missing(src_name.to_string()))?;
        let ft = file.field(idx).data_type();
        if normalise_type(ft) != *f.data_type() && !arrow_cast::can_cast_types(ft, f.data_type()) {
            return Err(ConformError::Type {
                column: src_name.to_string(),
                found: ft.clone(),
                expected: f.data_type().clone(),
            });
        }
        sources.push(idx);
    }
    Ok(Plan { sources })
}

fn apply_plan(
    plan: &Plan,
    batch: &RecordBatch,
    target: &SchemaRef,
    ids: Option<Vec<String>>,
) -> Result<RecordBatch, ConformError> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    if let Some(ids) = ids {
        cols.push(Arc::new(StringArray::from(ids)));
    }
    let offset = cols.len();
    for (i, &src) in plan.sources.iter().enumerate() {
        let want: &Field = target.field(i + offset);
        let col = batch.column(src);
        cols.push(if col.data_type() == want.data_type() {
            col.clone()
        } else {
            arrow_cast::cast(col, want.data_type()).map_err(|source| ConformError::Cast {
                column: want.name().clone(),
                source,
            })?
        });
    }
    Ok(RecordBatch::try_new(target.clone(), cols)?)
}

/// `format: parquet`, and the staged output of earlier phases.
pub struct Parquet;

#[async_trait::async_trait]
impl super::Reader for Parquet {
    fn name(&self) -> &'static str {
        "parquet"
    }

    /// Declared, or the first file's footer.
    async fn columns(
        &self,
        registry: &crate::store::Registry,
        uris: &[&str],
        declared: Option<&[(String, DataType)]>,
    ) -> Result<Vec<(String, DataType)>, super::ColumnsError> {
        if let Some(cols) = declared {
            return Ok(cols.to_vec());
        }
        let first = uris.first().copied().unwrap_or_default();
        let (store, u) = registry
            .resolve(first)
            .map_err(|e| super::ColumnsError::Storage(e.to_string()))?;
        read_columns(store, &u.path)
            .await
            .map_err(|e| super::ColumnsError::Spec {
                field: "input.uris",
                message: format!("cannot read the Parquet footer of {first}: {e}"),
            })
    }

    /// By row group: a range owns the row groups that start in it.
    fn splittable(&self, _uri: &str) -> bool {
        true
    }

    fn read_slice(
        &self,
        ctx: &ReadCtx,
        slice: &InputSlice,
        schema: &SchemaRef,
        out: &mut dyn FnMut(Item) -> bool,
    ) -> Result<SliceStats, ReadError> {
        read(ctx, slice, schema, out)
    }
}
