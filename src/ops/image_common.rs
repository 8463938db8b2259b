//! What the image operators share: the encoded-image column, decode limits as
//! params, and decoding a batch in parallel with per-record rejects.
use super::Drop;
use super::params::{ByteSize, params};
use super::{ProcessError, SchemaError};
use crate::kernels::image::{DecodeError, Decoded, Limits};
use arrow_array::{Array, BinaryArray, LargeBinaryArray, RecordBatch};
use arrow_schema::{DataType, Schema};
use std::sync::Arc;

params! {
    /// The encoded-image column and decode limits every image operator takes.
    pub struct ImageParams {
        /// The column of encoded image bytes.
        column: String = "image",
        /// Images with more pixels are rejected (`decompression_bomb`) before decoding.
        max_pixels: u64 [1, 1099511627776] = 89478485,
        /// Larger encoded images are rejected (`too_large`) before decoding.
        max_bytes: ByteSize = "64MiB",
    }
}

impl ImageParams {
    pub fn limits(&self) -> Limits {
        Limits {
            max_pixels: self.max_pixels,
            max_bytes: self.max_bytes.0,
        }
    }
}

pub fn require_binary(input: &Schema, column: &str) -> Result<(), SchemaError> {
    match input.field_with_name(column) {
        Ok(f) if matches!(f.data_type(), DataType::Binary | DataType::LargeBinary) => Ok(()),
        Ok(f) => Err(SchemaError::WrongType {
            param: "column".into(),
            column: column.to_string(),
            found: f.data_type().clone(),
            expected: "not encoded image bytes (binary)".into(),
        }),
        Err(_) => Err(SchemaError::missing(
            "column",
            column,
            " of image bytes",
            input,
        )),
    }
}

/// The bytes of each row (None for null).
pub fn values<'a>(
    batch: &'a RecordBatch,
    column: &str,
) -> Result<Vec<Option<&'a [u8]>>, ProcessError> {
    let col = batch
        .column_by_name(column)
        .ok_or_else(|| ProcessError::MissingColumn(column.to_string()))?;
    if let Some(a) = col.as_any().downcast_ref::<BinaryArray>() {
        return Ok((0..a.len())
            .map(|i| a.is_valid(i).then(|| a.value(i)))
            .collect());
    }
    if let Some(a) = col.as_any().downcast_ref::<LargeBinaryArray>() {
        return Ok((0..a.len())
            .map(|i| a.is_valid(i).then(|| a.value(i)))
            .collect());
    }
    Err(ProcessError::WrongType {
        column: column.to_string(),
        expected: "binary",
    })
}

/// The reject of an image that did not decode.
pub fn drop_of(e: &DecodeError) -> Drop {
    Drop {
        reason: e.reason,
        detail: Some(e.detail.clone()),
    }
}

pub fn missing() -> Drop {
    Drop {
        reason: "missing_image",
        detail: None,
    }
}

/// Decodes through a small content-addressed cache, so consecutive image stages
/// (`image_quality` then `image_hash`, both at `min_side` 64 by default) decode each
/// image once. Keyed by a hash of the bytes with the decode parameters, so a hit
/// returns exactly what decoding would: results never depend on cache state. At most
/// [`cache_bytes`] of pixels are kept; entries already read again go first, then the
/// oldest (so parallel tasks filling the cache do not evict what the next stage of
/// each is about to read).
pub fn decode_cached(
    bytes: &[u8],
    limits: &Limits,
    min_side: Option<u32>,
) -> Arc<Result<Decoded, DecodeError>> {
    let key = (
        xxhash_rust::xxh3::xxh3_128(bytes),
        bytes.len(),
        min_side,
        limits.max_pixels,
        limits.max_bytes,
    );
    {
        let mut c = CACHE.lock().expect("decode cache");
        if let Some(e) = c.map.get_mut(&key) {
            let d = e.decoded.clone();
            if !e.used {
                e.used = true;
                c.used.push_back(key);
            }
            return d;
        }
    }
    let d = Arc::new(crate::kernels::image::decode(bytes, limits, min_side));
    let size = d
        .as_ref()
        .as_ref()
        // RGB, and the luma plane its readers add (a third more).
        .map_or(64, |d| d.rgb.as_raw().len() / 3 * 4 + 64);
    let mut c = CACHE.lock().expect("decode cache");
    let entry = Entry {
        decoded: d.clone(),
        used: false,
        size,
    };
    if c.map.insert(key, entry).is_none() {
        c.fresh.push_back(key);
        c.bytes += size;
    }
    let cap = cache_bytes();
    while c.bytes > cap {
        let Some(k) = c.used.pop_front().or_else(|| c.fresh.pop_front()) else {
            break;
        };
        if let Some(e) = c.map.remove(&k) {
            c.bytes -= e.size;
        }
    }
    // Keys evicted through `used` stay in `fresh`; drop them lazily.
    while c.fresh.front().is_some_and(|k| !c.map.contains_key(k)) {
        c.fresh.pop_front();
    }
    d
}

