//! Image inputs: a folder (or glob) of image files, one record per file, fetched
//! with bounded concurrency so object-store latency overlaps; and WebDataset tar
//! shards, one record per sample key (the image member, with its `.txt` caption and
//! `.json` metadata). Images stay encoded bytes here; the image operators decode.
use super::{Item, ReadCtx, ReadError, SliceStats, file_reject, stream_reject};
use crate::protocol::records::InputSlice;
use crate::records::{Reject, file_key, record_id};
use arrow_array::builder::BinaryBuilder;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};
use futures::StreamExt;
use std::io::Read;
use std::sync::Arc;

pub use crate::spec::is_image_name;

pub fn folder_columns() -> Vec<(String, DataType)> {
    vec![
        ("path".into(), DataType::Utf8),
        ("image".into(), DataType::Binary),
    ]
}

pub fn webdataset_columns() -> Vec<(String, DataType)> {
    vec![
        ("key".into(), DataType::Utf8),
        ("path".into(), DataType::Utf8),
        ("url".into(), DataType::Utf8),
        ("caption".into(), DataType::Utf8),
        ("json".into(), DataType::Utf8),
        ("image".into(), DataType::Binary),
    ]
}

/// Rows being collected into a batch of the planned schema (columns by name).
struct Rows {
    schema: SchemaRef,
    ids: Vec<String>,
    text: Vec<(String, Vec<Option<String>>)>,
    /// The files as read (a GET's body is kept, not copied).
    images: Vec<bytes::Bytes>,
    bytes: usize,
}

impl Rows {
    fn new(schema: SchemaRef) -> Self {
        let text = schema
            .fields()
            .iter()
            .filter(|f| f.data_type() == &DataType::Utf8 && f.name() != crate::records::ID)
            .map(|f| (f.name().clone(), Vec::new()))
            .collect();
        Rows {
            schema,
            ids: Vec::new(),
            text,
            images: Vec::new(),
            bytes: 0,
        }
    }

    fn push(&mut self, id: String, fields: &[(&str, Option<String>)], image: bytes::Bytes) {
        self.ids.push(id);
        for (name, col) in &mut self.text {
            let v = fields
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.clone());
            col.push(v);
        }
        self.bytes += image.len();
        self.images.push(image);
    }

    fn full(&self, ctx: &ReadCtx) -> bool {
        self.ids.len() >= ctx.batch_rows || self.bytes >= ctx.batch_bytes
    }

    fn take(&mut self) -> RecordBatch {
        let n = self.ids.len();
        let mut cols: Vec<ArrayRef> = Vec::new();
        for f in self.schema.fields() {
            let a: ArrayRef = if f.name() == crate::records::ID {
                Arc::new(StringArray::from(std::mem::take(&mut self.ids)))
            } else if f.data_type() == &DataType::Binary {
                // One copy into a buffer of the exact size (no regrowth).
                let imgs = std::mem::take(&mut self.images);
                let total = imgs.iter().map(|b| b.len()).sum();
                let mut col = BinaryBuilder::with_capacity(imgs.len(), total);
                for b in &imgs {
                    col.append_value(b);
                }
                Arc::new(col.finish())
            } else if let Some((_, v)) = self.text.iter_mut().find(|(name, _)| name == f.name()) {
                Arc::new(StringArray::from(std::mem::take(v)))
            } else {
                arrow_array::new_null_array(f.data_type(), n)
            };
            cols.push(a);
        }
        self.bytes = 0;
        RecordBatch::try_new(self.schema.clone(), cols).expect("planned image columns")
    }
}

