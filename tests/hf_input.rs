//! `hf://datasets/...` inputs against a local Hub (scripts/hf-hub-server.py) that
//! serves the endpoints the real one does: the revision and paged tree APIs, resolve
//! URLs with LFS files redirected to a CDN on another host, a gated dataset, 429s.
//! A job reads exactly the records of the commit its revision named when it was
//! planned (a branch moved before any task ran changes nothing); byte-range JSONL tasks
//! and Parquet footers are read through ranges; the token reaches the Hub and never the
//! CDN; a 429 storm is waited out; a missing dataset, revision or access is refused at
//! submit, naming the input.
mod common;
use common::*;
use std::path::{Path, PathBuf};

type Hub = PyServer;

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const G: &str = "cccccccccccccccccccccccccccccccccccccccc";

trait HubExt {
    fn url(&self) -> String;
    fn post(&self, path: &str);
    fn log(&self) -> Vec<serde_json::Value>;
}

impl HubExt for Hub {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    fn post(&self, path: &str) {
        let o = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], method='POST'))",
            ])
            .arg(format!("{}{path}", self.url()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    fn log(&self) -> Vec<serde_json::Value> {
        let o = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())",
            ])
            .arg(format!("{}/admin/log", self.url()))
            .output()
            .unwrap();
        serde_json::from_slice::<Vec<serde_json::Value>>(&o.stdout).unwrap()
    }
}

/// A parquet file of `docs(seed, n)`'s url and text.
fn write_parquet(path: &Path, seed: u64, n: usize) {
    write_parquet_of(path, &docs(seed, n));
}

/// A parquet file of the url and text of JSON lines.
fn write_parquet_of(path: &Path, lines: &[String]) {
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use std::sync::Arc;
    let docs: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let col = |k: &str| -> ArrayRef {
        Arc::new(StringArray::from(
            docs.iter()
                .map(|d| d[k].as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
        ))
    };
    let b = RecordBatch::try_from_iter([("url", col("url")), ("text", col("text"))]).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, b.schema(), Some(props)).unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
}

