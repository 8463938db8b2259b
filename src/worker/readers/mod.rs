//! Readers turn one input slice into Arrow batches of the phase's input schema,
//! streaming (memory never scales with the file size). They run on a blocking thread
//! and reach the async store only through bridges. A bad record becomes a reject with
//! its reason; a corrupt or vanished file becomes one reject for the file; only
//! storage failures that outlast retries are errors (the attempt is retried).
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
use arrow_schema::SchemaRef;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
    pub download: crate::worker::download::DownloadSpec,
}

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

/// Whether a file of this format and name can be cut into byte ranges.
pub fn splittable(format: Format, uri: &str) -> bool {
    match format {
        Format::Jsonl => Compression::of(uri) == Compression::None,
        Format::Parquet => true,
        // Per-record gzip members are the split points.
        Format::Warc | Format::Wet => Compression::of(uri) == Compression::Gzip,
        Format::ImageFolder | Format::Webdataset => false,
        // Row groups / lines, each row's image fetched.
        Format::Laion => {
            laion::inner_format(uri) == Format::Parquet || Compression::of(uri) == Compression::None
        }
    }
}

/// Statistics of one slice.
#[derive(Debug, Default, Clone, Copy)]
pub struct SliceStats {
    pub records: u64,
    pub rejected: u64,
    pub bytes: u64,
}

/// Reads one slice, sending items to `out` (which returns false to stop early).
/// `prepend_ids` is false when reading an upstream phase's output (ids exist).
pub fn read_slice(
    ctx: &ReadCtx,
    slice: &InputSlice,
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    match slice.format {
        Format::Jsonl => jsonl::read(ctx, slice, schema, out),
        Format::Parquet => parquet::read(ctx, slice, schema, out),
        Format::Warc | Format::Wet => warc::read(ctx, slice, schema, out),
        Format::ImageFolder => {
            images::read_folder(ctx, std::slice::from_ref(slice), schema, 1, out)
        }
        Format::Webdataset => images::read_webdataset(ctx, slice, schema, out),
        Format::Laion => laion::read(ctx, slice, schema, out),
    }
}

/// A reject for a whole file or the rest of it.
pub fn file_reject(slice: &InputSlice, offset: u64, reason: &str, detail: String) -> Reject {
    Reject {
        id: crate::records::record_id(&crate::records::file_key(&slice.uri), offset),
        reason: reason.to_string(),
        operator: "reader".to_string(),
        detail: Some(format!("{}: {detail}", slice.uri)),
        record: None,
    }
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
    let raw = match jsonl::open_range(ctx, &slice.uri, from, slice.etag.as_deref()) {
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
