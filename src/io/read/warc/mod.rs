//! WARC input (`format: warc`): WARC/1.0, 1.1 and 0.18, per-record gzip (CommonCrawl)
//! or uncompressed, streaming: memory never scales with the file size. Emits one row
//! per HTTP `response` record: url (angle brackets stripped), WARC date and record id,
//! HTTP status, content type and charset, and the de-chunked body. Other record types
//! are skipped. A gzip member that fails to decode is rejected (`corrupt_input`) and
//! reading resumes at the next gzip member. A response cut short (end of file, broken
//! compression, or a `WARC-Truncated` header) is kept with what was read and
//! `truncated = true`, as warcio and FastWARC keep it; a body over `max_record_bytes`
//! is rejected without being buffered (`record_too_large`).
//!
//! Byte-range tasks on `.warc.gz`: a task owns every gzip member that starts in its
//! range; it finds the first member boundary at or after its start by scanning for the
//! gzip magic and checking that the member decodes to `WARC/`. Record ids use the
//! compressed offset of their member, as CommonCrawl's index does.
//!
//! This file is the reader adapter: gzip members and byte ranges, batches, rejects.
//! Record headers and member boundaries are parsed in [`record`]; the HTTP response
//! and its charset in [`crate::kernels::http`].
pub mod record;

use super::{Compression, Item, ReadCtx, ReadError, SliceStats, file_reject, stream_reject};
use crate::kernels::http::{Decoded, HttpResponse, decode_text, is_text, parse_http};
use crate::protocol::records::InputSlice;
use crate::records::{Reject, file_key, record_id};
use arrow_array::builder::{BooleanBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use record::{
    ARC_VERSION, Counting, GZIP_MAGIC, WarcHeader, member_starts_warc, next_arc_header,
    read_header, resync,
};
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;

/// The columns a WARC input provides (after `id`).
pub fn columns() -> Vec<(String, DataType)> {
    [
        ("url", DataType::Utf8),
        ("warc_date", DataType::Utf8),
        ("warc_record_id", DataType::Utf8),
        ("http_status", DataType::Int64),
        ("content_type", DataType::Utf8),
        ("charset", DataType::Utf8),
        ("html", DataType::Utf8),
        ("truncated", DataType::Boolean),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t))
    .collect()
}

/// The columns a WET input provides (after `id`): CommonCrawl's extracted text.
pub fn wet_columns() -> Vec<(String, DataType)> {
    [
        ("url", DataType::Utf8),
        ("warc_date", DataType::Utf8),
        ("warc_record_id", DataType::Utf8),
        ("text", DataType::Utf8),
        ("cc_languages", DataType::Utf8),
        ("truncated", DataType::Boolean),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t))
    .collect()
}

/// Row builders for one batch.
struct Rows {
    /// WET mode: `conversion` records with plain text, instead of HTTP responses.
    wet: bool,
    langs: StringBuilder,
    schema: SchemaRef,
    id: StringBuilder,
    url: StringBuilder,
    date: StringBuilder,
    rid: StringBuilder,
    status: Int64Builder,
    ctype: StringBuilder,
    charset: StringBuilder,
    html: StringBuilder,
    truncated: BooleanBuilder,
    n: usize,
    bytes: usize,
    /// Bytes reserved for a batch's pages up front: a batch is cut once its pages
    /// reach `batch_bytes`, so it rarely outgrows this, and is not copied as it grows.
    page_capacity: usize,
}

impl Rows {
    fn new(schema: SchemaRef, wet: bool, batch_bytes: usize) -> Self {
        let page_capacity = batch_bytes.saturating_add(1 << 20);
        Rows {
            page_capacity,
            wet,
            langs: StringBuilder::new(),
            schema,
            id: StringBuilder::new(),
            url: StringBuilder::new(),
            date: StringBuilder::new(),
            rid: StringBuilder::new(),
            status: Int64Builder::new(),
            ctype: StringBuilder::new(),
            charset: StringBuilder::new(),
            html: StringBuilder::with_capacity(1024, page_capacity),
            truncated: BooleanBuilder::new(),
            n: 0,
            bytes: 0,
        }
    }
    fn push(
        &mut self,
        id: &str,
        url: Option<&str>,
        h: &WarcHeader,
        http: &HttpResponse,
        text: Decoded,
        cut: bool,
    ) {
        self.truncated
            .append_value(cut || http.short || h.get("WARC-Truncated").is_some());
        self.id.append_value(id);
        self.url.append_option(url);
        self.date.append_option(h.get("WARC-Date"));
        self.rid.append_option(h.get("WARC-Record-ID"));
        self.status.append_option(http.status);
        self.ctype.append_option(http.content_type.as_deref());
        self.charset.append_value(text.encoding);
        self.html.append_value(&text.text);
        self.n += 1;
        self.bytes += text.text.len();
    }
    fn push_wet(&mut self, id: &str, url: Option<&str>, h: &WarcHeader, text: &str, cut: bool) {
        self.truncated
            .append_value(cut || h.get("WARC-Truncated").is_some());
        self.id.append_value(id);
        self.url.append_option(url);
        self.date.append_option(h.get("WARC-Date"));
        self.rid.append_option(h.get("WARC-Record-ID"));
        self.html.append_value(text);
        self.langs
            .append_option(h.get("WARC-Identified-Content-Language"));
        self.n += 1;
        self.bytes += text.len();
    }

