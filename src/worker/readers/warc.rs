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
use super::{Compression, Item, ReadCtx, ReadError, SliceStats, file_reject};
use crate::protocol::records::InputSlice;
use crate::records::{Reject, file_key, record_id};
use arrow_array::builder::{BooleanBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use std::borrow::Cow;
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

/// One parsed WARC record header.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct WarcHeader {
    pub version: String,
    pub fields: Vec<(String, String)>,
}

impl WarcHeader {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn content_length(&self) -> Option<u64> {
        self.get("Content-Length")?.trim().parse().ok()
    }
}

/// Reads the next record header; `Ok(None)` at a clean end of input.
pub fn read_header(r: &mut impl BufRead) -> std::io::Result<Option<WarcHeader>> {
    let mut line = Vec::new();
    // Skip blank lines between records.
    loop {
        line.clear();
        if r.take(64 << 10).read_until(b'\n', &mut line)? == 0 {
            return Ok(None);
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            break;
        }
    }
    let first = String::from_utf8_lossy(&line).trim().to_string();
    if !first.starts_with("WARC/") {
        // An ARC record (the Internet Archive's pre-WARC format) has a one-line header.
        if let Some(h) = arc_header(&first) {
            return Ok(Some(h));
        }
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "expected a WARC version line, found {:?}",
                first.chars().take(40).collect::<String>()
            ),
        ));
    }
    let mut h = WarcHeader {
        version: first,
        fields: vec![],
    };
    loop {
        line.clear();
        if r.take(64 << 10).read_until(b'\n', &mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "record header cut short",
            ));
        }
        let l = String::from_utf8_lossy(&line);
        let l = l.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if (l.starts_with(' ') || l.starts_with('\t')) && !h.fields.is_empty() {
            // Folded continuation line.
            let last = h.fields.last_mut().expect("non-empty");
            last.1.push(' ');
            last.1.push_str(l.trim());
            continue;
        }
        if let Some((k, v)) = l.split_once(':') {
            h.fields.push((k.trim().to_string(), v.trim().to_string()));
        }
        if h.fields.len() > 1000 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "more than 1000 header fields",
            ));
        }
    }
    Ok(Some(h))
}

/// The version string given to headers read from ARC records.
pub const ARC_VERSION: &str = "ARC";

/// Parses an ARC record's header line as the equivalent WARC header: version 1
/// (`URL IP-address Archive-date Content-type Archive-length`, where the URL may
/// contain spaces) or version 2 (`URL IP date mime result-code checksum location
/// offset filename length`). The `filedesc://` version block becomes `warcinfo`,
/// everything else `response`; the 14-digit date becomes ISO 8601. A length that is
/// not a number is left out (the caller quarantines the record). `None` when the line
/// is not an ARC header.
pub fn arc_header(line: &str) -> Option<WarcHeader> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let is_date = |d: &str| d.len() >= 12 && d.bytes().all(|b| b.is_ascii_digit());
    let n = f.len();
    // (url, date, mime, length)
    let (url, date, mime, len) = if n >= 5 && is_date(f[n - 3]) {
        (f[..n - 4].join(" "), f[n - 3], f[n - 2], f[n - 1])
    } else if n == 10 && is_date(f[2]) {
        (f[0].to_string(), f[2], f[3], f[9])
    } else {
        return None;
    };
    if !url.contains(':') {
        return None;
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &date[0..4],
        &date[4..6],
        &date[6..8],
        &date[8..10],
        &date[10..12],
        date.get(12..14).unwrap_or("00")
    );
    let kind = if url.starts_with("filedesc:") {
        "warcinfo"
    } else {
        "response"
    };
    let mut fields = vec![
        ("WARC-Type".to_string(), kind.to_string()),
        ("WARC-Target-URI".to_string(), url),
        ("WARC-Date".to_string(), iso),
        ("Content-Type".to_string(), mime.to_string()),
    ];
    if len.parse::<u64>().is_ok() {
        fields.push(("Content-Length".to_string(), len.to_string()));
    }
    Some(WarcHeader {
        version: ARC_VERSION.to_string(),
        fields,
    })
}

