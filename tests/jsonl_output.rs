//! JSON Lines output (`output.format: jsonl`) end to end through `mdf run`: the same
//! records as the Parquet output of the same job, zstd and gzip and plain, read back
//! by mdf's own JSONL reader (files roll over at `target_file_bytes`: a unit test in
//! src/io/write/jsonl.rs); the
//! Dolma layout (id, text, source, added, created, metadata); bad settings refused
//! before any task, naming the field.
mod common;
use common::*;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

fn input(dir: &Path) {
    for f in 0..3 {
        let lines: Vec<String> = docs(f, 400)
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let mut v: serde_json::Value = serde_json::from_str(&l).unwrap();
                // Some records with a date (Dolma's `created`), some without.
                if i % 3 == 0 {
                    v["date"] = serde_json::json!(format!("2024-01-{:02}", 1 + i % 28));
                }
                v.to_string()
            })
            .collect();
        write_lines(&dir.join(format!("in/part-{f}.jsonl")), &lines);
    }
}

fn spec(dir: &Path, name: &str, output: &str) -> PathBuf {
    write_spec(
        dir,
        &format!(
            r#"
version: 1
name: {name}
input: {{uris: ["{d}/in/*.jsonl"]}}
stages:
  - {{op: length_filter, params: {{min_words: 3}}}}
output: {{uri: "{d}/{name}", overwrite: true, {output}}}
"#,
            d = dir.display()
        ),
    )
}

/// Every line of every file the manifest lists, decompressed by its extension.
fn lines(out: &Path) -> Vec<serde_json::Value> {
    let m = manifest(out);
    let mut v = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let path = out.join(f["path"].as_str().unwrap());
        let raw = std::fs::read(&path).unwrap();
        let mut text = String::new();
        let name = path.to_string_lossy().to_string();
        if name.ends_with(".jsonl.zst") {
            zstd::stream::read::Decoder::new(&raw[..])
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
        } else if name.ends_with(".jsonl.gz") {
            flate2::read::GzDecoder::new(&raw[..])
                .read_to_string(&mut text)
                .unwrap();
        } else {
            assert!(name.ends_with(".jsonl"), "{name}");
            text = String::from_utf8(raw).unwrap();
        }
        let n = text.lines().count();
        assert_eq!(n as u64, f["rows"].as_u64().unwrap(), "{name}: rows");
        v.extend(text.lines().map(|l| serde_json::from_str(l).unwrap()));
    }
    v
}

/// The Parquet output's records by id: (text, url, n, date).
fn parquet_records(out: &Path) -> BTreeMap<String, (String, String, i64, Option<String>)> {
    let mut m = BTreeMap::new();
    for b in output_batches(out) {
        let ids = strings(std::slice::from_ref(&b), "id");
        let texts = strings(std::slice::from_ref(&b), "text");
        let urls = strings(std::slice::from_ref(&b), "url");
        let ns = b
            .column_by_name("n")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap()
            .clone();
        let dates = b
            .column_by_name("date")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap()
            .clone();
        use arrow_array::Array;
        for i in 0..ids.len() {
            let date = (!dates.is_null(i)).then(|| dates.value(i).to_string());
            m.insert(
                ids[i].clone(),
                (texts[i].clone(), urls[i].clone(), ns.value(i), date),
            );
        }
    }
    m
}

#[test]
fn jsonl_output_holds_the_records_of_the_parquet_output() {
    let d = tempfile::tempdir().unwrap();
    input(d.path());
    let jobs = d.path().join("jobs");
    let run = |s: &Path| {
        run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
                .arg(&jobs),
        )
    };
    run(&spec(d.path(), "pq", "format: parquet"));
    let want = parquet_records(&d.path().join("pq"));
    assert!(want.len() > 500);
    for (name, output, ext) in [
        ("zst", "format: jsonl", ".jsonl.zst"),
        (
            "gz",
            "format: jsonl, jsonl: {compression: gzip}, target_file_bytes: 1MiB",
            ".jsonl.gz",
        ),
        (
            "plain",
            "format: jsonl, jsonl: {compression: none}",
            ".jsonl",
        ),
    ] {
        run(&spec(d.path(), name, output));
        let out = d.path().join(name);
        let m = manifest(&out);
        for f in m["files"].as_array().unwrap() {
            let p = f["path"].as_str().unwrap();
            assert!(p.starts_with("part-") && p.ends_with(ext), "{p}");
        }
        let mut got = BTreeMap::new();
        for v in lines(&out) {
            let date = v["date"].as_str().map(str::to_string);
            assert!(
                v.as_object().unwrap().contains_key("date"),
                "nulls are written"
            );
            got.insert(
                v["id"].as_str().unwrap().to_string(),
                (
                    v["text"].as_str().unwrap().to_string(),
                    v["url"].as_str().unwrap().to_string(),
                    v["n"].as_i64().unwrap(),
                    date,
                ),
            );
        }
        assert_eq!(got, want, "{name}");
        assert!(orphans(&out).is_empty(), "{name}: {:?}", orphans(&out));
    }
    // mdf reads its own JSONL output back: the same records again.
    let back = write_spec(
        d.path(),
        &format!(
            "version: 1\nname: back\ninput: {{uris: [\"{d}/zst/*.jsonl.zst\"]}}\noutput: {{uri: \"{d}/back\"}}\n",
            d = d.path().display()
        ),
    );
    run(&back);
    let texts: std::collections::BTreeSet<String> =
        strings(&output_batches(&d.path().join("back")), "text")
            .into_iter()
            .collect();
    let want_texts: std::collections::BTreeSet<String> =
        want.values().map(|v| v.0.clone()).collect();
    assert_eq!(texts, want_texts);
}