/// Reads image files, `concurrency` GETs in flight, one record per file; a missing
/// or oversize file is a reject (`input_missing`, `too_large`), never an error.
pub fn read_folder(
    ctx: &ReadCtx,
    slices: &[InputSlice],
    schema: &SchemaRef,
    concurrency: usize,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    let mut st = SliceStats::default();
    let mut rows = Rows::new(schema.clone());
    let mut rejects: Vec<Reject> = Vec::new();
    let max = ctx.max_record_bytes as u64;
    let fetch = |s: &InputSlice| {
        let s = s.clone();
        let reg = ctx.registry.clone();
        async move {
            if s.size > max {
                return (s, Ok(None));
            }
            let r = match reg.resolve(&s.uri) {
                Ok((store, u)) => {
                    let opts = object_store::GetOptions {
                        if_match: s.etag.clone(),
                        ..Default::default()
                    };
                    store.get_opts(&u.path, opts).await
                }
                Err(e) => {
                    return (
                        s,
                        Err(ReadError::Storage {
                            uri: String::new(),
                            message: e.to_string(),
                        }),
                    );
                }
            };
            let r = match r {
                Ok(g) => g.bytes().await.map(Some),
                Err(e) => Err(e),
            };
            let r = r.map_err(|e| super::get_error(&s.uri, e));
            (s, r)
        }
    };
    // Local files are read on this thread, one after another: object_store's local
    // store reads inline outside a runtime, where inside one every GET is two hand-offs
    // to tokio's blocking pool (open, then read), which cost more than the read itself
    // on a small file. Each worker has its own reader thread, so a machine still has as
    // many reads in flight as workers. Fault injection (tests) may sleep in a GET, so
    // it keeps the runtime.
    let inline = !ctx.registry.is_wrapped()
        && slices
            .iter()
            .all(|s| crate::store::Uri::parse(&s.uri).is_ok_and(|u| u.store == "file"));
    let mut inline_slices = slices.iter();
    let mut stream = futures::stream::iter(slices.iter().map(fetch)).buffered(concurrency.max(1));
    loop {
        if ctx.cancelled() {
            return Err(ReadError::Cancelled);
        }
        let next = if inline {
            inline_slices
                .next()
                .map(|s| futures::executor::block_on(fetch(s)))
        } else {
            ctx.handle.block_on(stream.next())
        };
        let Some((s, got)) = next else {
            break;
        };
        let id = record_id(&file_key(&s.uri), 0);
        match got {
            Ok(Some(b)) => {
                st.records += 1;
                st.bytes += b.len() as u64;
                rows.push(id, &[("path", Some(s.uri.clone()))], b);
            }
            Ok(None) => {
                st.rejected += 1;
                rejects.push(Reject {
                    id,
                    reason: "too_large".into(),
                    operator: "reader".into(),
                    detail: Some(format!(
                        "{}: {} bytes > max_record_bytes {max}",
                        s.uri, s.size
                    )),
                    record: None,
                });
            }
            Err(ReadError::Missing { message, .. }) => {
                st.rejected += 1;
                rejects.push(file_reject(&s, 0, "input_missing", message));
            }
            Err(e) => return Err(e),
        }
        if !rejects.is_empty() && !out(Item::Rejects(std::mem::take(&mut rejects))) {
            return Ok(st);
        }
        if rows.full(ctx) && !out(Item::Batch(rows.take())) {
            return Ok(st);
        }
    }
    if !rows.ids.is_empty() {
        out(Item::Batch(rows.take()));
    }
    Ok(st)
}

