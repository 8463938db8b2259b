//! Readers turn one input slice into Arrow batches of the phase's input schema,
//! streaming (memory never scales with the file size). They run on a blocking thread
//! and reach the async store only through bridges. A bad record becomes a reject with
//! its reason; a corrupt or vanished file becomes one reject for the file; only
//! storage failures that outlast retries are errors (the attempt is retried).
//!
//! One [`Reader`] per input format, registered by name in [`READERS`]: planning asks
//! it for the input columns, which listed objects are inputs and whether a file may be
//! cut into byte ranges; a task asks it to read its slices. Adding a format is one
//! file here, one line in [`READERS`] (and its name in `spec::Format`).
pub mod images;
pub mod inflate;
pub mod jsonl;
pub mod laion;
pub mod parquet;
pub mod warc;

use crate::protocol::records::InputSlice;
use crate::records::Reject;
use crate::spec::Format;
use crate::store::Registry;
use arrow_array::RecordBatch;
use arrow_schema::{DataType, SchemaRef};
use futures::TryStreamExt;
use object_store::{GetOptions, GetRange};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One input format: how it is planned and read.
///
/// Planning is async (it runs in the coordinator on the runtime); reading is blocking
/// (it runs on the pipeline's reader thread and reaches the store through
/// [`ReadCtx::handle`], e.g. with [`open_range`]). Byte-range tasks are cut uniformly
/// by the planner for a [`splittable`](Reader::splittable) file; the reader finds its
/// own record boundaries from `slice.start` and owns every record that starts before
/// `slice.end`.
#[async_trait::async_trait]
pub trait Reader: Send + Sync {
    /// The format's name in specs (`input.format`), as `spec::Format::name` spells it.
    fn name(&self) -> &'static str;

    /// The input columns (after `id`): the format's own, or those `declared` in
    /// `input.schema`, or read from the first files' headers. `uris` is never empty.
    async fn columns(
        &self,
        registry: &Registry,
        uris: &[&str],
        declared: Option<&[(String, DataType)]>,
    ) -> Result<Vec<(String, DataType)>, ColumnsError>;

    /// Whether a listed object is an input (an image folder's captions are not).
    fn lists(&self, _path: &str) -> bool {
        true
    }

    /// Whether a file of this name may be cut into byte ranges.
    fn splittable(&self, _uri: &str) -> bool {
        false
    }

    /// Reads one slice, sending items to `out` (which returns false to stop early).
    fn read_slice(
        &self,
        ctx: &ReadCtx,
        slice: &InputSlice,
        schema: &SchemaRef,
        out: &mut dyn FnMut(Item) -> bool,
    ) -> Result<SliceStats, ReadError>;

    /// Reads a task's slices, in order; a reader of many small objects overrides this
    /// to overlap their fetches.
    fn read_task(
        &self,
        ctx: &ReadCtx,
        slices: &[InputSlice],
        schema: &SchemaRef,
        out: &mut dyn FnMut(Item) -> bool,
    ) -> Result<SliceStats, ReadError> {
        let mut total = SliceStats::default();
        // Once `out` says stop (the pipeline ended, or `input.limit` was reached),
        // the remaining slices are not opened.
        let stopped = std::cell::Cell::new(false);
        let mut send = |item: Item| {
            let go = out(item);
            stopped.set(stopped.get() || !go);
            go
        };
        for slice in slices {
            let st = self.read_slice(ctx, slice, schema, &mut send)?;
            total.records += st.records;
            total.rejected += st.rejected;
            total.bytes += st.bytes;
            if stopped.get() {
                break;
            }
        }
        Ok(total)
    }
}

/// Every reader, by name.
pub static READERS: &[&dyn Reader] = &[
    &jsonl::Jsonl,
    &parquet::Parquet,
    &warc::WARC,
    &warc::WET,
    &images::ImageFolder,
    &images::Webdataset,
    &laion::Laion,
];

/// The reader registered as `name`.
pub fn find(name: &str) -> Option<&'static dyn Reader> {
    READERS.iter().copied().find(|r| r.name() == name)
}

/// The reader of a spec format (every format has one; a test checks it).
pub fn reader(format: Format) -> &'static dyn Reader {
    find(format.name()).unwrap_or_else(|| panic!("no reader is registered for {format:?}"))
}

/// Why a reader could not say its input columns at planning.
#[derive(Debug, thiserror::Error)]
pub enum ColumnsError {
    /// The spec must say what the files do not (`field`: the field path to fix).
    #[error("{message}")]
    Spec {
        field: &'static str,
        message: String,
    },
    /// Listing or reading a header failed.
    #[error("{0}")]
    Storage(String),
}