    /// The batch's pages, the builder left with room for the next batch's.
    fn take_pages(&mut self) -> ArrayRef {
        let next = StringBuilder::with_capacity(1024, self.page_capacity);
        Arc::new(std::mem::replace(&mut self.html, next).finish())
    }

    fn finish(&mut self) -> RecordBatch {
        if self.wet {
            let cols: Vec<ArrayRef> = vec![
                Arc::new(self.id.finish()),
                Arc::new(self.url.finish()),
                Arc::new(self.date.finish()),
                Arc::new(self.rid.finish()),
                self.take_pages(),
                Arc::new(self.langs.finish()),
                Arc::new(self.truncated.finish()),
            ];
            self.n = 0;
            self.bytes = 0;
            return RecordBatch::try_new(self.schema.clone(), cols).expect("wet schema");
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.id.finish()),
            Arc::new(self.url.finish()),
            Arc::new(self.date.finish()),
            Arc::new(self.rid.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.ctype.finish()),
            Arc::new(self.charset.finish()),
            self.take_pages(),
            Arc::new(self.truncated.finish()),
        ];
        self.n = 0;
        self.bytes = 0;
        RecordBatch::try_new(self.schema.clone(), cols).expect("warc schema")
    }
}

/// Reads records from one decoded stream (a gzip member, or a whole plain file).
/// Returns false when the consumer stopped.
#[allow(clippy::too_many_arguments)]
fn read_records(
    r: &mut impl BufRead,
    base: u64,
    per_member: bool,
    key: &str,
    source: &str,
    ctx: &ReadCtx,
    rows: &mut Rows,
    rejects: &mut Vec<Reject>,
    stats: &mut SliceStats,
    out: &mut dyn FnMut(Item) -> bool,
) -> std::io::Result<()> {
    let mut n_in_member = 0u64;
    let mut counting = Counting { inner: r, pos: 0 };
    // An ARC header found while skipping an undelimited record: (its offset, header).
    let mut pending: Option<(u64, WarcHeader)> = None;
    loop {
        // Batches are cut here as well as after each record: a stream that ends inside
        // a record returns before the check below, and a file of such gzip members
        // would otherwise grow one batch without bound (found by fuzzing).
        if (rows.n >= ctx.batch_rows
            || rows.bytes >= ctx.batch_bytes
            || rejects.len() >= ctx.batch_rows)
            && !flush(rows, rejects, out)
        {
            return Err(std::io::Error::other(Stopped));
        }
        let (start, h) = match pending.take() {
            Some(p) => p,
            None => {
                let start = counting.pos;
                let Some(h) = read_header(&mut counting)? else {
                    return Ok(());
                };
                (start, h)
            }
        };
        let offset = if per_member { base } else { base + start };
        let id = if per_member && n_in_member > 0 {
            // More than one record in one member (whole-file gzip): keep ids unique.
            record_id(key, offset + n_in_member)
        } else {
            record_id(key, offset)
        };
        n_in_member += 1;
        // What a reader reject keeps of the record (its body is not text, too large,
        // or undecodable): where it came from and which it was, so it can be found.
        let meta = |h: &WarcHeader| {
            let url = h
                .get("WARC-Target-URI")
                .map(|u| u.trim().trim_start_matches('<').trim_end_matches('>'));
            Some(
                serde_json::json!({
                    "url": url,
                    "warc_record_id": h.get("WARC-Record-ID"),
                    "warc_date": h.get("WARC-Date"),
                    "source": source,
                    "offset": offset,
                })
                .to_string(),
            )
        };
        if h.version == ARC_VERSION && h.content_length().is_none() {
            // An ARC header line with a bad length: its body cannot be delimited, so
            // a response is quarantined and reading goes on at the next ARC header line.
            if h.get("WARC-Type") == Some("response") {
                stats.rejected += 1;
                rejects.push(Reject {
                    id,
                    reason: "corrupt_input".into(),
                    operator: "reader".into(),
                    detail: Some("ARC record header without a valid length".into()),
                    record: meta(&h),
                });
            }
            match next_arc_header(&mut counting)? {
                Some(p) => pending = Some(p),
                None => return Ok(()),
            }
            continue;
        }
        let len = h.content_length().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "record without a valid Content-Length",
            )
        })?;
        let wanted_type = if rows.wet { "conversion" } else { "response" };
        let is_response = h
            .get("WARC-Type")
            .is_some_and(|t| t.eq_ignore_ascii_case(wanted_type));
        let wanted = is_response && len <= ctx.max_record_bytes as u64;
        // A block already in the reader's buffer (always, for a gzip member
        // decompressed whole) is used in place; otherwise it is copied out.
        let in_place = counting.fill_buf().is_ok_and(|b| b.len() as u64 >= len);
        let mut owned = Vec::new();
        let mut broken = None;
        let mut got = 0u64;
        if in_place {
            got = len;
        } else {
            // Read what there is: a stream may end or break inside the block.
            let mut limited = (&mut counting).take(len);
            let mut chunk = [0u8; 64 << 10];
            loop {
                match limited.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        got += n as u64;
                        if wanted {
                            owned.extend_from_slice(&chunk[..n]);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        broken = Some(e);
                        break;
                    }
                }
            }
        }
        let block: &[u8] = if in_place {
            &counting.fill_buf()?[..len as usize]
        } else {
            &owned
        };
        stats.bytes += got;
        let cut = got < len;
        if is_response && !wanted {
            stats.rejected += 1;
            rejects.push(Reject {
                id,
                reason: "record_too_large".into(),
                operator: "reader".into(),
                detail: Some(format!(
                    "block of {len} bytes exceeds input.max_record_bytes ({})",
                    ctx.max_record_bytes
                )),
                record: meta(&h),
            });
        } else if is_response && rows.wet {
            let url = h
                .get("WARC-Target-URI")
                .map(|u| u.trim().trim_start_matches('<').trim_end_matches('>'));
            let text = String::from_utf8_lossy(block);
            let bad = text.chars().filter(|&c| c == '\u{FFFD}').count();
            if bad * 10 > text.chars().count().max(1) {
                stats.rejected += 1;
                rejects.push(Reject {
                    id,
                    reason: "undecodable".into(),
                    operator: "reader".into(),
                    detail: Some(format!("{bad} characters are not UTF-8")),
                    record: meta(&h),
                });
            } else {
                stats.records += 1;
                rows.push_wet(&id, url, &h, text.trim_end(), cut);
            }
        } else if is_response {
            let http = parse_http(block);
            let url = h
                .get("WARC-Target-URI")
                .map(|u| u.trim().trim_start_matches('<').trim_end_matches('>'));
            let reject = |reason: &str, detail: String| Reject {
                id: id.clone(),
                reason: reason.into(),
                operator: "reader".into(),
                detail: Some(detail),
                record: meta(&h),
            };
            if !is_text(http.content_type.as_deref()) {
                stats.rejected += 1;
                rejects.push(reject(
                    "not_text",
                    format!(
                        "content type {}",
                        http.content_type.as_deref().unwrap_or("?")
                    ),
                ));
            } else {
                let text = decode_text(&http.body, http.charset.as_deref(), url);
                if text.bad_ratio > 0.1 {
                    stats.rejected += 1;
                    rejects.push(reject(
                        "undecodable",
                        format!(
                            "{:.0}% of characters do not decode as {}",
                            text.bad_ratio * 100.0,
                            text.encoding
                        ),
                    ));
                } else {
                    stats.records += 1;
                    rows.push(&id, url, &h, &http, text, cut);
                }
            }
        }
        if in_place {
            counting.consume(len as usize);
        }
        if let Some(e) = broken {
            return Err(e);
        }
        if cut {
            return Ok(());
        }
        if (rows.n >= ctx.batch_rows
            || rows.bytes >= ctx.batch_bytes
            || rejects.len() >= ctx.batch_rows)
            && !flush(rows, rejects, out)
        {
            return Err(std::io::Error::other(Stopped));
        }
    }
}

