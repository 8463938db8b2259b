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
    if !plan.extra.is_empty() {
        // Planning unions the columns of the first input files only.
        tracing::warn!(
            uri = %slice.uri,
            columns = ?plan.extra,
            "columns the planned input schema does not have are not read; declare input.schema to keep them"
        );
    }
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
        // Each row's number in the file (its id's offset).
        let mut rows = Vec::with_capacity(n);
        for _ in 0..n {
            while rg_idx < rg_rows.len() && in_rg >= rg_rows[rg_idx] {
                rg_idx += 1;
                in_rg = 0;
            }
            rows.push(first_rows.get(rg_idx).copied().unwrap_or(0) + in_rg);
            in_rg += 1;
        }
        let ids = ctx
            .assign_ids
            .then(|| rows.iter().map(|&r| record_id(&key, r)).collect());
        match apply_plan(&plan, &batch, schema, ids) {
            Ok((b, lost)) => {
                if !lost.is_empty() {
                    let mut rejects: Vec<crate::records::Reject> = Vec::new();
                    let mut seen = std::collections::HashSet::new();
                    // Row order, one reject a row (its first column that failed).
                    let mut lost = lost;
                    lost.sort_by_key(|(r, _, _)| *r);
                    for (r, reason, detail) in lost {
                        if seen.insert(r) {
                            let row = rows[r];
                            rejects.push(file_reject(
                                slice,
                                row,
                                reason,
                                format!("row {row}: {detail}"),
                            ));
                        }
                    }
                    stats.rejected += rejects.len() as u64;
                    if !out(Item::Rejects(rejects)) {
                        return Err(ReadError::Cancelled);
                    }
                }
                stats.records += b.num_rows() as u64;
                if b.num_rows() > 0 && !out(Item::Batch(b)) {
                    return Err(ReadError::Cancelled);
                }
            }
            Err(e) => {
                // One reject for the batch's rows (an id of its own: rows before it
                // may be kept), counted once as the reject it is.
                let first = rows.first().copied().unwrap_or(0);
                out(Item::Rejects(vec![super::stream_reject(
                    slice,
                    first,
                    "schema_mismatch",
                    format!("rows {first}..{}: {e}", first + n as u64),
                )]));
                stats.rejected += 1;
            }
        }
    }
    Ok(stats)
}

/// For each target column after `id` (or every column when ids exist): the file
/// column index it comes from; `None` for an input column this file does not have
/// (read as null).
struct Plan {
    sources: Vec<Option<usize>>,
    /// The file's columns the planned schema does not have (files past the ones
    /// planning sampled): they are not read, and the worker says so.
    extra: Vec<String>,
}

/// How a file's columns give the target schema. Input files (`input_file`) may lack a
/// column (another file had it: null here) or have more; the staged files of earlier
/// phases must match exactly.
fn conform_plan(file: &Schema, target: &Schema, input_file: bool) -> Result<Plan, ConformError> {
    let skip = usize::from(input_file);
    let mut sources = Vec::new();
    let mut used = Vec::new();
    for f in target.fields().iter().skip(skip) {
        let src_name = if input_file {
            crate::records::input_column(f)
        } else {
            f.name().as_str()
        };
        let idx = match file.index_of(src_name) {
            Ok(i) => i,
            Err(_) if input_file => {
                sources.push(None);
                continue;
            }
            Err(_) => return Err(ConformError::Missing(src_name.to_string())),
        };
        let ft = file.field(idx).data_type();
        if normalise_type(ft) != *f.data_type() && !arrow_cast::can_cast_types(ft, f.data_type()) {
            return Err(ConformError::Type {
                column: src_name.to_string(),
                found: ft.clone(),
                expected: f.data_type().clone(),
            });
        }
        sources.push(Some(idx));
        used.push(idx);
    }
    let extra = if input_file {
        (0..file.fields().len())
            .filter(|i| !used.contains(i))
            .map(|i| file.field(i).name().clone())
            .collect()
    } else {
        Vec::new()
    };
    Ok(Plan { sources, extra })
}