/// Pixels the decode cache may hold for each task the process runs at once: a task's
/// 32 MiB batch of ~30 KiB JPEGs decoded at 1/4 scale is ~40 MiB.
pub const CACHE_BYTES_PER_TASK: usize = 64 << 20;

/// Tasks the process runs at once, as its worker set them ([`set_tasks`]).
static TASKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(2);

/// Sizes the decode cache for `n` tasks at once (a worker process's task slots).
pub fn set_tasks(n: usize) {
    TASKS.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// The cache's size: [`CACHE_BYTES_PER_TASK`] a task, for at least two (128 MiB).
pub fn cache_bytes() -> usize {
    CACHE_BYTES_PER_TASK.saturating_mul(TASKS.load(std::sync::atomic::Ordering::Relaxed).max(2))
}

type Key = (u128, usize, Option<u32>, u64, u64);

struct Entry {
    decoded: Arc<Result<Decoded, DecodeError>>,
    /// Whether it was read again (such entries are evicted first).
    used: bool,
    size: usize,
}

#[derive(Default)]
struct Cache {
    map: crate::kernels::FastMap<Key, Entry>,
    /// Keys in insertion order (may hold keys already evicted through `used`).
    fresh: std::collections::VecDeque<Key>,
    used: std::collections::VecDeque<Key>,
    bytes: usize,
}

static CACHE: std::sync::LazyLock<std::sync::Mutex<Cache>> =
    std::sync::LazyLock::new(Default::default);

#[cfg(test)]
mod tests {
    use super::*;

    /// The decode cache grows with the tasks the process runs at once (a 64-core
    /// worker's 64 slots get 4 GiB, 64 MiB each), never below two tasks' worth.
    #[test]
    fn the_decode_cache_is_sized_by_the_tasks_at_once() {
        let before = TASKS.load(std::sync::atomic::Ordering::Relaxed);
        set_tasks(64);
        assert_eq!(cache_bytes(), 4 << 30);
        set_tasks(1);
        assert_eq!(cache_bytes(), 128 << 20);
        set_tasks(0);
        assert_eq!(cache_bytes(), 128 << 20);
        set_tasks(before);
    }

    #[test]
    fn a_second_decode_of_the_same_bytes_is_a_cache_hit() {
        let img = image::RgbImage::from_fn(300, 200, |x, y| image::Rgb([x as u8, y as u8, 7]));
        let mut b = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut b, 90)
            .encode_image(&img)
            .unwrap();
        let l = Limits::default();
        let a = decode_cached(&b, &l, Some(64));
        let copy = b.clone();
        let c = decode_cached(&copy, &l, Some(64));
        assert!(
            Arc::ptr_eq(&a, &c),
            "same content, same parameters: one decode"
        );
        let d = decode_cached(&b, &l, Some(32));
        assert!(!Arc::ptr_eq(&a, &d), "other parameters decode again");
        assert_eq!(a.as_ref().as_ref().unwrap().scale, 2);
        // Both image stages read one luma plane, made once, equal to luma(rgb).
        let (da, dc) = (a.as_ref().as_ref().unwrap(), c.as_ref().as_ref().unwrap());
        assert_eq!(da.luma(), crate::kernels::imagehash::luma(&da.rgb));
        assert!(std::ptr::eq(da.luma(), dc.luma()));
    }
}