/// The consumer stopped reading (cancelled task).
#[derive(Debug)]
struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped")
    }
}

impl std::error::Error for Stopped {}

fn is_stopped(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<Stopped>())
}

fn flush(rows: &mut Rows, rj: &mut Vec<Reject>, out: &mut dyn FnMut(Item) -> bool) -> bool {
    let mut go = true;
    if !rj.is_empty() {
        go &= out(Item::Rejects(std::mem::take(rj)));
    }
    if rows.n > 0 {
        go &= out(Item::Batch(rows.finish()));
    }
    go
}

pub fn read(
    ctx: &ReadCtx,
    slice: &InputSlice,
    schema: &SchemaRef,
    out: &mut dyn FnMut(Item) -> bool,
) -> Result<SliceStats, ReadError> {
    let key = file_key(&slice.uri);
    let gz = Compression::of(&slice.uri) == Compression::Gzip;
    let mut stats = SliceStats::default();
    let wet = slice.format == crate::spec::Format::Wet;
    let mut rows = Rows::new(schema.clone(), wet, ctx.batch_bytes);
    let mut rejects: Vec<Reject> = Vec::new();
    // Opens the file from `from`; a vanished file becomes one reject and `None`.
    let open = |from: u64, out: &mut dyn FnMut(Item) -> bool| match super::open_range(
        ctx,
        &slice.uri,
        from,
        slice.etag.as_deref(),
    ) {
        Ok(r) => Ok(Some(BufReader::with_capacity(1 << 16, r))),
        Err(ReadError::Missing { message, .. }) => {
            out(Item::Rejects(vec![file_reject(
                slice,
                from,
                "input_missing",
                message,
            )]));
            Ok(None)
        }
        Err(e) => Err(e),
    };
    let missing = SliceStats {
        rejected: 1,
        ..Default::default()
    };
    if let Some(detail) = super::empty_compressed(slice) {
        out(Item::Rejects(vec![file_reject(
            slice,
            0,
            "corrupt_input",
            detail,
        )]));
        return Ok(missing);
    }
    if !gz {
        let Some(mut r) = open(0, out)? else {
            return Ok(missing);
        };
        // Whatever the name says, gzip magic means gzip (read below, as one whole file).
        if !r.fill_buf().is_ok_and(|b| b.starts_with(&GZIP_MAGIC)) {
            // A compression mdf does not decode: one reject that says which, rather
            // than "expected a WARC version line" over compressed bytes.
            if let Some(name) = r.fill_buf().ok().and_then(unsupported_compression) {
                out(Item::Rejects(vec![file_reject(
                    slice,
                    0,
                    "unsupported_compression",
                    format!(
                        "{name}-compressed: mdf reads WARC files plain or gzip-compressed (per record, as CommonCrawl's, or whole); recompress it with gzip"
                    ),
                )]));
                return Ok(missing);
            }
            let mut r = Counting { inner: r, pos: 0 };
            if let Err(e) = read_records(
                &mut r,
                0,
                false,
                &key,
                &slice.uri,
                ctx,
                &mut rows,
                &mut rejects,
                &mut stats,
                out,
            ) {
                if is_stopped(&e) {
                    return Err(ReadError::Cancelled);
                }
                let at = r.pos;
                rejects.push(stream_reject(
                    slice,
                    at,
                    "corrupt_input",
                    format!("at byte {at}: {e}"),
                ));
                stats.rejected += 1;
            }
            flush(&mut rows, &mut rejects, out);
            return Ok(stats);
        }
    }
    // Find the first member boundary at or after the range start.
    let mut begin = slice.start;
    if slice.start > 0 {
        let Some(mut r) = open(slice.start, out)? else {
            return Ok(missing);
        };
        let mut window = Vec::new();
        let found = loop {
            let before = window.len();
            (&mut r)
                .take(1 << 20)
                .read_to_end(&mut window)
                .map_err(|e| ReadError::Storage {
                    uri: slice.uri.clone(),
                    message: e.to_string(),
                })?;
            let eof = window.len() == before;
            let scan_to = window.len().saturating_sub(if eof { 0 } else { 64 << 10 });
            let hit = memchr::memmem::find_iter(&window[..scan_to], &GZIP_MAGIC)
                .find(|&i| member_starts_warc(&window[i..]));
            if let Some(i) = hit {
                break Some(i as u64);
            }
            if eof || slice.start + window.len() as u64 >= slice.end + (64 << 10) {
                break None;
            }
        };
        match found {
            Some(i) if slice.start + i < slice.end => begin = slice.start + i,
            _ => return Ok(stats),
        }
    }
    // A file that is gzip only by its content is read whole.
    let end = if Compression::of(&slice.uri) == Compression::Gzip {
        slice.end
    } else {
        u64::MAX
    };
    // Members are decompressed whole while they can be; the streaming reader below
    // takes over at a member that is corrupt, cut short, or larger than a record may
    // be (a whole file gzipped as one member), with its error handling and resync.
    let Some(src) = open(begin, out)? else {
        return Ok(missing);
    };
    let cap = ctx.max_record_bytes.saturating_add(1 << 20).max(8 << 20);
    let mut whole = Whole {
        key: &key,
        slice,
        ctx,
        rows: &mut rows,
        rejects: &mut rejects,
        stats: &mut stats,
        out,
    };
    let resume = match whole.read(src, begin, end, cap) {
        Ok(WholeEnd::Done) => {
            flush(&mut rows, &mut rejects, out);
            return Ok(stats);
        }
        Ok(WholeEnd::StreamFrom(at)) => at,
        Ok(WholeEnd::ReadFailed(at, e)) => {
            rejects.push(stream_reject(
                slice,
                at,
                "corrupt_input",
                format!("at byte {at}: {e}"),
            ));
            stats.rejected += 1;
            flush(&mut rows, &mut rejects, out);
            return Ok(stats);
        }
        Err(e) if is_stopped(&e) => return Err(ReadError::Cancelled),
        Err(e) => {
            return Err(ReadError::Storage {
                uri: slice.uri.clone(),
                message: e.to_string(),
            });
        }
    };
    let Some(inner) = open(resume, out)? else {
        return Ok(missing);
    };
    let mut r = Counting { inner, pos: resume };
    loop {
        if ctx.cancelled() {
            return Err(ReadError::Cancelled);
        }
        let member = r.pos;
        if member >= end {
            break;
        }
        match r.fill_buf() {
            Ok([]) => break,
            Ok(_) => {}
            Err(e) => {
                rejects.push(stream_reject(
                    slice,
                    member,
                    "corrupt_input",
                    format!("at byte {member}: {e}"),
                ));
                stats.rejected += 1;
                break;
            }
        }
        let result = {
            let dec = flate2::bufread::GzDecoder::new(&mut r);
            let mut br = BufReader::with_capacity(1 << 16, dec);
            read_records(
                &mut br,
                member,
                true,
                &key,
                &slice.uri,
                ctx,
                &mut rows,
                &mut rejects,
                &mut stats,
                out,
            )
            .and_then(|()| std::io::copy(&mut br, &mut std::io::sink()).map(|_| ()))
        };
        if let Err(e) = &result
            && is_stopped(e)
        {
            return Err(ReadError::Cancelled);
        }
        if let Err(e) = result {
            rejects.push(member_reject(slice, member, &e));
            stats.rejected += 1;
            // Resynchronise at the next gzip member that starts a WARC record.
            if !resync(&mut r) {
                break;
            }
        } else if r.pos == member {
            break; // no progress: not gzip at all
        }
    }
    flush(&mut rows, &mut rejects, out);
    Ok(stats)
}

