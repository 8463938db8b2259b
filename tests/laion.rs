//! `format: laion` end to end against a local HTTP server on 127.0.0.1 serving real
//! images with the failures the web has: 404s, slow responses, oversize bodies
//! (declared and streamed), wrong content types, redirects (good and looping), a flaky 503. Every URL ends as a record or a reject with its
//! reason; the job never fails; private addresses are refused unless allowed.
mod common;
use common::*;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What the server saw: each request's headers (lower-cased names), and per Host
/// header the most requests it served at once.
#[derive(Default)]
struct Seen {
    headers: Vec<BTreeMap<String, String>>,
    in_flight: BTreeMap<String, (usize, usize)>,
}

fn seen() -> &'static Mutex<Seen> {
    static S: std::sync::OnceLock<Mutex<Seen>> = std::sync::OnceLock::new();
    S.get_or_init(Default::default)
}

fn images_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/images")
}

/// Serves until the test ends; returns its port.
fn serve() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let flaky = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let flaky = flaky.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    return;
                }
                let mut headers = BTreeMap::new();
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                }
                let host = headers.get("host").cloned().unwrap_or_default();
                seen().lock().unwrap().headers.push(headers);
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                let reply = |s: &mut std::net::TcpStream, status: &str, ct: &str, body: &[u8]| {
                    let _ = write!(
                        s,
                        "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(body);
                };
                let redirect = |s: &mut std::net::TcpStream, to: &str| {
                    let _ = write!(
                        s,
                        "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                };
                match path.as_str() {
                    p if p.starts_with("/img/") => {
                        let f = images_dir().join(&p[5..]);
                        match std::fs::read(f) {
                            Ok(b) => reply(&mut s, "200 OK", "image/jpeg", &b),
                            Err(_) => reply(&mut s, "404 Not Found", "text/plain", b"no"),
                        }
                    }
                    "/slow" => {
                        std::thread::sleep(std::time::Duration::from_secs(4));
                        reply(&mut s, "200 OK", "image/jpeg", b"late");
                    }
                    "/big-declared" => {
                        let _ = write!(
                            s,
                            "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: 50000000\r\n\r\n"
                        );
                    }
                    "/big-streamed" => {
                        let _ = write!(
                            s,
                            "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nConnection: close\r\n\r\n"
                        );
                        let chunk = vec![0xFFu8; 64 << 10];
                        for _ in 0..64 {
                            if s.write_all(&chunk).is_err() {
                                break;
                            }
                        }
                    }
                    "/html" => reply(
                        &mut s,
                        "200 OK",
                        "text/html; charset=utf-8",
                        b"<html>hi</html>",
                    ),
                    p if p.starts_with("/robots/") => {
                        let tag = match &p[8..] {
                            "noai" => "noai",
                            "none" => "none",
                            "ours" => "mdf: noimageai",
                            "theirs" => "googlebot: noindex",
                            _ => "all",
                        };
                        let b = std::fs::read(images_dir().join("scene03.jpg")).unwrap();
                        let _ = write!(
                            s,
                            "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nX-Robots-Tag: {tag}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            b.len()
                        );
                        let _ = s.write_all(&b);
                    }
                    p if p.starts_with("/held/") => {
                        {
                            let mut g = seen().lock().unwrap();
                            let e = g.in_flight.entry(host.clone()).or_default();
                            e.0 += 1;
                            e.1 = e.1.max(e.0);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(150));
                        seen().lock().unwrap().in_flight.get_mut(&host).unwrap().0 -= 1;
                        let b = std::fs::read(images_dir().join("scene05.jpg")).unwrap();
                        reply(&mut s, "200 OK", "image/jpeg", &b);
                    }
                    "/redirect" => redirect(&mut s, "/img/scene02.jpg"),
                    "/loop" => redirect(&mut s, "/loop"),
                    "/flaky" => {
                        if flaky.fetch_add(1, Ordering::SeqCst) == 0 {
                            reply(&mut s, "503 Service Unavailable", "text/plain", b"busy");
                        } else {
                            let b = std::fs::read(images_dir().join("scene04.jpg")).unwrap();
                            reply(&mut s, "200 OK", "image/jpeg", &b);
                        }
                    }
                    _ => reply(&mut s, "404 Not Found", "text/plain", b"no"),
                }
            });
        }
    });
    port
}

fn reasons(out: &Path) -> BTreeMap<String, (String, String)> {
    let m = manifest(out);
    let mut v = BTreeMap::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        for ((reason, rec), op) in strings(&b, "reason")
            .into_iter()
            .zip(strings(&b, "record"))
            .zip(strings(&b, "operator"))
        {
            let url = serde_json::from_str::<serde_json::Value>(&rec)
                .ok()
                .and_then(|v| v["url"].as_str().map(str::to_string))
                .unwrap_or_default();
            let tail = url.rsplit('/').next().unwrap_or("").to_string();
            v.insert(
                if tail.is_empty() { url.clone() } else { tail },
                (reason, op),
            );
        }
    }
    v
}

