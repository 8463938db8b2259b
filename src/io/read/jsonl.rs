//! JSON Lines (plain, gzip, zstd). Uncompressed files may be read by byte range: a
//! range task owns every line that *starts* in `[start, end)`, so adjacent ranges
//! together read each line exactly once. Lines longer than `max_record_bytes` are
//! rejected without being buffered; invalid UTF-8, invalid JSON and values that do not
//! fit the schema are rejected with the line kept.
use super::{Compression, Item, ReadCtx, ReadError, SliceStats, file_reject, open_range};
use crate::protocol::records::InputSlice;
use crate::records::{JsonBatchBuilder, Reject, file_key, record_id};
use arrow_schema::SchemaRef;
use futures::StreamExt;
use std::io::{BufRead, BufReader, Read};

/// Reads one line (without its `\n`) into `buf`, keeping at most `cap` bytes.
/// Returns the bytes consumed (0 at the end) and whether the line was longer than `cap`.
pub fn read_line_capped(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<(u64, bool)> {
    buf.clear();
    let mut consumed = 0u64;
    let mut over = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok((consumed, over));
        }
        let (take, done) = match memchr::memchr(b'\n', avail) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        let content = if done {
            &avail[..take - 1]
        } else {
            &avail[..take]
        };
        let room = cap.saturating_sub(buf.len());
        if content.len() > room {
            over = true;
        }
        buf.extend_from_slice(&content[..content.len().min(room)]);
        r.consume(take);
        consumed += take as u64;
        if done {
            return Ok((consumed, over));
        }
    }
}