#[test]
fn the_dolma_layout_has_id_text_source_added_created_and_metadata() {
    let d = tempfile::tempdir().unwrap();
    input(d.path());
    let jobs = d.path().join("jobs");
    run_ok(
        mdf()
            .args([
                "run",
                spec(d.path(), "pq", "format: parquet").to_str().unwrap(),
                "--job-root",
            ])
            .arg(&jobs),
    );
    let want = parquet_records(&d.path().join("pq"));
    let s = spec(
        d.path(),
        "dolma",
        "format: jsonl, jsonl: {layout: dolma, source: common-crawl}",
    );
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = job_uri(&o);
    let root = Path::new(job.strip_prefix("file://").unwrap_or(&job));
    let manifest_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("job.json")).unwrap()).unwrap();
    let created_ms = manifest_json["created_ms"].as_u64().unwrap();
    let docs = lines(&d.path().join("dolma"));
    assert_eq!(docs.len(), want.len());
    let mut added = std::collections::BTreeSet::new();
    for v in &docs {
        let o = v.as_object().unwrap();
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        let (text, url, n, date) = &want[v["id"].as_str().unwrap()];
        assert_eq!(v["text"], *text);
        assert_eq!(v["source"], "common-crawl");
        assert_eq!(v["metadata"]["url"], *url);
        assert_eq!(v["metadata"]["n"], *n);
        match date {
            Some(day) => {
                assert_eq!(v["created"], *day);
                assert_eq!(
                    keys,
                    ["id", "text", "source", "added", "created", "metadata"]
                );
            }
            None => assert_eq!(keys, ["id", "text", "source", "added", "metadata"]),
        }
        assert!(v["metadata"].get("date").is_none() && v["metadata"].get("text").is_none());
        added.insert(v["added"].as_str().unwrap().to_string());
    }
    // One `added` for the whole job: its submit time, as RFC 3339 UTC.
    assert_eq!(added.len(), 1);
    let a = added.into_iter().next().unwrap();
    assert!(a.ends_with('Z') && a.len() == 24, "{a}");
    let secs = created_ms / 1000;
    assert!(a.contains(&format!(
        "{:02}:{:02}:{:02}.{:03}Z",
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60,
        created_ms % 1000
    )));
}

/// The bundled Dolma example runs: every document in Dolma's layout.
#[test]
fn the_bundled_dolma_example_runs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    run_example("dolma", &out, &d.path().join("jobs"), None);
    let docs = lines(&out);
    assert!(!docs.is_empty());
    for v in docs {
        assert_eq!(v["source"], "quickstart");
        assert!(v["metadata"]["text_words"].as_u64().is_some(), "{v}");
    }
}

#[test]
fn bad_jsonl_settings_are_refused_naming_the_field() {
    let d = tempfile::tempdir().unwrap();
    input(d.path());
    for (output, field) in [
        (
            "format: jsonl, jsonl: {compression: lz4}",
            "output.jsonl.compression",
        ),
        (
            "format: jsonl, jsonl: {layout: parquet}",
            "output.jsonl.layout",
        ),
        (
            "format: jsonl, jsonl: {layout: dolma, text: body}",
            "output.jsonl.text",
        ),
        (
            "format: jsonl, jsonl: {layout: dolma, created: crawled_at}",
            "output.jsonl.created",
        ),
        ("format: parquet, jsonl: {layout: dolma}", "output.jsonl"),
        ("format: jsonl, jsonl: {colour: red}", "output.jsonl.colour"),
        ("format: jsonl, compression: gzip", "output.compression"),
        (
            "format: jsonl, jsonl: {layout: dolma, text: n}",
            "output.jsonl.text",
        ),
        (
            "format: jsonl, jsonl: {layout: dolma, text: id}",
            "output.jsonl.text",
        ),
    ] {
        let s = spec(d.path(), "bad", output);
        let o = mdf().args(["run", s.to_str().unwrap()]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{output}: {}", stderr(&o));
        assert!(stderr(&o).contains(field), "{output}: {}", stderr(&o));
        assert!(!d.path().join("bad").join("_manifest.json").exists());
    }
}