/// An HTTP response split into status, headers and the (de-chunked) body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse<'a> {
    /// The body is shorter than the HTTP Content-Length said.
    pub short: bool,
    pub status: Option<i64>,
    pub content_type: Option<String>,
    pub charset: Option<String>,
    /// Borrowed from the block unless it was dechunked or decompressed.
    pub body: Cow<'a, [u8]>,
}

/// Parses an HTTP response block. Tolerant like browsers: a bad chunked encoding
/// keeps the raw body.
pub fn parse_http(block: &[u8]) -> HttpResponse<'_> {
    let header_end = find(block, b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| find(block, b"\n\n").map(|i| (i, i + 2)));
    let Some((hend, bstart)) = header_end else {
        return HttpResponse {
            short: false,
            status: None,
            content_type: None,
            charset: None,
            body: Cow::Borrowed(block),
        };
    };
    let head = String::from_utf8_lossy(&block[..hend]);
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok());
    let (mut content_type, mut chunked, mut declared, mut encoding) = (None, false, None, None);
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim();
            if k.eq_ignore_ascii_case("content-type") {
                content_type = Some(v.trim().to_string());
            } else if k.eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
            {
                chunked = true;
            } else if k.eq_ignore_ascii_case("content-encoding") {
                encoding = Some(v.trim().to_ascii_lowercase());
            } else if k.eq_ignore_ascii_case("content-length") {
                declared = v.trim().parse::<usize>().ok();
            }
        }
    }
    let raw = &block[bstart..];
    let body = match chunked.then(|| dechunk(raw)).flatten() {
        Some(b) => Cow::Owned(b),
        None => Cow::Borrowed(raw),
    };
    let short = !chunked && declared.is_some_and(|d| body.len() < d);
    // Undo Content-Encoding (gzip, deflate) so the body is the document itself.
    let (body, cut) = match encoding.as_deref() {
        Some("gzip" | "x-gzip") => {
            let (b, cut) = decode_bounded(flate2::read::MultiGzDecoder::new(&body[..]), &body);
            (Cow::Owned(b), cut)
        }
        Some("deflate") => {
            let (b, cut) = decode_bounded(flate2::read::ZlibDecoder::new(&body[..]), &body);
            (Cow::Owned(b), cut)
        }
        _ => (body, false),
    };
    let charset = content_type.as_deref().and_then(charset_of);
    let mime = content_type.map(|c| {
        c.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    HttpResponse {
        short: short || cut,
        status,
        content_type: mime,
        charset,
        body,
    }
}

/// Decompresses at most 64 MiB (a decompression bomb is cut there). On a broken
/// stream keeps what was decoded and reports it cut; if nothing decodes, keeps `raw`.
fn decode_bounded(d: impl Read, raw: &[u8]) -> (Vec<u8>, bool) {
    const MAX: u64 = 64 << 20;
    let mut out = Vec::new();
    let mut limited = d.take(MAX + 1);
    let mut buf = [0u8; 16 << 10];
    loop {
        match limited.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) if out.is_empty() => return (raw.to_vec(), false),
            Err(_) => return (out, true),
        }
    }
    if out.len() as u64 > MAX {
        out.truncate(MAX as usize);
        return (out, true);
    }
    (out, false)
}

/// Whether a MIME type is text that a text pipeline wants (HTML, XHTML, plain text,
/// or unknown).
pub fn is_text(mime: Option<&str>) -> bool {
    match mime {
        None | Some("") => true,
        Some(m) => m.starts_with("text/") || m.contains("html") || m.contains("xml"),
    }
}

/// A body converted to UTF-8.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<'a> {
    /// Borrowed from the body when it is valid UTF-8 already.
    pub text: Cow<'a, str>,
    /// The WHATWG name of the encoding used.
    pub encoding: &'static str,
    /// Share of characters that did not decode.
    pub bad_ratio: f64,
}