/// The compression a file's first bytes show, where mdf does not read it for WARC.
fn unsupported_compression(head: &[u8]) -> Option<&'static str> {
    [
        (&[0x04, 0x22, 0x4d, 0x18][..], "LZ4"),
        (&[0x28, 0xb5, 0x2f, 0xfd][..], "zstd"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0x00][..], "xz"),
        (&b"BZh"[..], "bzip2"),
        (&[b'P', b'K', 0x03, 0x04][..], "zip"),
    ]
    .into_iter()
    .find(|(magic, _)| head.starts_with(magic))
    .map(|(_, name)| name)
}

/// The reject for a gzip member whose records could not be read.
fn member_reject(slice: &InputSlice, member: u64, e: &std::io::Error) -> Reject {
    stream_reject(
        slice,
        member,
        "corrupt_input",
        format!("gzip member at byte {member}: {e}"),
    )
}

/// How [`Whole::read`] ended.
enum WholeEnd {
    /// The range (or the file) is read.
    Done,
    /// The member at this offset needs the streaming reader.
    StreamFrom(u64),
    /// The store failed reading at this offset.
    ReadFailed(u64, std::io::Error),
}

/// The whole-member path of [`read`]: its row builders and outputs.
struct Whole<'a> {
    key: &'a str,
    slice: &'a InputSlice,
    ctx: &'a ReadCtx,
    rows: &'a mut Rows,
    rejects: &'a mut Vec<Reject>,
    stats: &'a mut SliceStats,
    out: &'a mut dyn FnMut(Item) -> bool,
}

