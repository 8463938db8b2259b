//! The WARC reader on real files from ../shared/data/warc (CommonCrawl excerpts,
//! other crawlers, and malformed files): response counts agree with warcio's
//! inventory, nothing panics, bad records are rejected with a reason, and byte-range
//! tasks over a .warc.gz read every record exactly once.
use arrow_array::{Array, RecordBatch, StringArray};
use mdf::io::read::{Item, ReadCtx, warc};
use mdf::protocol::records::InputSlice;
use mdf::records::Reject;
use mdf::spec::Format;
use mdf::store::Registry;
use std::path::PathBuf;

fn data() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/warc");
    assert!(
        p.is_dir(),
        "missing test data: {} (the shared data folder beside the project)",
        p.display()
    );
    p
}

fn read(path: &std::path::Path, start: u64, end: u64) -> (Vec<RecordBatch>, Vec<Reject>) {
    read_as(path, start, end, Format::Warc)
}

fn read_as(
    path: &std::path::Path,
    start: u64,
    end: u64,
    format: Format,
) -> (Vec<RecordBatch>, Vec<Reject>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let size = std::fs::metadata(path).unwrap().len();
    let slice = InputSlice {
        uri: format!("file://{}", path.canonicalize().unwrap().display()),
        size,
        etag: None,
        format,
        start,
        end: end.min(size),
    };
    let ctx = ReadCtx {
        registry: Registry::with_wrapper(Default::default(), None),
        handle: rt.handle().clone(),
        batch_rows: 7,
        batch_bytes: 1 << 20,
        max_record_bytes: 8 << 20,
        cancel: Default::default(),
        assign_ids: true,
        download: Default::default(),
        cut: Default::default(),
        broken: Default::default(),
    };
    let (mut batches, mut rejects) = (vec![], vec![]);
    let cols = if format == Format::Wet {
        warc::wet_columns()
    } else {
        warc::columns()
    };
    let schema = mdf::records::with_id_column(&cols);
    rt.block_on(async {
        tokio::task::spawn_blocking(move || {
            warc::read(&ctx, &slice, &schema, &mut |item| {
                match item {
                    Item::Batch(b) => batches.push(b),
                    Item::Rejects(r) => rejects.extend(r),
                }
                true
            })
            .unwrap();
            (batches, rejects)
        })
        .await
        .unwrap()
    })
}

fn rows(b: &[RecordBatch]) -> usize {
    b.iter().map(|b| b.num_rows()).sum()
}

/// (path, warcio response count, warcio error) from the inventory.
fn inventory() -> Vec<(String, usize, bool)> {
    let text = std::fs::read_to_string(data().join("inventory.csv")).unwrap();
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let path = line.split(',').next().unwrap().to_string();
        let pat = "\"\"response\"\": ";
        let responses = line
            .find(pat)
            .map(|i| {
                line[i + pat.len()..]
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .unwrap_or(0);
        // warcio_error is the 6th column; a non-empty value means warcio failed.
        let cols: Vec<&str> = line.split(',').collect();
        let failed = cols
            .iter()
            .any(|c| c.contains("Error") || c.contains("error:"));
        out.push((path, responses, failed));
    }
    out
}

#[test]
fn response_counts_match_warcio_on_real_files() {
    let mut checked = 0;
    for (path, responses, warcio_failed) in inventory() {
        let is_warc = [".warc", ".warc.gz", ".arc", ".arc.gz"]
            .iter()
            .any(|x| path.ends_with(x));
        if !is_warc || path.contains(".wet.") || path.contains(".wat.") {
            continue;
        }
        let (b, rejects) = read(&data().join(&path), 0, u64::MAX);
        if !warcio_failed {
            // Every response is either a row or a reject with a reason (non-text bodies).
            // (ARC records whose header has no valid length are quarantined.)
            let not_text = rejects
                .iter()
                .filter(|r| {
                    r.reason == "not_text"
                        || r.detail.as_deref() == Some("ARC record header without a valid length")
                })
                .count();
            assert_eq!(
                rows(&b) + not_text,
                responses,
                "{path}: response records (rejects: {rejects:?})"
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "checked only {checked} files");
}

#[test]
fn commoncrawl_records_carry_url_status_charset_and_body() {
    let (b, rejects) = read(
        &data().join("commoncrawl/resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"),
        0,
        u64::MAX,
    );
    assert!(rejects.is_empty(), "{rejects:?}");
    assert_eq!(rows(&b), 16);
    let urls = b[0]
        .column_by_name("url")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .clone();
    assert!(urls.value(0).starts_with("http"), "{}", urls.value(0));
    let html = b[0]
        .column_by_name("html")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .clone();
    assert!(
        html.value(0).to_ascii_lowercase().contains("<html"),
        "the body is the HTML"
    );
    // Mostly Chinese pages, many in GBK/GB2312: decoded to UTF-8 Han text.
    let all: Vec<String> = b
        .iter()
        .flat_map(|b| {
            let a = b
                .column_by_name("html")
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone();
            (0..a.len()).map(move |i| a.value(i).to_string())
        })
        .collect();
    let han = all
        .iter()
        .filter(|h| h.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)))
        .count();
    assert!(han >= 5, "{han} pages with Han characters");
    assert!(
        all.iter().all(|h| h.matches('\u{FFFD}').count() < 50),
        "pages decode cleanly"
    );
    // Ids are the compressed offsets of the records' gzip members: unique and sorted.
    let ids: Vec<String> = b
        .iter()
        .flat_map(|b| {
            let a = b
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone();
            (0..a.len()).map(move |i| a.value(i).to_string())
        })
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, ids);
    // Angle-bracketed target URIs (WARC 1.0 draft style) are unwrapped.
    let (d, _) = read(
        &data().join("other-crawlers/dolma_sample-0000.warc.gz"),
        0,
        u64::MAX,
    );
    let u = d[0]
        .column_by_name("url")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .clone();
    assert!(
        !u.value(0).starts_with('<') && !u.value(0).ends_with('>'),
        "{}",
        u.value(0)
    );
}