pub fn read(
    ctx: &ReadCtx,
    slice: &InputSlice,
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    let comp = Compression::of(&slice.uri);
    let ranged = comp == Compression::None;
    let (from, end) = if ranged {
        (slice.start.saturating_sub(1), slice.end)
    } else {
        (0, u64::MAX)
    };
    let decoded = match super::open_or_reject(ctx, slice, from, out)? {
        Ok(r) => r,
        Err(rejected) => return Ok(rejected),
    };
    // A UTF-8 byte order mark (files saved as "UTF-8 with BOM") is not part of the
    // first line's text, but the line still starts at byte 0: the range holding
    // byte 0 owns it, however short.
    let (decoded, mut bom_line) = if from == 0 {
        match strip_bom(decoded) {
            Ok(x) => x,
            Err(e) => {
                out(Item::Rejects(vec![file_reject(
                    slice,
                    0,
                    "corrupt_input",
                    e.to_string(),
                )]));
                return Ok(SliceStats {
                    rejected: 1,
                    ..Default::default()
                });
            }
        }
    } else {
        (decoded, false)
    };
    let mut r = BufReader::with_capacity(1 << 16, decoded);
    let key = file_key(&slice.uri);
    let cap = ctx.max_record_bytes;
    let mut stats = SliceStats::default();
    let mut pos = from;
    let mut buf = Vec::with_capacity(4096);
    let io_err =
        |e: std::io::Error, pos: u64| file_reject(slice, pos, "corrupt_input", e.to_string());
    // A range that does not start the file skips the line in progress at `start`.
    if ranged && slice.start > 0 {
        match read_line_capped(&mut r, &mut buf, 0) {
            Ok((n, _)) => pos += n,
            Err(e) => {
                out(Item::Rejects(vec![io_err(e, pos)]));
                return Ok(SliceStats {
                    rejected: 1,
                    ..stats
                });
            }
        }
    }
    if bom_line {
        pos += BOM.len() as u64;
        if ranged && slice.start > 0 {
            // Line 1 (the BOM's) was skipped as the previous range's.
            bom_line = false;
        } else {
            stats.bytes += BOM.len() as u64;
        }
    }
    // Line numbers are known when this slice reads from the file's first line.
    // (A range starting at byte 1 reads from 0 and has skipped the first line.)
    let mut line_no = (from == 0).then_some(u64::from(ranged && slice.start > 0));
    let mut builder = JsonBatchBuilder::new(schema.clone());
    let mut batch_bytes = 0usize;
    let mut rejects: Vec<Reject> = Vec::new();
    let flush =
        |b: &mut JsonBatchBuilder, rj: &mut Vec<Reject>, out: &mut dyn FnMut(Item) -> bool| {
            let mut go = true;
            if !rj.is_empty() {
                go &= out(Item::Rejects(std::mem::take(rj)));
            }
            if !b.is_empty() {
                go &= out(Item::Batch(b.finish()));
            }
            go
        };
    loop {
        let line_start = if std::mem::take(&mut bom_line) {
            0
        } else {
            pos
        };
        if line_start >= end {
            break;
        }
        if ctx.cancelled() {
            return Err(ReadError::Cancelled);
        }
        let (n, over) = match read_line_capped(&mut r, &mut buf, cap) {
            Ok(x) => x,
            Err(e) => {
                rejects.push(io_err(e, line_start));
                stats.rejected += 1;
                break;
            }
        };
        if n == 0 {
            break;
        }
        pos += n;
        stats.bytes += n;
        batch_bytes += n as usize;
        if let Some(l) = line_no.as_mut() {
            *l += 1;
        }
        let id = record_id(&key, line_start);
        // Where the line is, so a reject can be found without decoding its id.
        let at = |detail: String| match line_no {
            Some(l) => format!("{detail} ({}, line {l})", slice.uri),
            None => format!("{detail} ({}, the line at byte {line_start})", slice.uri),
        };
        let reject = |reason: &str, detail: String, record: Option<String>| Reject {
            id: id.clone(),
            reason: reason.to_string(),
            operator: "reader".to_string(),
            detail: Some(at(detail)),
            record,
        };
        if over {
            rejects.push(reject(
                "record_too_large",
                format!(
                    "line of {} bytes exceeds input.max_record_bytes ({cap})",
                    n - 1
                ),
                None,
            ));
            stats.rejected += 1;
        } else {
            let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match std::str::from_utf8(line) {
                Err(e) => {
                    rejects.push(reject(
                        "invalid_utf8",
                        e.to_string(),
                        Some(String::from_utf8_lossy(line).into_owned()),
                    ));
                    stats.rejected += 1;
                }
                Ok(text) => {
                    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text) {
                        Err(e) => {
                            rejects.push(reject("bad_json", e.to_string(), Some(text.to_string())));
                            stats.rejected += 1;
                        }
                        Ok(obj) => match builder.push(&id, &obj) {
                            Ok(()) => stats.records += 1,
                            Err(why) => {
                                rejects.push(reject(
                                    "schema_mismatch",
                                    why,
                                    Some(text.to_string()),
                                ));
                                stats.rejected += 1;
                            }
                        },
                    }
                }
            }
        }
        if builder.len() >= ctx.batch_rows
            || rejects.len() >= ctx.batch_rows
            || batch_bytes >= ctx.batch_bytes
        {
            batch_bytes = 0;
            if !flush(&mut builder, &mut rejects, out) {
                return Err(ReadError::Cancelled);
            }
        }
    }
    flush(&mut builder, &mut rejects, out);
    Ok(stats)
}