/// Rows of a batch that a cast could not carry: (row, reject reason, detail).
type Lost = Vec<(usize, &'static str, String)>;

/// The batch in the target schema, and the rows whose value in some column could not
/// be cast to its planned type (invalid UTF-8 in binary read as text, "abc" read as a
/// number): those rows are left out, for the caller to reject; a cast never turns a
/// value into null.
fn apply_plan(
    plan: &Plan,
    batch: &RecordBatch,
    target: &SchemaRef,
    ids: Option<Vec<String>>,
) -> Result<(RecordBatch, Lost), ConformError> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    if let Some(ids) = ids {
        cols.push(Arc::new(StringArray::from(ids)));
    }
    let offset = cols.len();
    let mut lost: Lost = Vec::new();
    for (i, src) in plan.sources.iter().enumerate() {
        let want: &Field = target.field(i + offset);
        let Some(src) = *src else {
            cols.push(arrow_array::new_null_array(
                want.data_type(),
                batch.num_rows(),
            ));
            continue;
        };
        let col = batch.column(src);
        cols.push(if col.data_type() == want.data_type() {
            col.clone()
        } else if col.data_type() == &DataType::Null {
            arrow_array::new_null_array(want.data_type(), batch.num_rows())
        } else {
            let cast =
                arrow_cast::cast(col, want.data_type()).map_err(|source| ConformError::Cast {
                    column: want.name().clone(),
                    source,
                })?;
            // A value that does not survive the cast whole (a fraction cut, a large
            // integer or a decimal rounded, a finer time truncated): cast back and
            // compare (floats by value: -0.0 is 0.0, NaN is NaN).
            let exact = |t: &DataType| t.is_numeric() || t.is_temporal();
            if exact(col.data_type())
                && exact(want.data_type())
                && arrow_cast::can_cast_types(want.data_type(), col.data_type())
            {
                let back = arrow_cast::cast(&cast, col.data_type()).map_err(|source| {
                    ConformError::Cast {
                        column: want.name().clone(),
                        source,
                    }
                })?;
                let same = if col.data_type().is_floating() {
                    let f = |a: &ArrayRef| arrow_cast::cast(a, &DataType::Float64);
                    let (a, b) = (f(col)?, f(&back)?);
                    let (a, b) = (
                        a.as_any()
                            .downcast_ref::<arrow_array::Float64Array>()
                            .expect("float64"),
                        b.as_any()
                            .downcast_ref::<arrow_array::Float64Array>()
                            .expect("float64"),
                    );
                    (0..a.len())
                        .map(|r| {
                            let (x, y) = (a.value(r), b.value(r));
                            Some(x == y || (x.is_nan() && y.is_nan()))
                        })
                        .collect::<arrow_array::BooleanArray>()
                } else {
                    arrow_ord::cmp::not_distinct(col, &back)?
                };
                for r in 0..col.len() {
                    if !same.value(r) && col.is_valid(r) && cast.is_valid(r) {
                        let detail = format!(
                            "column {:?}: {} is not exactly a {}",
                            want.name(),
                            shown(col, r),
                            want.data_type()
                        );
                        lost.push((r, "schema_mismatch", detail));
                    }
                }
            }
            if cast.logical_null_count() > col.logical_null_count() {
                let binary = matches!(
                    col.data_type(),
                    DataType::Binary | DataType::LargeBinary | DataType::BinaryView
                );
                let reason = if binary && want.data_type() == &DataType::Utf8 {
                    "invalid_utf8"
                } else {
                    "schema_mismatch"
                };
                for r in 0..col.len() {
                    if !col.is_null(r) && cast.is_null(r) {
                        let detail = format!(
                            "column {:?} cannot be read as {}: {:?}",
                            want.name(),
                            want.data_type(),
                            shown(col, r)
                        );
                        lost.push((r, reason, detail));
                    }
                }
            }
            cast
        });
    }
    let batch = RecordBatch::try_new(target.clone(), cols)?;
    if lost.is_empty() {
        return Ok((batch, lost));
    }
    let mut keep = vec![true; batch.num_rows()];
    for (r, _, _) in &lost {
        keep[*r] = false;
    }
    let kept =
        arrow_select::filter::filter_record_batch(&batch, &arrow_array::BooleanArray::from(keep))?;
    Ok((kept, lost))
}