/// What a reader hands downstream.
#[derive(Debug)]
pub enum Item {
    Batch(RecordBatch),
    Rejects(Vec<Reject>),
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading {uri}: {message}")]
    Storage { uri: String, message: String },
    #[error("{uri} does not exist: {message}")]
    Missing { uri: String, message: String },
    /// The input is no longer the version the job was planned on (its etag changed):
    /// the task fails rather than read another file under the planned ids and ranges.
    #[error(
        "input_changed: {uri} was rewritten after the job was planned ({message}); submit a new job to read the new version"
    )]
    Changed { uri: String, message: String },
    #[error("cancelled")]
    Cancelled,
}

impl ReadError {
    /// Rereading cannot help: the planned version of an input is gone.
    pub fn is_fatal(&self) -> bool {
        matches!(self, ReadError::Changed { .. })
    }
    /// Another attempt may succeed (a storage failure that outlasted the retries).
    pub fn is_retryable(&self) -> bool {
        matches!(self, ReadError::Storage { .. } | ReadError::Missing { .. })
    }
}

/// Settings and handles a reader needs.
#[derive(Clone)]
pub struct ReadCtx {
    pub registry: Registry,
    pub handle: tokio::runtime::Handle,
    pub batch_rows: usize,
    /// A batch is also cut when its records reach this many bytes.
    pub batch_bytes: usize,
    pub max_record_bytes: usize,
    pub cancel: Arc<AtomicBool>,
    /// Phase-0 inputs get record ids assigned; upstream outputs already carry them.
    pub assign_ids: bool,
    /// `format: laion`: how images are fetched.
    pub download: crate::spec::DownloadSpec,
    /// Set when a local input ended before its planned range did (changed while it
    /// was read): whatever the reader made of the error, the task's read then fails
    /// with `input_changed` (see [`read_task`]).
    pub cut: CutFlag,
    /// Set when a remote stream failed or ended before its range did (a connection
    /// reset mid-body, a timeout): whatever the reader made of it (a `corrupt_input`
    /// reject, the end of the slice), the task's read fails with a storage error, so
    /// the attempt is retried rather than committed without the rest of the slice.
    pub broken: CutFlag,
}

/// Set to (URI, message) when an input ended before its planned range ([`ReadCtx::cut`]).
pub type CutFlag = Arc<std::sync::Mutex<Option<(String, String)>>>;

impl ReadCtx {
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Stream compression, from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn of(uri: &str) -> Compression {
        let l = uri.to_ascii_lowercase();
        if l.ends_with(".gz") || l.ends_with(".gzip") {
            Compression::Gzip
        } else if l.ends_with(".zst") || l.ends_with(".zstd") {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// The decompressed stream of a whole object, by its name's compression suffix.
pub fn decompress(
    raw: Box<dyn std::io::Read + Send>,
    uri: &str,
) -> std::io::Result<Box<dyn std::io::Read + Send>> {
    Ok(match Compression::of(uri) {
        Compression::None => raw,
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(
            std::io::BufReader::with_capacity(1 << 16, raw),
        )),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(raw)?),
    })
}

/// One reject for a whole unreadable file, and the slice's stats that say so.
pub fn reject_file(
    slice: &InputSlice,
    reason: &str,
    detail: String,
    out: &mut dyn FnMut(Item) -> bool,
) -> SliceStats {
    out(Item::Rejects(vec![file_reject(slice, 0, reason, detail)]));
    SliceStats {
        rejected: 1,
        ..Default::default()
    }
}

/// Statistics of one slice.
#[derive(Debug, Default, Clone, Copy)]
pub struct SliceStats {
    pub records: u64,
    pub rejected: u64,
    pub bytes: u64,
}

/// Reads one slice with its format's reader.
pub fn read_slice(
    ctx: &ReadCtx,
    slice: &InputSlice,
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    let r = reader(slice.format).read_slice(ctx, slice, schema, out);
    cut_short(ctx).map_or(r, Err)
}

/// The read error of an input that ended early while it was read (readers turn read
/// errors into rejects of the rest of a file; this one must fail the attempt).
fn cut_short(ctx: &ReadCtx) -> Option<ReadError> {
    if let Some((uri, message)) = ctx.cut.lock().expect("cut flag").take() {
        return Some(ReadError::Changed { uri, message });
    }
    let (uri, message) = ctx.broken.lock().expect("broken flag").take()?;
    Some(ReadError::Storage { uri, message })
}

/// A remote object's body read to its range's end: a stream error or an early end
/// sets the task's [`ReadCtx::broken`] flag (and is an error to the reader).
struct Streamed<R> {
    inner: R,
    left: u64,
    broken: (CutFlag, String),
}

impl<R: std::io::Read> std::io::Read for Streamed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let flag = |message: String| {
            let (f, uri) = &self.broken;
            f.lock()
                .expect("broken flag")
                .get_or_insert((uri.clone(), message));
        };
        match self.inner.read(buf) {
            Ok(0) if self.left > 0 && !buf.is_empty() => {
                let message = format!(
                    "the response ended {} bytes before its range did",
                    self.left
                );
                flag(message.clone());
                Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    message,
                ))
            }
            Ok(n) => {
                self.left = self.left.saturating_sub(n as u64);
                Ok(n)
            }
            Err(e) => {
                flag(format!("reading the response: {e}"));
                Err(e)
            }
        }
    }
}