/// Compressed bytes kept ahead of the member being decompressed (members are
/// ~30 KiB; a larger one grows the window up to `cap`).
const WINDOW: usize = 1 << 20;

impl Whole<'_> {
    /// Reads the gzip members from `pos` (a member start) that start before `end`,
    /// each decompressed whole; members up to `cap` bytes, compressed and inflated.
    fn read(
        &mut self,
        mut src: impl Read,
        mut pos: u64,
        end: u64,
        cap: usize,
    ) -> std::io::Result<WholeEnd> {
        let mut inflater = super::inflate::GzipMembers::new();
        let mut win: Vec<u8> = Vec::with_capacity(2 * WINDOW);
        let mut start = 0usize;
        let mut eof = false;
        let mut inflated = vec![0u8; WINDOW];
        let mut want = WINDOW;
        loop {
            if self.ctx.cancelled() {
                return Err(std::io::Error::other(Stopped));
            }
            if pos >= end {
                return Ok(WholeEnd::Done);
            }
            if !eof && win.len() - start < want {
                win.drain(..start);
                start = 0;
                while !eof && win.len() < want {
                    let have = win.len();
                    match (&mut src)
                        .take((want - have).max(WINDOW) as u64)
                        .read_to_end(&mut win)
                    {
                        Ok(0) => eof = true,
                        Ok(_) => {}
                        Err(e) => return Ok(WholeEnd::ReadFailed(pos, e)),
                    }
                }
            }
            let input = &win[start..];
            if input.is_empty() {
                return Ok(WholeEnd::Done);
            }
            if !input.starts_with(&GZIP_MAGIC) {
                return Ok(WholeEnd::StreamFrom(pos));
            }
            match inflater.member(input, &mut inflated) {
                Ok((used, n)) => {
                    want = WINDOW;
                    let r = read_records(
                        &mut &inflated[..n],
                        pos,
                        true,
                        self.key,
                        &self.slice.uri,
                        self.ctx,
                        self.rows,
                        self.rejects,
                        self.stats,
                        self.out,
                    );
                    match r {
                        Err(e) if is_stopped(&e) => return Err(e),
                        Err(e) => {
                            self.rejects.push(member_reject(self.slice, pos, &e));
                            self.stats.rejected += 1;
                        }
                        Ok(()) => {}
                    }
                    start += used;
                    pos += used as u64;
                }
                Err(super::inflate::InflateError::OutputFull) if inflated.len() < cap => {
                    inflated.resize((inflated.len() * 2).min(cap), 0);
                }
                // Perhaps the member goes on past the window.
                Err(super::inflate::InflateError::BadData) if !eof && input.len() < cap => {
                    want = (input.len() * 2).min(cap);
                }
                Err(_) => return Ok(WholeEnd::StreamFrom(pos)),
            }
        }
    }
}

/// `format: warc` (WARC and ARC files, one row per HTTP response) and `format: wet` (CommonCrawl's
/// extracted text, one row per `conversion` record): one reader over the same
/// records, differing only in name and columns.
pub struct Warc {
    name: &'static str,
    columns: fn() -> Vec<(String, DataType)>,
}

/// `format: warc`.
pub const WARC: Warc = Warc {
    name: "warc",
    columns,
};

/// `format: wet`.
pub const WET: Warc = Warc {
    name: "wet",
    columns: wet_columns,
};

#[async_trait::async_trait]
impl super::Reader for Warc {
    fn name(&self) -> &'static str {
        self.name
    }
    async fn columns(
        &self,
        _registry: &crate::store::Registry,
        _uris: &[&str],
        _declared: Option<&[(String, DataType)]>,
    ) -> Result<Vec<(String, DataType)>, super::ColumnsError> {
        Ok((self.columns)())
    }
    /// Per-record gzip members are the split points.
    fn splittable(&self, uri: &str) -> bool {
        Compression::of(uri) == Compression::Gzip
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
