//! `format: laion`: Parquet (or JSONL) of image URLs with captions and any other
//! columns, the LAION layout. The rows are read by the Parquet or JSONL reader; each
//! batch's URLs are then fetched by the downloader (`input.download`), and the
//! record gains `image` (the bytes) and `content_type`. A URL that fails (HTTP
//! error, timeout, too large, wrong content type, blocked address, ...) makes its
//! record a reject with that reason and the record's fields, never a job failure.
use super::{Item, ReadCtx, ReadError, SliceStats};
use crate::io::download::{Downloader, Outcome};
use crate::protocol::records::InputSlice;
use crate::records::Reject;
use crate::spec::Format;
use arrow_array::{Array, ArrayRef, BinaryArray, BooleanArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Schema, SchemaRef};
use std::sync::Arc;

/// The columns the downloader adds to the file's own.
pub fn added_columns() -> Vec<(String, DataType)> {
    vec![
        ("image".into(), DataType::Binary),
        ("content_type".into(), DataType::Utf8),
    ]
}

/// The file's own format: Parquet unless the name says JSON Lines.
pub fn inner_format(uri: &str) -> Format {
    match Format::infer(uri) {
        Some(Format::Jsonl) => Format::Jsonl,
        _ => Format::Parquet,
    }
}

pub fn read(
    ctx: &ReadCtx,
    slice: &InputSlice,
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    let added: Vec<String> = added_columns().into_iter().map(|c| c.0).collect();
    let inner: SchemaRef = Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .filter(|f| !added.contains(f.name()))
            .cloned()
            .collect::<Vec<_>>(),
    ));
    let downloader = Downloader::new(&ctx.download).map_err(|e| ReadError::Storage {
        uri: slice.uri.clone(),
        message: format!("downloader: {e}"),
    })?;
    let mut inner_slice = slice.clone();
    inner_slice.format = inner_format(&slice.uri);
    let mut failed = 0u64;
    let mut fetched_bytes = 0u64;
    let mut st = super::read_slice(ctx, &inner_slice, &inner, &mut |item| match item {
        Item::Rejects(r) => out(Item::Rejects(r)),
        Item::Batch(b) => {
            let urls: Vec<Option<String>> = match b
                .column_by_name("url")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            {
                Some(a) => (0..a.len())
                    .map(|i| a.is_valid(i).then(|| a.value(i).to_string()))
                    .collect(),
                None => vec![None; b.num_rows()],
            };
            let outcomes = ctx.handle.block_on(downloader.fetch_all(urls));
            let mut keep = Vec::with_capacity(b.num_rows());
            // The downloaded rows' values, in row order.
            let mut images: Vec<Vec<u8>> = Vec::with_capacity(b.num_rows());
            let mut types: Vec<Option<String>> = Vec::with_capacity(b.num_rows());
            let mut rejects = Vec::new();
            // The failed records' fields, serialised only when something failed.
            let mut rows: Option<Vec<String>> = None;
            let ids = b
                .column_by_name(crate::records::ID)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .cloned();
            for (i, o) in outcomes.into_iter().enumerate() {
                match o {
                    Outcome::Ok {
                        body, content_type, ..
                    } => {
                        fetched_bytes += body.len() as u64;
                        keep.push(true);
                        images.push(body);
                        types.push(content_type);
                    }
                    Outcome::Failed { reason, detail } => {
                        failed += 1;
                        keep.push(false);
                        rejects.push(Reject {
                            id: ids
                                .as_ref()
                                .map(|a| a.value(i).to_string())
                                .unwrap_or_default(),
                            reason,
                            operator: "download".into(),
                            detail: Some(detail),
                            record: rows
                                .get_or_insert_with(|| crate::records::rows_as_json(&b))
                                .get(i)
                                .cloned()
                                .filter(|r| !r.is_empty()),
                        });
                    }
                }
            }
            if !rejects.is_empty() && !out(Item::Rejects(rejects)) {
                return false;
            }
            let mask = BooleanArray::from(keep);
            let kept = match arrow_select::filter::filter_record_batch(&b, &mask) {
                Ok(k) => k,
                Err(_) => return false,
            };
            let image_col: ArrayRef = Arc::new(BinaryArray::from_iter_values(images.iter()));
            let type_col: ArrayRef = Arc::new(StringArray::from(types));
            let mut cols: Vec<ArrayRef> = Vec::new();
            for f in schema.fields() {
                let a: ArrayRef = if f.name() == "image" {
                    image_col.clone()
                } else if f.name() == "content_type" {
                    type_col.clone()
                } else {
                    match kept.column_by_name(f.name()) {
                        Some(c) => c.clone(),
                        None => arrow_array::new_null_array(f.data_type(), kept.num_rows()),
                    }
                };
                cols.push(a);
            }
            match RecordBatch::try_new(schema.clone(), cols) {
                Ok(batch) if batch.num_rows() > 0 => out(Item::Batch(batch)),
                Ok(_) => true,
                Err(_) => false,
            }
        }
    })?;
    st.rejected += failed;
    st.records -= failed.min(st.records);
    st.bytes += fetched_bytes;
    Ok(st)
}

/// The planned columns of a `laion` input: the file's own plus [`added_columns`].
pub fn with_added(mut cols: Vec<(String, DataType)>) -> Vec<(String, DataType)> {
    cols.retain(|(n, _)| !added_columns().iter().any(|(a, _)| a == n));
    cols.extend(added_columns());
    cols
}

/// `format: laion`: rows read by the Parquet or JSONL reader, each URL downloaded.
pub struct Laion;

#[async_trait::async_trait]
impl super::Reader for Laion {
    fn name(&self) -> &'static str {
        "laion"
    }
    /// The inner file's columns (declared, or its footer or sample) plus the
    /// downloaded image's.
    async fn columns(
        &self,
        registry: &crate::store::Registry,
        uris: &[&str],
        declared: Option<&[(String, DataType)]>,
    ) -> Result<Vec<(String, DataType)>, super::ColumnsError> {
        let inner = super::reader(inner_format(uris.first().copied().unwrap_or_default()));
        Ok(with_added(inner.columns(registry, uris, declared).await?))
    }
    /// Row groups / lines, each row's image fetched.
    fn splittable(&self, uri: &str) -> bool {
        inner_format(uri) == Format::Parquet
            || super::Compression::of(uri) == super::Compression::None
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