/// Reads a task's slices with their format's reader (a task's slices share one).
pub fn read_task(
    ctx: &ReadCtx,
    slices: &[InputSlice],
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    let r = match slices.first() {
        Some(s) => reader(s.format).read_task(ctx, slices, schema, out),
        None => Ok(SliceStats::default()),
    };
    cut_short(ctx).map_or(r, Err)
}

/// The read size of a local input file.
const LOCAL_READ_BUFFER: usize = 256 << 10;

/// A range of a local file that must yield all of its bytes: a file truncated in place
/// while it is read ends early, which a reader would take for the end of its slice and
/// lose the records after the cut without a word. An error instead fails the attempt;
/// the next one finds the file's etag changed (`input_changed`).
struct Exact<R> {
    /// The range: its limit is what is left of it.
    inner: std::io::Take<R>,
    /// The task's flag (see [`ReadCtx::cut`]) and this file's URI.
    cut: Option<(CutFlag, String)>,
}

impl<R: std::io::Read> std::io::Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let left = self.inner.limit();
        if n == 0 && left > 0 && !buf.is_empty() {
            let message =
                format!("the file ended {left} bytes early: it changed while it was read");
            if let Some((flag, uri)) = &self.cut {
                *flag.lock().expect("cut flag") = Some((uri.clone(), message.clone()));
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                message,
            ));
        }
        Ok(n)
    }
}

/// Opens an object from byte `from` to its end as a blocking reader; with `etag`, only
/// that version of it (the one the job was planned on).
pub fn open_range(
    ctx: &ReadCtx,
    uri: &str,
    from: u64,
    etag: Option<&str>,
) -> Result<Box<dyn std::io::Read + Send>, ReadError> {
    let (store, u) = ctx.registry.resolve(uri).map_err(|e| ReadError::Storage {
        uri: uri.to_string(),
        message: e.to_string(),
    })?;
    let opts = GetOptions {
        range: (from > 0).then_some(GetRange::Offset(from)),
        // A weak ETag (`W/"…"`) never matches If-Match's strong comparison: a server
        // would answer 412 for an unchanged file.
        if_match: etag.filter(|e| !e.starts_with("W/")).map(str::to_string),
        ..Default::default()
    };
    let path = u.path.clone();
    let res = ctx
        .handle
        .block_on(async move { store.get_opts(&path, opts).await })
        .map_err(|e| get_error(uri, e))?;
    // A local file is read here, on the reader's own thread: its stream would read
    // 8 KiB chunks each through `spawn_blocking` and `block_on`, six thread hand-offs
    // per chunk (most of the text job's system time, docs/PERFORMANCE.md, issue 32).
    if let object_store::GetResultPayload::File(..) = &res.payload {
        let range = res.range.clone();
        let object_store::GetResultPayload::File(mut file, _) = res.payload else {
            unreachable!("matched above")
        };
        use std::io::{Read, Seek, SeekFrom};
        file.seek(SeekFrom::Start(range.start))
            .map_err(|e| ReadError::Storage {
                uri: uri.to_string(),
                message: e.to_string(),
            })?;
        return Ok(Box::new(std::io::BufReader::with_capacity(
            LOCAL_READ_BUFFER,
            Exact {
                inner: file.take(range.end - range.start),
                cut: Some((ctx.cut.clone(), uri.to_string())),
            },
        )));
    }
    let left = res.range.end - res.range.start;
    let stream = res.into_stream().map_err(std::io::Error::other);
    let reader = tokio_util::io::StreamReader::new(stream);
    Ok(Box::new(Streamed {
        inner: tokio_util::io::SyncIoBridge::new_with_handle(reader, ctx.handle.clone()),
        left,
        broken: (ctx.broken.clone(), uri.to_string()),
    }))
}

