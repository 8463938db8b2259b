//! WARC record parsing, below the reader: record headers (WARC/1.0, 1.1, 0.18 and
//! ARC's one-line headers read as their WARC equivalent), the byte position of each
//! record in its stream, and finding gzip member boundaries (a member that decodes to
//! a record) to start a byte range or resume after a corrupt member. Knows nothing of
//! HTTP, batches or storage.
use std::io::{BufRead, Read};

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

/// Counts the bytes consumed from a buffered reader.
pub struct Counting<R> {
    pub inner: R,
    pub pos: u64,
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

pub const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Whether the gzip member at the start of `buf` decodes to a WARC record (or an ARC
/// record, whose header is one line).
pub fn member_starts_warc(buf: &[u8]) -> bool {
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

/// Skips lines up to the next ARC header line: (its offset, the header), or `None`
/// at the end of the stream.
pub fn next_arc_header<R: BufRead>(
    r: &mut Counting<R>,
) -> std::io::Result<Option<(u64, WarcHeader)>> {
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

/// Skips forward to the next gzip member that decodes to `WARC/`; false at the end.
pub fn resync<R: BufRead>(r: &mut Counting<R>) -> bool {
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