/// The Hub's folder: `acme/web` at commits A (main) and B, `acme/gated` at G (gated).
fn hub_root(root: &Path) -> PathBuf {
    let web = root.join("repos/acme/web");
    for (sha, seed) in [(A, 0u64), (B, 100)] {
        for f in 0..3u64 {
            write_lines(
                &web.join(sha).join(format!("data/part-{f}.jsonl")),
                &docs(seed + f, 300),
            );
        }
        write_parquet(
            &web.join(sha).join("parquet/train-0.parquet"),
            seed + 7,
            450,
        );
        std::fs::write(web.join(sha).join("README.md"), "# acme/web\n").unwrap();
    }
    let gated = root.join("repos/acme/gated").join(G);
    write_lines(&gated.join("data/part-0.jsonl"), &docs(50, 100));
    write_parquet(&gated.join("data/train.parquet"), 51, 100);
    std::fs::write(
        root.join("refs.json"),
        serde_json::json!({"acme/web": {"main": A, "v2": B}, "acme/gated": {"main": G}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(root.join("gated.json"), r#"["acme/gated"]"#).unwrap();
    web.join(A)
}

fn serve(root: &Path) -> Hub {
    let args = [
        root.as_os_str(),
        "--token".as_ref(),
        "hf_secret".as_ref(),
        "--page-size".as_ref(),
        "2".as_ref(),
    ];
    py_server("hf-hub-server.py", &args, false)
}

/// `mdf` against the local Hub, without a token unless given.
fn hf_mdf(hub: &Hub, token: Option<&str>) -> std::process::Command {
    let mut c = mdf();
    c.env("HF_ENDPOINT", hub.url())
        .env_remove("HF_TOKEN")
        .env_remove("HUGGING_FACE_HUB_TOKEN");
    if let Some(t) = token {
        c.env("HF_TOKEN", t);
    }
    c
}

fn spec(dir: &Path, name: &str, uris: &str, format: &str) -> PathBuf {
    write_spec(
        dir,
        &format!(
            "version: 1\nname: {name}\ninput: {{uris: [{uris}], format: {format}}}\nstages:\n  - op: text_length\noutput: {{uri: \"{d}/{name}\", overwrite: true}}\njob: {{task_bytes: 8KiB}}\n",
            d = dir.display()
        ),
    )
}

#[test]
fn a_job_reads_the_commit_it_was_planned_on_through_ranges() {
    let d = tempfile::tempdir().unwrap();
    let a = hub_root(&d.path().join("hub"));
    let hub = serve(&d.path().join("hub"));
    let jobs = d.path().join("jobs");
    // Planned on main (= A), then main moves to B before any task runs.
    let remote = spec(
        d.path(),
        "remote",
        "\"hf://datasets/acme/web/data/*.jsonl\"",
        "jsonl",
    );
    let o = run_ok(
        hf_mdf(&hub, None)
            .args(["submit", remote.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    hub.post(&format!("/admin/move?repo=acme/web&ref=main&sha={B}"));
    // A 429 storm on the reads: waited out per Retry-After.
    hub.post("/admin/storm?n=4");
    run_ok(hf_mdf(&hub, None).args(["worker", "--job", &job, "--worker-id", "w1"]));
    let st = status_json(&job);
    assert!(
        st["phases"][0]["tasks"]["total"].as_u64().unwrap() >= 6,
        "byte-range tasks: {st}"
    );
    let local = spec(
        d.path(),
        "local",
        &format!("\"{}/data/*.jsonl\"", a.display()),
        "jsonl",
    );
    run_ok(
        mdf()
            .args(["run", local.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let (r, l) = (
        url_text_records(&d.path().join("remote")),
        url_text_records(&d.path().join("local")),
    );
    assert_eq!(r.len(), 900);
    assert_eq!(r, l, "the records of commit A, not B");
    let log = hub.log();
    assert_eq!(
        log.iter().filter(|e| e["status"] == 429).count(),
        4,
        "the storm was met"
    );
    // Reads named the commit, never the branch.
    assert!(
        log.iter()
            .filter(|e| e["path"].as_str().unwrap().contains("/resolve/"))
            .all(|e| e["path"].as_str().unwrap().contains(A)),
        "{log:?}"
    );
    // The tree was paged (2 entries a page) and the README left out by the glob.
    assert!(
        log.iter()
            .any(|e| e["path"].as_str().unwrap().contains("cursor=")),
        "paged listing"
    );
    // Every record has an id.
    let ids = output_ids(&d.path().join("remote"));
    assert_eq!(ids.len(), 900);
}

#[test]
fn parquet_through_the_cdn_redirect_and_a_gated_dataset_with_a_token() {
    let d = tempfile::tempdir().unwrap();
    let a = hub_root(&d.path().join("hub"));
    let hub = serve(&d.path().join("hub"));
    let jobs = d.path().join("jobs");
    let remote = spec(
        d.path(),
        "pq",
        "\"hf://datasets/acme/web@v2/parquet/train-0.parquet\"",
        "parquet",
    );
    run_ok(
        hf_mdf(&hub, Some("hf_secret"))
            .args(["run", remote.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let local = spec(
        d.path(),
        "pql",
        &format!(
            "\"{}/parquet/train-0.parquet\"",
            a.parent().unwrap().join(B).display()
        ),
        "parquet",
    );
    run_ok(
        mdf()
            .args(["run", local.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let r = url_text_records(&d.path().join("pq"));
    assert_eq!(r.len(), 450);
    assert_eq!(r, url_text_records(&d.path().join("pql")), "v2 is commit B");

    // Gated: refused at submit without a token, naming the fix; read with it.
    let gated = spec(
        d.path(),
        "gated",
        "\"hf://datasets/acme/gated/data/train.parquet\"",
        "parquet",
    );
    let o = hf_mdf(&hub, None)
        .args(["submit", gated.to_str().unwrap(), "--job-root"])
        .arg(&jobs)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("HF_TOKEN") && e.contains("401") && e.contains("input.uris[0]"),
        "{e}"
    );
    run_ok(
        hf_mdf(&hub, Some("hf_secret"))
            .args(["run", gated.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    assert_eq!(url_text_records(&d.path().join("gated")).len(), 100);
    // The token went to the Hub's host only, never to the CDN's.
    let log = hub.log();
    let cdn: Vec<_> = log
        .iter()
        .filter(|e| e["path"].as_str().unwrap().starts_with("/cdn/"))
        .collect();
    assert!(!cdn.is_empty(), "LFS files came from the CDN");
    assert!(cdn.iter().all(|e| e["auth"] == false), "{cdn:?}");
    assert!(
        log.iter()
            .any(|e| e["auth"] == true && e["path"].as_str().unwrap().contains("/resolve/")),
        "the Hub got the token"
    );
    // No manifest or log line holds the token.
    for f in files_under(&jobs) {
        let text = std::fs::read(jobs.join(&f)).unwrap();
        assert!(
            !String::from_utf8_lossy(&text).contains("hf_secret"),
            "{f} holds the token"
        );
    }
}

#[test]
fn a_missing_dataset_or_revision_is_refused_before_any_task() {
    let d = tempfile::tempdir().unwrap();
    hub_root(&d.path().join("hub"));
    let hub = serve(&d.path().join("hub"));
    let jobs = d.path().join("jobs");
    for (name, uri, want) in [
        (
            "norepo",
            "hf://datasets/acme/nothing/data/*.jsonl",
            "no such dataset or revision",
        ),
        (
            "norev",
            "hf://datasets/acme/web@v9/data/*.jsonl",
            "no such dataset or revision",
        ),
        (
            "nofile",
            "hf://datasets/acme/web/data/*.csv",
            "no input files match",
        ),
        ("models", "hf://models/acme/web/x.jsonl", "only datasets"),
    ] {
        let s = spec(d.path(), name, &format!("\"{uri}\""), "jsonl");
        let o = hf_mdf(&hub, None)
            .args(["submit", s.to_str().unwrap(), "--job-root"])
            .arg(&jobs)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains(want) && e.contains("input.uris[0]"),
            "{name}: {e}"
        );
    }
    // Outputs on the Hub are refused.
    let s = write_spec(
        d.path(),
        "version: 1\nname: out\ninput: {uris: [\"hf://datasets/acme/web/data/*.jsonl\"]}\noutput: {uri: \"hf://datasets/acme/web/out\"}\n",
    );
    let o = hf_mdf(&hub, None)
        .args(["validate", s.to_str().unwrap(), "--offline"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("inputs only") || stdout(&o).contains("inputs only"));
    assert!(
        jobs.join("jobs")
            .read_dir()
            .map_or(true, |mut r| r.next().is_none())
    );
}

/// examples/huggingface.yaml with its input on the local Hub: Gopher rules, exact dedup
/// and Dolma JSONL over a Parquet file of a pinned revision.
#[test]
fn the_huggingface_example_runs_against_the_hub() {
    let d = tempfile::tempdir().unwrap();
    let a = hub_root(&d.path().join("hub"));
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/quickstart");
    let mut lines = Vec::new();
    for f in ["shard-00.jsonl", "shard-01.jsonl"] {
        // The shards hold deliberately broken lines: only the documents are taken.
        let t = std::fs::read(quickstart.join(f)).unwrap();
        lines.extend(
            String::from_utf8_lossy(&t)
                .lines()
                .filter(|l| {
                    serde_json::from_str::<serde_json::Value>(l)
                        .is_ok_and(|v| v["text"].is_string() && v["url"].is_string())
                })
                .map(str::to_string),
        );
    }
    write_parquet_of(&a.join("real/train.parquet"), &lines);
    let hub = serve(&d.path().join("hub"));
    let out = d.path().join("out");
    run_ok(
        hf_mdf(&hub, None)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "run",
                "examples/huggingface.yaml",
                "-q",
                "--input",
                "hf://datasets/acme/web/real/*.parquet",
                "-o",
            ])
            .arg(&out)
            .arg("--job-root")
            .arg(d.path().join("jobs")),
    );
    let m = manifest(&out);
    let rows = m["rows"].as_u64().unwrap();
    assert!(rows > 100 && rows < 254, "{m}");
    let f = out.join(m["files"][0]["path"].as_str().unwrap());
    assert!(f.to_string_lossy().ends_with(".jsonl.zst"), "{f:?}");
    let text = zstd::decode_all(std::fs::File::open(&f).unwrap()).unwrap();
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8(text).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first["source"], "fineweb-edu");
    assert!(first["text"].as_str().is_some_and(|t| !t.is_empty()));
}