/// A value as a reject's detail shows it: text as is (binary lossily), at most 200
/// characters.
fn shown(col: &ArrayRef, row: usize) -> String {
    use arrow_array::cast::AsArray;
    let s = match col.data_type() {
        DataType::Binary => String::from_utf8_lossy(col.as_binary::<i32>().value(row)).into_owned(),
        DataType::LargeBinary => {
            String::from_utf8_lossy(col.as_binary::<i64>().value(row)).into_owned()
        }
        DataType::BinaryView => {
            String::from_utf8_lossy(col.as_binary_view().value(row)).into_owned()
        }
        _ => arrow_cast::display::array_value_to_string(col, row).unwrap_or_default(),
    };
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// Planning reads the footers of up to this many input files for their columns.
pub const SAMPLE_FILES: usize = 16;

/// Adds `cols` to `union`: new names at the end; a column two files type differently
/// takes the type that holds both where one does (integers and floats → float64,
/// binary and string → string, whose invalid UTF-8 values become rejects), else
/// keeps the first file's (a file whose column cannot be cast is rejected).
pub fn union_columns(union: &mut Vec<(String, DataType)>, cols: Vec<(String, DataType)>) {
    for (name, dt) in cols {
        match union.iter_mut().find(|(n, _)| *n == name) {
            None => union.push((name, dt)),
            Some((_, cur)) if *cur == dt => {}
            // An all-null column (pyarrow's `null` type) takes the other file's type.
            Some((_, cur)) if *cur == DataType::Null => *cur = dt,
            Some(_) if dt == DataType::Null => {}
            Some((_, cur)) => {
                let number = |t: &DataType| {
                    t.is_integer()
                        || t.is_floating()
                        || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
                };
                let unsigned = |t: &DataType| t.is_unsigned_integer();
                if number(cur) && number(&dt) && !(cur.is_integer() && dt.is_integer()) {
                    // Numbers of any kind with a float or decimal: float64. A value it
                    // cannot hold exactly (an int64 id beyond 2^53, a decimal's digits)
                    // is a reject, found by the read's round trip, never rounded.
                    *cur = DataType::Float64;
                } else if unsigned(cur) && unsigned(&dt) {
                    *cur = DataType::UInt64;
                } else if number(cur) && number(&dt) {
                    *cur = DataType::Int64;
                } else if let (DataType::Timestamp(a, tza), DataType::Timestamp(b, tzb)) =
                    (&*cur, &dt)
                    && tza == tzb
                {
                    // The finer unit holds both.
                    let rank = |u: &arrow_schema::TimeUnit| {
                        use arrow_schema::TimeUnit::*;
                        match u {
                            Second => 0,
                            Millisecond => 1,
                            Microsecond => 2,
                            Nanosecond => 3,
                        }
                    };
                    if rank(b) > rank(a) {
                        *cur = DataType::Timestamp(*b, tzb.clone());
                    }
                } else if matches!(
                    (&*cur, &dt),
                    (DataType::Binary, DataType::Utf8) | (DataType::Utf8, DataType::Binary)
                ) {
                    *cur = DataType::Utf8;
                }
            }
        }
    }
}

/// `format: parquet`, and the staged output of earlier phases.
pub struct Parquet;

#[async_trait::async_trait]
impl super::Reader for Parquet {
    fn name(&self) -> &'static str {
        "parquet"
    }

    /// Declared, or the union of the footers of up to [`SAMPLE_FILES`] files: every
    /// column any of them has, in first-seen order (a file without one reads it as
    /// null). The first file's footer must read; a later unreadable one is left to
    /// the run, where it becomes a reject.
    async fn columns(
        &self,
        registry: &crate::store::Registry,
        uris: &[&str],
        declared: Option<&[(String, DataType)]>,
    ) -> Result<Vec<(String, DataType)>, super::ColumnsError> {
        if let Some(cols) = declared {
            return Ok(cols.to_vec());
        }
        let mut reads = Vec::new();
        for uri in uris.iter().take(SAMPLE_FILES) {
            let (store, u) = registry
                .resolve(uri)
                .map_err(|e| super::ColumnsError::Storage(e.to_string()))?;
            let uri = uri.to_string();
            reads.push(async move { (uri, read_columns(store, &u.path).await) });
        }
        let footers: Vec<_> = futures::stream::iter(reads).buffered(8).collect().await;
        let mut union: Vec<(String, DataType)> = Vec::new();
        for (i, (uri, cols)) in footers.into_iter().enumerate() {
            let cols = match cols {
                Ok(c) => c,
                Err(e) if i == 0 => {
                    return Err(super::ColumnsError::Spec {
                        field: "input.uris",
                        message: format!("cannot read the Parquet footer of {uri}: {e}"),
                    });
                }
                Err(_) => continue,
            };
            union_columns(&mut union, cols);
        }
        Ok(union)
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