#[test]
fn downloads_keep_good_images_and_reject_each_failure_with_its_reason() {
    let port = serve();
    let d = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let urls = [
        format!("{base}/img/scene00.jpg"),
        format!("{base}/img/scene01.jpg"),
        format!("{base}/img/scene00-recompressed.jpg"),
        format!("{base}/img/truncated.jpg"),
        format!("{base}/img/missing.jpg"),
        format!("{base}/slow"),
        format!("{base}/big-declared"),
        format!("{base}/big-streamed"),
        format!("{base}/html"),
        format!("{base}/redirect"),
        format!("{base}/loop"),
        format!("{base}/flaky"),
        "ftp://example.org/x.jpg".to_string(),
    ];
    let lines: Vec<String> = urls
        .iter()
        .enumerate()
        .map(|(i, u)| {
            serde_json::json!({"url": u, "caption": format!("caption {i}"), "similarity": 0.3})
                .to_string()
        })
        .collect();
    write_lines(&d.path().join("urls.jsonl"), &lines);
    let out = d.path().join("out");
    let o = run_ok(
        mdf()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "examples/laion.yaml", "-q", "--input"])
            .arg(d.path().join("urls.jsonl"))
            .arg("-o")
            .arg(&out)
            .args([
                "--set",
                "input.download.allow_private=true",
                "--set",
                "input.download.timeout_secs=1.5",
                "--set",
                "input.download.max_bytes=1MiB",
                "--set",
                "input.download.retries=1",
                "--job-root",
            ])
            .arg(d.path().join("jobs")),
    );
    let _ = o;
    let r = reasons(&out);
    let want = [
        ("missing.jpg", "http_404"),
        ("slow", "timeout"),
        ("big-declared", "too_large"),
        ("big-streamed", "too_large"),
        ("html", "wrong_content_type"),
        ("loop", "too_many_redirects"),
        ("x.jpg", "bad_url"),
        ("truncated.jpg", "truncated"),
        ("scene00-recompressed.jpg", "duplicate"),
    ];
    for (k, reason) in want {
        assert_eq!(r.get(k).map(|x| x.0.as_str()), Some(reason), "{k}: {r:?}");
    }
    assert_eq!(r["missing.jpg"].1, "download");
    // Kept: scene00, scene01, the redirect (scene02) and the flaky one after a retry.
    let m = manifest(&out);
    assert_eq!(m["rows"], 4, "{r:?}");
    let b = read_parquet(&out.join(m["files"][0]["path"].as_str().unwrap()));
    let caps = strings(&b, "caption");
    assert!(
        caps.contains(&"caption 9".to_string()) && caps.contains(&"caption 11".to_string()),
        "{caps:?}"
    );
    let cols = output_columns(&out);
    for c in [
        "url",
        "caption",
        "similarity",
        "content_type",
        "width",
        "phash",
    ] {
        assert!(cols.contains(&c.to_string()), "{c}: {cols:?}");
    }
}

#[test]
fn private_addresses_are_refused_unless_allowed() {
    let port = serve();
    let d = tempfile::tempdir().unwrap();
    let lines: Vec<String> = [
        format!("http://127.0.0.1:{port}/img/scene00.jpg"),
        format!("http://localhost:{port}/img/scene01.jpg"),
        "http://10.0.0.1/x.jpg".to_string(),
        "http://[::1]/y.jpg".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ]
    .iter()
    .map(|u| serde_json::json!({"url": u}).to_string())
    .collect();
    write_lines(&d.path().join("urls.jsonl"), &lines);
    let out = d.path().join("out");
    run_ok(
        mdf()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "examples/laion.yaml", "-q", "--input"])
            .arg(d.path().join("urls.jsonl"))
            .arg("-o")
            .arg(&out)
            .arg("--job-root")
            .arg(d.path().join("jobs")),
    );
    let r = reasons(&out);
    assert_eq!(r.len(), 5, "{r:?}");
    assert!(
        r.values().all(|(reason, _)| reason == "blocked_address"),
        "{r:?}"
    );
    assert_eq!(manifest(&out)["rows"], 0);
}