/// A reject for a whole file or the rest of it.
/// The reject for where a stream broke (a gzip member that stopped decoding, a plain
/// file cut inside a record): records read before the break from the same member or
/// offset are kept, so its id must not be theirs. Its offset has bit 47 set
/// ([`STREAM_BREAK`]; no file reaches 128 TiB), so it sorts after the file's records
/// and equals none of them; the detail gives the byte offset.
pub fn stream_reject(slice: &InputSlice, offset: u64, reason: &str, detail: String) -> Reject {
    file_reject(slice, offset | STREAM_BREAK, reason, detail)
}

/// The bit that marks a [`stream_reject`]'s id offset.
pub const STREAM_BREAK: u64 = 1 << 47;

pub fn file_reject(slice: &InputSlice, offset: u64, reason: &str, detail: String) -> Reject {
    Reject {
        id: crate::records::record_id(&crate::records::file_key(&slice.uri), offset),
        reason: reason.to_string(),
        operator: "reader".to_string(),
        detail: Some(format!("{}: {detail}", slice.uri)),
        record: None,
    }
}

/// Why a file named as compressed cannot be read at all: 0 bytes hold no gzip or zstd
/// header (a cut upload, not an empty dataset; `gzip -t` refuses it too).
pub fn empty_compressed(slice: &InputSlice) -> Option<String> {
    (slice.size == 0 && Compression::of(&slice.uri) != Compression::None).then(|| {
        "0 bytes: a compressed file holds at least its header (cut off in transfer?)".into()
    })
}

/// Opens a slice's object from `from`, decompressed as its name says. A vanished
/// file becomes one `input_missing` reject and a compressed file that does not start
/// one `corrupt_input` reject (`Ok(Err(stats))`: emitted, nothing to read); other
/// storage failures are errors (the attempt is retried).
pub fn open_or_reject(
    ctx: &ReadCtx,
    slice: &InputSlice,
    from: u64,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<Result<Box<dyn std::io::Read + Send>, SliceStats>, ReadError> {
    if let Some(detail) = empty_compressed(slice) {
        return Ok(Err(reject_file(slice, "corrupt_input", detail, out)));
    }
    let raw = match open_range(ctx, &slice.uri, from, slice.etag.as_deref()) {
        Ok(r) => r,
        Err(ReadError::Missing { message, .. }) => {
            return Ok(Err(reject_file(slice, "input_missing", message, out)));
        }
        Err(e) => return Err(e),
    };
    Ok(decompress(raw, &slice.uri)
        .map_err(|e| reject_file(slice, "corrupt_input", e.to_string(), out)))
}

/// The read error for a failed GET of `uri`: a missing object, a changed one (the
/// planned etag no longer matches), or a storage failure.
pub fn get_error(uri: &str, e: object_store::Error) -> ReadError {
    match e {
        object_store::Error::NotFound { .. } => ReadError::Missing {
            uri: uri.to_string(),
            message: e.to_string(),
        },
        object_store::Error::Precondition { .. } => ReadError::Changed {
            uri: uri.to_string(),
            message: e.to_string(),
        },
        e => ReadError::Storage {
            uri: uri.to_string(),
            message: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::Exact;
    use std::io::Read;

    #[test]
    fn a_range_that_ends_early_is_an_error_not_an_end() {
        let mut whole = Exact {
            inner: (&b"abcdef"[..]).take(6),
            cut: None,
        };
        let mut v = Vec::new();
        whole.read_to_end(&mut v).unwrap();
        assert_eq!(v, b"abcdef");
        // Planned 10 bytes, 6 there: truncated after the open.
        let flag = std::sync::Arc::new(std::sync::Mutex::new(None));
        let mut short = Exact {
            inner: (&b"abcdef"[..]).take(10),
            cut: Some((flag.clone(), "file:///in/a.jsonl".into())),
        };
        let e = short.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("4 bytes early"), "{e}");
        // The task's read fails with it, whatever the reader made of the error.
        let (uri, _) = flag.lock().unwrap().clone().unwrap();
        assert_eq!(uri, "file:///in/a.jsonl");
    }
}