/// One WebDataset shard: tar members grouped by key (the name up to the first dot of
/// its last path segment); a sample's image is its first image member. Samples
/// without an image are rejects (`no_image`); a corrupt tar rejects the rest of the
/// shard (`corrupt_input`) and keeps what came before.
pub fn read_webdataset(
    ctx: &ReadCtx,
    slice: &InputSlice,
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    // `.tar.gz` and `.tar.zst` shards too.
    let raw = match super::open_or_reject(ctx, slice, 0, out)? {
        Ok(r) => r,
        Err(rejected) => return Ok(rejected),
    };
    let fk = file_key(&slice.uri);
    let mut st = SliceStats::default();
    let mut rows = Rows::new(schema.clone());
    let mut ar = tar::Archive::new(raw);
    let entries = match ar.entries() {
        Ok(e) => e,
        Err(e) => {
            return Ok(super::reject_file(
                slice,
                "corrupt_input",
                e.to_string(),
                out,
            ));
        }
    };
    #[derive(Default)]
    struct Sample {
        key: String,
        offset: u64,
        image: Option<(String, Vec<u8>)>,
        caption: Option<String>,
        json: Option<String>,
    }
    let mut cur: Option<Sample> = None;
    let max = ctx.max_record_bytes as u64;
    let flush = |s: Sample, rows: &mut Rows, st: &mut SliceStats| -> Option<Reject> {
        let id = record_id(&fk, s.offset);
        let Some((name, image)) = s.image else {
            st.rejected += 1;
            return Some(Reject {
                id,
                reason: "no_image".into(),
                operator: "reader".into(),
                detail: Some(format!(
                    "{}: sample {:?} has no image member",
                    slice.uri, s.key
                )),
                record: None,
            });
        };
        let url = s.json.as_deref().and_then(|j| {
            serde_json::from_str::<serde_json::Value>(j)
                .ok()
                .and_then(|v| v.get("url").and_then(|u| u.as_str()).map(str::to_string))
        });
        st.records += 1;
        st.bytes += image.len() as u64;
        rows.push(
            id,
            &[
                ("key", Some(s.key)),
                ("path", Some(format!("{}#{name}", slice.uri))),
                ("url", url),
                ("caption", s.caption),
                ("json", s.json),
            ],
            image.into(),
        );
        None
    };
    let mut pending: Vec<Reject> = Vec::new();
    for e in entries {
        if ctx.cancelled() {
            return Err(ReadError::Cancelled);
        }
        let mut e = match e {
            Ok(e) => e,
            Err(err) => {
                st.rejected += 1;
                // Samples before the break are kept: an id of its own.
                pending.push(stream_reject(slice, 0, "corrupt_input", err.to_string()));
                break;
            }
        };
        if !e.header().entry_type().is_file() {
            continue;
        }
        let name = match e.path() {
            Ok(p) => p.to_string_lossy().into_owned(),
            Err(_) => continue,
        };
        let base = name.rsplit('/').next().unwrap_or(&name).to_string();
        let (key, ext) = match base.find('.') {
            Some(i) => (
                format!("{}{}", &name[..name.len() - base.len()], &base[..i]),
                base[i + 1..].to_ascii_lowercase(),
            ),
            None => continue,
        };
        let offset = e.raw_header_position();
        if cur.as_ref().is_some_and(|c| c.key != key)
            && let Some(r) = flush(cur.take().expect("some"), &mut rows, &mut st)
        {
            pending.push(r);
        }
        let s = cur.get_or_insert_with(|| Sample {
            key: key.clone(),
            offset,
            ..Default::default()
        });
        let size = e.header().size().unwrap_or(0);
        if size > max {
            continue; // an oversize member: the sample may still lack an image
        }
        let mut buf = Vec::with_capacity(size as usize);
        if let Err(err) = e.read_to_end(&mut buf) {
            st.rejected += 1;
            pending.push(file_reject(slice, offset, "corrupt_input", err.to_string()));
            cur = None;
            break;
        }
        if is_image_name(&base) {
            if s.image.is_none() {
                s.image = Some((base.clone(), buf));
            }
        } else if ext == "txt" || ext == "caption" {
            s.caption = Some(String::from_utf8_lossy(&buf).trim().to_string());
        } else if ext == "json" {
            s.json = Some(String::from_utf8_lossy(&buf).into_owned());
        }
        if !pending.is_empty() && !out(Item::Rejects(std::mem::take(&mut pending))) {
            return Ok(st);
        }
        if rows.full(ctx) && !out(Item::Batch(rows.take())) {
            return Ok(st);
        }
    }
    if let Some(s) = cur.take()
        && let Some(r) = flush(s, &mut rows, &mut st)
    {
        pending.push(r);
    }
    if !pending.is_empty() {
        out(Item::Rejects(pending));
    }
    if !rows.ids.is_empty() {
        out(Item::Batch(rows.take()));
    }
    Ok(st)
}

/// `format: image_folder`: image files, one record per file.
pub struct ImageFolder;

/// `format: webdataset`: tar shards, one record per sample key.
pub struct Webdataset;

#[async_trait::async_trait]
impl super::Reader for ImageFolder {
    fn name(&self) -> &'static str {
        "image_folder"
    }
    async fn columns(
        &self,
        _registry: &crate::store::Registry,
        _uris: &[&str],
        _declared: Option<&[(String, DataType)]>,
    ) -> Result<Vec<(String, DataType)>, super::ColumnsError> {
        Ok(folder_columns())
    }
    /// Its image files (sidecar captions, JSON, ... are not inputs).
    fn lists(&self, path: &str) -> bool {
        is_image_name(path)
    }
    fn read_slice(
        &self,
        ctx: &ReadCtx,
        slice: &InputSlice,
        schema: &SchemaRef,
        out: &mut dyn FnMut(Item) -> bool,
    ) -> Result<SliceStats, ReadError> {
        read_folder(ctx, std::slice::from_ref(slice), schema, 1, out)
    }
    /// One batch across many small files, 32 fetched at a time.
    fn read_task(
        &self,
        ctx: &ReadCtx,
        slices: &[InputSlice],
        schema: &SchemaRef,
        out: &mut dyn FnMut(Item) -> bool,
    ) -> Result<SliceStats, ReadError> {
        read_folder(ctx, slices, schema, 32, out)
    }
}

#[async_trait::async_trait]
impl super::Reader for Webdataset {
    fn name(&self) -> &'static str {
        "webdataset"
    }
    async fn columns(
        &self,
        _registry: &crate::store::Registry,
        _uris: &[&str],
        _declared: Option<&[(String, DataType)]>,
    ) -> Result<Vec<(String, DataType)>, super::ColumnsError> {
        Ok(webdataset_columns())
    }
    fn read_slice(
        &self,
        ctx: &ReadCtx,
        slice: &InputSlice,
        schema: &SchemaRef,
        out: &mut dyn FnMut(Item) -> bool,
    ) -> Result<SliceStats, ReadError> {
        read_webdataset(ctx, slice, schema, out)
    }
}