/// img2dataset's politeness: `X-Robots-Tag` opt-outs are rejects `opt_out` (for every
/// agent or ours, not another's), the spec's User-Agent and From reach the server, and
/// no host sees more than `per_host` requests at once while two hosts are served in
/// parallel.
#[test]
fn opt_outs_headers_and_per_host_limits() {
    let port = serve();
    let d = tempfile::tempdir().unwrap();
    let mut urls: Vec<String> = ["noai", "none", "ours", "theirs", "all"]
        .iter()
        .map(|t| format!("http://127.0.0.1:{port}/robots/{t}"))
        .collect();
    for i in 0..12 {
        urls.push(format!("http://127.0.0.1:{port}/held/a{i}"));
        urls.push(format!("http://localhost:{port}/held/b{i}"));
    }
    let lines: Vec<String> = urls
        .iter()
        .map(|u| serde_json::json!({"url": u}).to_string())
        .collect();
    write_lines(&d.path().join("urls.jsonl"), &lines);
    let out = d.path().join("out");
    // No stages: every downloaded image is a row (the held ones are one image).
    let spec = d.path().join("polite.yaml");
    std::fs::write(
        &spec,
        "version: 1\nname: polite\ninput: {uris: [urls.jsonl], format: laion}\n\
         output: {uri: out, drop_columns: [image]}\n",
    )
    .unwrap();
    run_ok(
        mdf()
            .current_dir(d.path())
            .args(["run", "polite.yaml", "-q"])
            .args([
                "--set",
                "input.download.allow_private=true",
                "--set",
                "input.download.per_host=2",
                "--set",
                "input.download.user_agent=curator-test/1.0",
                "--set",
                "input.download.from=data-team@example.org",
                "--job-root",
            ])
            .arg(d.path().join("jobs")),
    );
    let r = reasons(&out);
    for k in ["noai", "none", "ours"] {
        assert_eq!(
            r.get(k).map(|x| x.0.as_str()),
            Some("opt_out"),
            "{k}: {r:?}"
        );
    }
    assert_eq!(r.len(), 3, "{r:?}");
    assert_eq!(manifest(&out)["rows"], 2 + 24);
    let g = seen().lock().unwrap();
    let ours: Vec<_> = g
        .headers
        .iter()
        .filter(|h| {
            h.get("host")
                .is_some_and(|h| h.ends_with(&format!(":{port}")))
        })
        .collect();
    assert!(ours.len() >= 29, "{}", ours.len());
    for h in &ours {
        assert_eq!(
            h.get("user-agent").map(String::as_str),
            Some("curator-test/1.0")
        );
        assert_eq!(
            h.get("from").map(String::as_str),
            Some("data-team@example.org")
        );
    }
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let (now, max) = g.in_flight[&host];
        assert_eq!(now, 0);
        assert_eq!(max, 2, "{host}: at most per_host at once, and reached");
    }
}

/// examples/img2dataset.yaml end to end: downloaded images are resized at ingest to
/// 256×256 JPEGs (centre crop) and written as WebDataset shards with their captions.
#[test]
fn the_img2dataset_example_writes_resized_webdataset_shards() {
    let port = serve();
    let d = tempfile::tempdir().unwrap();
    let lines: Vec<String> = ["scene00.jpg", "scene01.jpg", "missing.jpg"]
        .iter()
        .enumerate()
        .map(|(i, f)| {
            serde_json::json!({"url": format!("http://127.0.0.1:{port}/img/{f}"), "caption": format!("caption {i}")})
                .to_string()
        })
        .collect();
    write_lines(&d.path().join("urls.jsonl"), &lines);
    let out = d.path().join("out");
    run_ok(
        mdf()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "examples/img2dataset.yaml", "-q", "--input"])
            .arg(d.path().join("urls.jsonl"))
            .arg("-o")
            .arg(&out)
            .args(["--set", "input.download.allow_private=true", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let mut samples: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for f in files_under(&out) {
        if !f.ends_with(".tar") {
            continue;
        }
        let mut a = tar::Archive::new(std::fs::File::open(out.join(&f)).unwrap());
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().to_string();
            let (key, ext) = name.split_once('.').unwrap();
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut b).unwrap();
            samples
                .entry(key.to_string())
                .or_default()
                .insert(ext.to_string(), b);
        }
    }
    assert_eq!(samples.len(), 2, "{:?}", samples.keys());
    let mut caps = Vec::new();
    for s in samples.values() {
        let img = image::load_from_memory(&s["jpg"]).unwrap();
        assert_eq!((img.width(), img.height()), (256, 256));
        caps.push(String::from_utf8(s["txt"].clone()).unwrap());
        let j: serde_json::Value = serde_json::from_slice(&s["json"]).unwrap();
        assert_eq!(j["width"], 256);
        assert!(j["original_width"].as_u64().unwrap() > 256, "{j}");
        assert_eq!(j["content_type"], "image/jpeg");
    }
    caps.sort();
    assert_eq!(caps, ["caption 0", "caption 1"]);
    assert_eq!(reasons(&out)["missing.jpg"].0, "http_404");
}