/// The UTF-8 byte order mark, skipped at the start of a file.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The stream without a leading BOM, and whether it had one. Reads the first three
/// bytes however the stream delivers them (a decompressor may give one at a time).
fn strip_bom(mut r: Box<dyn Read + Send>) -> std::io::Result<(Box<dyn Read + Send>, bool)> {
    let mut head = [0u8; 3];
    let mut n = 0;
    while n < head.len() {
        match r.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if head[..n] == *BOM {
        Ok((r, true))
    } else {
        Ok((
            Box::new(std::io::Cursor::new(head[..n].to_vec()).chain(r)),
            false,
        ))
    }
}

/// Reads up to `max_rows` JSON objects from the start of a file (schema inference).
pub fn sample_rows(
    ctx: &ReadCtx,
    uri: &str,
    max_rows: usize,
    max_bytes: u64,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, ReadError> {
    let raw = open_range(ctx, uri, 0, None)?;
    let decoded = super::decompress(raw, uri).map_err(|e| ReadError::Storage {
        uri: uri.to_string(),
        message: e.to_string(),
    })?;
    let (decoded, _) = strip_bom(decoded).map_err(|e| ReadError::Storage {
        uri: uri.to_string(),
        message: e.to_string(),
    })?;
    let mut r = BufReader::new(decoded.take(max_bytes));
    let mut rows = Vec::new();
    let mut buf = Vec::new();
    while rows.len() < max_rows {
        match read_line_capped(&mut r, &mut buf, 1 << 24) {
            Ok((0, _)) | Err(_) => break,
            Ok((_, true)) => continue,
            Ok(_) => {
                if let Ok(obj) = serde_json::from_slice(&buf) {
                    rows.push(obj);
                }
            }
        }
    }
    Ok(rows)
}

/// Schema inference reads the first lines of up to this many files,
const SAMPLE_FILES: usize = 16;
/// up to this many lines in all (shared equally by the files),
const SAMPLE_ROWS: usize = 1000;
/// and at least this many of each file.
const SAMPLE_ROWS_PER_FILE: usize = 64;

/// `format: jsonl` (also `json`, `ndjson`).
pub struct Jsonl;

#[async_trait::async_trait]
impl super::Reader for Jsonl {
    fn name(&self) -> &'static str {
        "jsonl"
    }

    /// Declared, or inferred from the first lines of up to 16 files: every key seen
    /// is a column, whichever file has it (one unreadable file does not stop a job).
    async fn columns(
        &self,
        registry: &crate::store::Registry,
        uris: &[&str],
        declared: Option<&[(String, arrow_schema::DataType)]>,
    ) -> Result<Vec<(String, arrow_schema::DataType)>, super::ColumnsError> {
        if let Some(cols) = declared {
            return Ok(cols.to_vec());
        }
        let ctx = ReadCtx {
            registry: registry.clone(),
            handle: tokio::runtime::Handle::current(),
            batch_rows: 1,
            batch_bytes: 1 << 20,
            max_record_bytes: 1 << 24,
            cancel: Default::default(),
            assign_ids: true,
            download: Default::default(),
            cut: Default::default(),
            broken: Default::default(),
        };
        let mut last_err = String::new();
        let mut sampled = Vec::new();
        // Up to SAMPLE_ROWS lines in all, shared by the files, and at least
        // SAMPLE_ROWS_PER_FILE of each, so a key only later files have is still
        // seen; the files are read 8 at a time (on S3, one first-byte wait, not 16).
        let files: Vec<String> = uris
            .iter()
            .take(SAMPLE_FILES)
            .map(|u| u.to_string())
            .collect();
        let want = (SAMPLE_ROWS / files.len().max(1)).max(SAMPLE_ROWS_PER_FILE);
        let reads = files.into_iter().map(|uri| {
            let ctx = ctx.clone();
            tokio::task::spawn_blocking(move || sample_rows(&ctx, &uri, want, 4 << 20))
        });
        let results: Vec<_> = futures::stream::iter(reads).buffered(8).collect().await;
        for rows in results {
            match rows.map_err(|e| super::ColumnsError::Storage(e.to_string()))? {
                Ok(rows) => sampled.extend(rows),
                // An unreadable file: at run time it becomes rejects.
                Err(e) => last_err = format!(" ({e})"),
            }
        }
        if !sampled.is_empty() {
            return Ok(crate::records::infer_schema(sampled.iter()));
        }
        Err(super::ColumnsError::Spec {
            field: "input.schema",
            message: format!(
                "cannot infer columns: no JSON object in the first lines of {}{}{last_err}; declare input.schema",
                uris.first().copied().unwrap_or_default(),
                if uris.len() > 1 {
                    format!(" or the next {} files", uris.len().min(16) - 1)
                } else {
                    String::new()
                }
            ),
        })
    }

    /// Uncompressed files, by line.
    fn splittable(&self, uri: &str) -> bool {
        Compression::of(uri) == Compression::None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_lines_skip_without_buffering() {
        let data = b"short\nwaaaaaaaaaaaay too long\nlast";
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line_capped(&mut r, &mut buf, 8).unwrap(), (6, false));
        assert_eq!(buf, b"short");
        assert_eq!(read_line_capped(&mut r, &mut buf, 8).unwrap(), (24, true));
        assert_eq!(buf.len(), 8);
        assert_eq!(read_line_capped(&mut r, &mut buf, 8).unwrap(), (4, false));
        assert_eq!(buf, b"last");
        assert_eq!(read_line_capped(&mut r, &mut buf, 8).unwrap(), (0, false));
    }
}
