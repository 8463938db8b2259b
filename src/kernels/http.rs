//! HTTP responses as WARC archives hold them, and their text: status and header
//! parsing, chunked transfer decoding, bounded Content-Encoding (gzip, deflate), and
//! charset detection (byte-order mark, HTTP charset, `<meta>`, then chardetng). Pure:
//! bytes in, values out; no I/O, no knowledge of WARC or storage.
use std::borrow::Cow;
use std::io::Read;

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
}