#[test]
fn byte_ranges_over_warc_gz_read_each_record_once() {
    let p = data().join("commoncrawl/resiliparse_CC-MAIN-2020-34_excerpt.warc.gz");
    let size = std::fs::metadata(&p).unwrap().len();
    for step in [4096u64, 10_000, 33_333] {
        let mut ids = Vec::new();
        let mut start = 0;
        while start < size {
            let (b, rejects) = read(&p, start, start + step);
            ids.extend(rejects.iter().map(|r| r.id.clone()));
            for batch in &b {
                let a = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                ids.extend((0..a.len()).map(|i| a.value(i).to_string()));
            }
            start += step;
        }
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!((n, ids.len()), (16, 16), "step {step}");
    }
}

fn column(b: &[RecordBatch], name: &str) -> Vec<String> {
    b.iter()
        .flat_map(|b| {
            let c = arrow_cast::display::ArrayFormatter::try_new(
                b.column_by_name(name).unwrap().as_ref(),
                &Default::default(),
            )
            .unwrap();
            (0..b.num_rows())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn arc_files_read_as_responses_with_url_date_and_body() {
    let dir = data().join("edge-cases/warcio");
    for f in ["example.arc", "example.arc.gz", "example-space-in-url.arc"] {
        let (b, rejects) = read(&dir.join(f), 0, u64::MAX);
        assert!(rejects.is_empty(), "{f}: {rejects:?}");
        assert_eq!(rows(&b), 1, "{f}");
        let url = &column(&b, "url")[0];
        if f.contains("space") {
            assert!(
                url.starts_with("http://example.com/index.cfm?FuseAction=Email&EmailTitle=Examples From The Live Web"),
                "{f}: spaces kept: {url}"
            );
        } else {
            assert_eq!(url, "http://example.com/", "{f}");
        }
        assert_eq!(column(&b, "warc_date")[0], "2014-02-16T05:02:21Z", "{f}");
        assert_eq!(column(&b, "http_status")[0], "200", "{f}");
        assert!(column(&b, "html")[0].contains("Example Domain"), "{f}");
    }
    // Header lines with lengths of -1 and "abc": quarantined, the rest still read.
    let (b, rejects) = read(&dir.join("bad.arc"), 0, u64::MAX);
    let bad = rejects
        .iter()
        .filter(|r| r.reason == "corrupt_input")
        .count();
    assert_eq!(bad, 2, "{rejects:?}");
    assert_eq!(rows(&b) + rejects.len(), 3, "{rejects:?}");
    // Format inference: .arc and .arc.gz are read by the WARC reader.
    assert_eq!(
        Format::infer("s3://b/x/IAH-2008.arc.gz"),
        Some(Format::Warc)
    );
}

#[test]
fn malformed_files_never_panic_and_reject_with_reasons() {
    let dir = data().join("edge-cases");
    let mut seen = 0;
    for sub in ["warcio", "resiliparse", "jwarc"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let p = e.unwrap().path();
            let (_, rejects) = read(&p, 0, u64::MAX);
            for r in &rejects {
                assert!(
                    [
                        "corrupt_input",
                        "record_too_large",
                        "not_text",
                        "undecodable",
                        "unsupported_compression"
                    ]
                    .contains(&r.reason.as_str()),
                    "{}: {r:?}",
                    p.display()
                );
            }
            seen += 1;
        }
    }
    assert!(seen > 15);
    // A record cut short is kept with what was read, flagged `truncated`.
    {
        let f = "resiliparse/clipped.warc.gz";
        let (b, _) = read(&dir.join(f), 0, u64::MAX);
        let t: Vec<bool> = b
            .iter()
            .flat_map(|b| {
                let a = b
                    .column_by_name("truncated")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<arrow_array::BooleanArray>()
                    .unwrap()
                    .clone();
                (0..a.len()).map(move |i| a.value(i))
            })
            .collect();
        assert!(t.contains(&true), "{f}: {t:?}");
    }
}

#[test]
fn a_corrupt_gzip_member_is_skipped_and_reading_resumes() {
    let src = std::fs::read(data().join("commoncrawl/resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"))
        .unwrap();
    // Damage the deflate data of the third member.
    let starts: Vec<usize> = memchr::memmem::find_iter(&src, &[0x1f, 0x8b, 0x08]).collect();
    let mut bad = src.clone();
    for b in &mut bad[starts[2] + 20..starts[2] + 60] {
        *b ^= 0x5a;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("damaged.warc.gz");
    std::fs::write(&p, &bad).unwrap();
    let (b, rejects) = read(&p, 0, u64::MAX);
    assert!(
        rejects.iter().any(|r| r.reason == "corrupt_input"),
        "{rejects:?}"
    );
    assert!(
        rows(&b) >= 14,
        "records after the damaged member are still read: {}",
        rows(&b)
    );
}

#[test]
fn wet_conversion_records_match_their_warc_response() {
    let (w, rejects) = read_as(
        &data().join("commoncrawl/whirlwind.warc.wet.gz"),
        0,
        u64::MAX,
        Format::Wet,
    );
    assert!(rejects.is_empty(), "{rejects:?}");
    assert_eq!(rows(&w), 1);
    let col = |b: &RecordBatch, c: &str| {
        b.column_by_name(c)
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .value(0)
            .to_string()
    };
    let text = col(&w[0], "text");
    assert!(text.len() > 100, "{text}");
    let (h, _) = read(&data().join("commoncrawl/whirlwind.warc.gz"), 0, u64::MAX);
    assert_eq!(
        col(&w[0], "url"),
        col(&h[0], "url"),
        "the WET record is of the same page"
    );
    // Every line of CommonCrawl's text appears in the page's HTML (modulo entities).
    let html = col(&h[0], "html");
    let first = text
        .lines()
        .find(|l| l.split_whitespace().count() >= 3 && !l.contains('&'))
        .unwrap();
    let probe: String = first
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        html.contains(&probe) || html.contains(first.split_whitespace().next().unwrap()),
        "{probe}"
    );
}

/// Found by fuzzing: gzip members that each end inside their record used to pile all
/// their rows into one batch; batches stay within `batch_rows` (7 here).
#[test]
fn members_cut_inside_their_record_still_make_bounded_batches() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let mut file = Vec::new();
    for i in 0..40 {
        let body = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>page {i}</p>");
        let rec = format!(
            "WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://a.example/{i}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len() + 500
        );
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(rec.as_bytes()).unwrap();
        file.extend(e.finish().unwrap());
    }
    let p = d.path().join("cut-members.warc.gz");
    std::fs::write(&p, file).unwrap();
    let (b, _) = read(&p, 0, u64::MAX);
    assert_eq!(rows(&b), 40, "every cut record is kept (flagged truncated)");
    assert!(
        b.iter().all(|b| b.num_rows() <= 7),
        "{:?}",
        b.iter().map(|b| b.num_rows()).collect::<Vec<_>>()
    );
}

/// One gzip member holding a WARC response record with `html` as its page.
fn member(i: usize, html: &str) -> Vec<u8> {
    use std::io::Write;
    let http = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n{html}");
    let rec = format!(
        "WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://example.com/{i}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{i:012}>\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: {}\r\n\r\n{http}\r\n\r\n",
        http.len()
    );
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(rec.as_bytes()).unwrap();
    e.finish().unwrap()
}

#[test]
fn members_larger_than_the_read_window_or_a_record_are_read_or_rejected_in_order() {
    // Letters from a xorshift generator: ~2.4 MB compressed, past the 1 MiB window
    // that members are first tried in.
    let mut x = 0x9e3779b97f4a7c15u64;
    let noisy: String = (0..3_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect();
    let mut file = Vec::new();
    for i in 0..3 {
        file.extend(member(i, &format!("<p>small page {i}</p>")));
    }
    file.extend(member(3, &format!("<p>{noisy}</p>")));
    assert!(file.len() > 2 << 20);
    // 12 MB inflated: over max_record_bytes (8 MiB here), left to the streaming reader.
    file.extend(member(4, &"<p>same words again</p>".repeat(500_000)));
    for i in 5..8 {
        file.extend(member(i, &format!("<p>small page {i}</p>")));
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big-members.warc.gz");
    std::fs::write(&p, &file).unwrap();
    let (b, rejects) = read(&p, 0, u64::MAX);
    let urls: Vec<String> = b
        .iter()
        .flat_map(|b| {
            let c = b.column_by_name("url").unwrap();
            let c = c.as_any().downcast_ref::<StringArray>().unwrap();
            (0..c.len())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let want: Vec<String> = [0, 1, 2, 3, 5, 6, 7]
        .iter()
        .map(|i| format!("http://example.com/{i}"))
        .collect();
    assert_eq!(urls, want);
    let html = b
        .iter()
        .find_map(|b| {
            let c = b.column_by_name("html").unwrap();
            let c = c.as_any().downcast_ref::<StringArray>().unwrap();
            (0..c.len())
                .map(|i| c.value(i))
                .find(|h| h.len() > 1000)
                .map(str::to_string)
        })
        .unwrap();
    assert_eq!(html, format!("<p>{noisy}</p>"));
    let reasons: Vec<&str> = rejects.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons, ["record_too_large"], "{rejects:?}");
}