/// Decodes an HTML body: byte-order mark, then the HTTP charset, then `<meta>` in the
/// first 4 KiB, then detection: a body that is valid UTF-8 is UTF-8 (what chardetng
/// would answer, at a fraction of its cost), otherwise chardetng with the URL's TLD as
/// a hint.
pub fn decode_text<'a>(
    body: &'a [u8],
    http_charset: Option<&str>,
    url: Option<&str>,
) -> Decoded<'a> {
    use encoding_rs::Encoding;
    let enc = Encoding::for_bom(body)
        .map(|(e, _)| e)
        .or_else(|| http_charset.and_then(|c| Encoding::for_label(c.as_bytes())))
        .or_else(|| {
            meta_charset(&body[..body.len().min(4096)])
                .and_then(|c| Encoding::for_label(c.as_bytes()))
        })
        .or_else(|| {
            std::str::from_utf8(body)
                .is_ok()
                .then_some(encoding_rs::UTF_8)
        })
        .unwrap_or_else(|| {
            let mut det = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
            det.feed(&body[..body.len().min(64 << 10)], body.len() <= 64 << 10);
            // chardetng wants a lower-case ASCII label and panics otherwise (found by
            // fuzzing: `http://EXAMPLE.DE/`); anything else is no hint.
            let tld = url
                .and_then(|u| u.split("://").nth(1))
                .and_then(|rest| rest.split(['/', ':', '?', '#']).next())
                .and_then(|host| host.trim_end_matches('.').rsplit('.').next())
                .map(str::to_ascii_lowercase)
                .filter(|t| {
                    !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            det.guess(
                tld.as_deref().map(str::as_bytes),
                chardetng::Utf8Detection::Allow,
            )
        });
    // A <meta> naming UTF-16 in an ASCII-compatible document means UTF-8 (WHATWG).
    let enc = if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
        if Encoding::for_bom(body).is_some() {
            enc
        } else {
            encoding_rs::UTF_8
        }
    } else {
        enc
    };
    let (text, used, had_errors) = enc.decode(body);
    // Only a decode with errors needs the share of replacement characters counted.
    let bad_ratio = if had_errors {
        let bad = memchr::memmem::find_iter(text.as_bytes(), "\u{FFFD}".as_bytes()).count();
        let total = text.bytes().filter(|&b| (b as i8) >= -0x40).count().max(1);
        bad as f64 / total as f64
    } else {
        0.0
    };
    Decoded {
        bad_ratio,
        text,
        encoding: used.name(),
    }
}

/// The charset a `<meta charset=...>` or `<meta http-equiv content="...charset=...">`
/// names in the first bytes of a document.
pub fn meta_charset(head: &[u8]) -> Option<String> {
    let lower = head.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = memchr::memmem::find(&lower[from..], b"<meta") {
        let tag_start = from + i;
        let tag_end = memchr::memchr(b'>', &lower[tag_start..])
            .map(|e| tag_start + e)
            .unwrap_or(lower.len());
        let tag = &lower[tag_start..tag_end];
        if let Some(c) = memchr::memmem::find(tag, b"charset") {
            let rest = &tag[c + 7..];
            let rest = rest
                .iter()
                .position(|&b| b != b' ')
                .map(|p| &rest[p..])
                .unwrap_or(rest);
            if let Some(rest) = rest.strip_prefix(b"=") {
                let rest: &[u8] = rest
                    .iter()
                    .position(|&b| !b" \"'".contains(&b))
                    .map(|p| &rest[p..])
                    .unwrap_or(&[]);
                let end = rest
                    .iter()
                    .position(|b| b" \"';/>".contains(b))
                    .unwrap_or(rest.len());
                let label = String::from_utf8_lossy(&rest[..end]).into_owned();
                if !label.is_empty() {
                    return Some(label);
                }
            }
        }
        from = tag_end.max(tag_start + 1);
    }
    None
}

/// `charset=` of a Content-Type value, lowercased, quotes removed.
pub fn charset_of(ct: &str) -> Option<String> {
    ct.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(['"', '\'']).to_ascii_lowercase())
            .filter(|c| !c.is_empty())
    })
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    memchr::memmem::find(h, n)
}

/// Decodes `Transfer-Encoding: chunked`; `None` if the chunk sizes do not add up.
pub fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let nl = find(b, b"\n")?;
        let size_text = std::str::from_utf8(&b[..nl]).ok()?.trim();
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        b = &b[nl + 1..];
        if size == 0 {
            return Some(out);
        }
        if b.len() < size {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size..];
        b = b
            .strip_prefix(b"\r\n")
            .or_else(|| b.strip_prefix(b"\n"))
            .unwrap_or(b);
        if b.is_empty() {
            return Some(out);
        }
    }
}

/// Counts the bytes consumed from a buffered reader.
struct Counting<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.pos += amt as u64;
        self.inner.consume(amt);
    }
}

const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Whether a gzip member starting at `buf[0]` decodes to a WARC record.
/// Whether the gzip member at the start of `buf` decodes to a WARC record (or an ARC
/// record, whose header is one line).
fn member_starts_warc(buf: &[u8]) -> bool {
    let mut d = flate2::bufread::GzDecoder::new(buf);
    let mut head = [0u8; 512];
    let mut got = 0;
    while got < head.len() {
        match d.read(&mut head[got..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    let head = &head[..got];
    if head.starts_with(b"WARC/") {
        return true;
    }
    memchr::memchr(b'\n', head)
        .and_then(|e| std::str::from_utf8(&head[..e]).ok())
        .is_some_and(|l| arc_header(l.trim()).is_some())
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
                    record: None,
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
                record: None,
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
                    record: None,
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
                record: None,
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

/// Skips lines up to the next ARC header line: (its offset, the header), or `None`
/// at the end of the stream.
fn next_arc_header<R: BufRead>(r: &mut Counting<R>) -> std::io::Result<Option<(u64, WarcHeader)>> {
    let mut line = Vec::new();
    loop {
        let at = r.pos;
        line.clear();
        if r.take(64 << 10).read_until(b'\n', &mut line)? == 0 {
            return Ok(None);
        }
        if let Some(h) = std::str::from_utf8(&line)
            .ok()
            .and_then(|l| arc_header(l.trim()))
        {
            return Ok(Some((at, h)));
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
    let open = |from: u64, out: &mut dyn FnMut(Item) -> bool| match super::jsonl::open_range(
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
    if !gz {
        let Some(mut r) = open(0, out)? else {
            return Ok(missing);
        };
        // Whatever the name says, gzip magic means gzip (read below, as one whole file).
        if !r.fill_buf().is_ok_and(|b| b.starts_with(&GZIP_MAGIC)) {
            if let Err(e) = read_records(
                &mut r,
                0,
                false,
                &key,
                ctx,
                &mut rows,
                &mut rejects,
                &mut stats,
                out,
            ) {
                if is_stopped(&e) {
                    return Err(ReadError::Cancelled);
                }
                rejects.push(file_reject(slice, 0, "corrupt_input", e.to_string()));
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
            rejects.push(file_reject(slice, at, "corrupt_input", e.to_string()));
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
                rejects.push(file_reject(slice, member, "corrupt_input", e.to_string()));
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

/// The reject for a gzip member whose records could not be read.
fn member_reject(slice: &InputSlice, member: u64, e: &std::io::Error) -> Reject {
    file_reject(
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

/// Skips forward to the next gzip member that decodes to `WARC/`; false at the end.
fn resync<R: BufRead>(r: &mut Counting<R>) -> bool {
    loop {
        let buf = match r.fill_buf() {
            Ok(b) if !b.is_empty() => b,
            _ => return false,
        };
        let len = buf.len();
        // Look for the magic beyond the first byte (the broken member's own start).
        match memchr::memmem::find(&buf[1.min(len)..], &GZIP_MAGIC) {
            Some(i) if member_starts_warc(&buf[i + 1..]) || len - (i + 1) < 512 => {
                r.consume(i + 1);
                return true;
            }
            Some(i) => r.consume(i + 1),
            None => r.consume(len.saturating_sub(2).max(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_parsing_dechunks_and_finds_charset() {
        let r = parse_http(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=\"ISO-8859-1\"\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
        assert_eq!(r.status, Some(200));
        assert_eq!(r.content_type.as_deref(), Some("text/html"));
        assert_eq!(r.charset.as_deref(), Some("iso-8859-1"));
        assert_eq!(&*r.body, b"hello world");
        // Wrong chunk sizes keep the raw body.
        let bad = parse_http(b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\nff\nshort");
        assert_eq!(&*bad.body, b"ff\nshort");
    }

    #[test]
    fn detection_takes_any_url_without_panicking() {
        let latin1 = b"<p>Gr\xfc\xdfe aus M\xfcnchen, sch\xf6ne Gr\xfc\xdfe</p>";
        for url in [
            "http://WWW.EXAMPLE.DE/x",
            "http://example.DE./",
            "http://\u{4f8b}\u{3048}.\u{30c6}\u{30b9}\u{30c8}/",
            "http://a.b_c/",
            "http://host/",
            "not a url",
        ] {
            let d = decode_text(latin1, None, Some(url));
            assert!(d.text.contains("M\u{fc}nchen"), "{url}: {}", d.text);
        }
    }

    #[test]
    fn charsets_from_header_meta_bom_and_detection() {
        let latin1 = b"<html><body>caf\xe9 cr\xe8me br\xfbl\xe9e</body></html>";
        assert_eq!(
            decode_text(latin1, Some("iso-8859-1"), None).text,
            "<html><body>café crème brûlée</body></html>"
        );
        let meta = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1251\"></head>\xcf\xf0\xe8\xe2\xe5\xf2";
        let d = decode_text(meta, None, None);
        assert_eq!(
            (d.encoding, d.text.ends_with("Привет")),
            ("windows-1251", true)
        );
        assert_eq!(
            meta_charset(b"<meta charset='Shift_JIS'>").as_deref(),
            Some("shift_jis")
        );
        let bom = b"\xef\xbb\xbfhello";
        assert_eq!(decode_text(bom, Some("iso-8859-1"), None).encoding, "UTF-8");
        let sjis = "日本語のテキストです。これは検出のテストです。".repeat(5);
        let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(&sjis);
        let d = decode_text(&bytes, None, Some("http://example.jp/x"));
        assert_eq!((d.encoding, &*d.text), ("Shift_JIS", sjis.as_str()));
        assert!(is_text(Some("text/html")) && is_text(None) && !is_text(Some("image/png")));
    }

    #[test]
    fn arc_header_lines_of_both_versions() {
        let h = arc_header("http://a.com/x y 1.2.3.4 20140216050221 text/html 1591").unwrap();
        assert_eq!(h.get("WARC-Type"), Some("response"));
        assert_eq!(h.get("WARC-Target-URI"), Some("http://a.com/x y"));
        assert_eq!(h.get("WARC-Date"), Some("2014-02-16T05:02:21Z"));
        assert_eq!(h.content_length(), Some(1591));
        let v2 = arc_header(
            "http://b.org/ 5.6.7.8 20080101120000 text/html 200 ABCDEF - 123 IAH-x.arc 77",
        )
        .unwrap();
        assert_eq!(v2.get("WARC-Target-URI"), Some("http://b.org/"));
        assert_eq!(v2.content_length(), Some(77));
        let fd = arc_header("filedesc://x.arc 0.0.0.0 20140301000000 text/plain -1").unwrap();
        assert_eq!(fd.get("WARC-Type"), Some("warcinfo"));
        assert_eq!(fd.content_length(), None);
        assert!(arc_header("1 0 LiveWeb Capture").is_none());
        assert!(arc_header("URL IP-address Archive-date Content-type Archive-length").is_none());
        assert!(arc_header("<html><body>").is_none());
    }

    #[test]
    fn headers_parse_with_folding_and_blank_lines() {
        let mut r = &b"\r\nWARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: <http://x/>\r\nX: a\r\n  b\r\nContent-Length: 3\r\n\r\nabc"[..];
        let h = read_header(&mut r).unwrap().unwrap();
        assert_eq!(h.version, "WARC/1.0");
        assert_eq!(h.get("x"), Some("a b"));
        assert_eq!(h.content_length(), Some(3));
        assert!(read_header(&mut &b"HTTP/1.1 200"[..]).is_err());
        assert!(read_header(&mut &b"\n\n"[..]).unwrap().is_none());
    }
}
