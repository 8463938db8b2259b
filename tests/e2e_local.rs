//! End-to-end runs of the `mdf` binary on the local store: outputs, rejects,
//! manifests, resume, reuse, byte-range splitting, compressed and Parquet inputs,
//! failure limits and status.
mod common;
use common::*;
use std::collections::BTreeSet;

fn spec(input: &str, out: &str, extra_stages: &str, job: &str) -> String {
    format!(
        r#"
name: e2e
input: {{uris: ["{input}"]}}
stages:
  - op: text_length
  - op: length_filter
    params: {{min_words: 3}}
{extra_stages}
output: {{uri: "{out}"}}
job: {{lease_ttl_secs: 4, heartbeat_secs: 1, poll_millis: 50 {job}}}
"#
    )
}

#[test]
fn run_writes_manifest_rejects_and_status() {
    let d = tempfile::tempdir().unwrap();
    let mut lines = docs(1, 300);
    lines.insert(10, "{not json".into());
    write_lines(&d.path().join("in/a.jsonl"), &lines[..150]);
    write_lines(&d.path().join("in/b.jsonl"), &lines[150..]);
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &spec(
            &format!("{}/in/*.jsonl", d.path().display()),
            &out.display().to_string(),
            "",
            ", task_bytes: 8KiB",
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "3", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let job = job_uri(&o);
    let ids = output_ids(&out);
    let unique: BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no duplicate records");
    let st = status_json(&job);
    assert_eq!(st["complete"], true);
    assert_eq!(st["succeeded"], true);
    let p0 = &st["phases"][0];
    assert_eq!(p0["records_in"], 301);
    assert_eq!(p0["records_out"].as_u64().unwrap() as usize, ids.len());
    assert_eq!(
        p0["rejects_by_reason"],
        serde_json::Value::Null,
        "reasons are inside stats"
    );
    assert_eq!(p0["stats"]["rejects_by_reason"]["bad_json"], 1);
    // Per-operator stats: batches with a latency histogram, rejects by reason per stage,
    // and the operator table with its bottleneck at the end of `mdf run`.
    let stages = p0["stats"]["stages"].as_array().unwrap();
    let lf = stages
        .iter()
        .find(|x| x["stage"] == "length_filter")
        .unwrap();
    let batches = lf["batches"].as_u64().unwrap();
    assert!(batches > 0, "{lf:#}");
    let hist: u64 = lf["batch_micros_log2"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(hist, batches);
    assert_eq!(
        lf["reasons"]["too_short"].as_u64().unwrap(),
        lf["rejected"].as_u64().unwrap()
    );
    let text = stdout(&o);
    assert!(
        text.contains("← bottleneck") && text.contains("p95 batch"),
        "{text}"
    );
    // Cost: requests at published prices, and worker-seconds in tasks.
    assert!(st["cost_usd"].as_f64().unwrap() > 0.0, "{st:#}");
    assert_eq!(st["prices"]["put_per_1k"], 0.005);
    assert!(p0["task_seconds"].as_f64().unwrap() >= 0.0);
    assert!(p0["cost_usd"].as_f64().unwrap() > 0.0);
    assert!(text.contains("cost: $"), "{text}");
    // --watch on a complete job prints once and returns.
    let o = run_ok(mdf().args(["status", "--watch", "1", &job]));
    assert_eq!(stdout(&o).matches("(complete)").count(), 1);
    let short = lines
        .iter()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["text"].as_str().map(|t| t.split_whitespace().count() < 3))
                .unwrap_or(false)
        })
        .count() as u64;
    assert_eq!(
        p0["stats"]["rejects_by_reason"]["too_short"]
            .as_u64()
            .unwrap(),
        short
    );
    assert!(
        p0["tasks"]["total"].as_u64().unwrap() > 3,
        "inputs were split into several tasks"
    );
    assert!(st["requests_total"].as_u64().unwrap() > 0);
    assert!(orphans(&out).is_empty(), "orphans: {:?}", orphans(&out));
    // Rejects carry id, reason, operator and the record.
    let m = manifest(&out);
    let mut reasons = BTreeSet::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        for ((reason, op), rec) in strings(&b, "reason")
            .into_iter()
            .zip(strings(&b, "operator"))
            .zip(strings(&b, "record"))
        {
            if reason == "too_short" {
                assert_eq!(op, "length_filter");
                assert!(rec.contains("\"text\""), "rejected record kept: {rec}");
            }
            reasons.insert(reason);
        }
    }
    assert_eq!(
        reasons,
        BTreeSet::from(["bad_json".to_string(), "too_short".to_string()])
    );
    // Input columns are carried through; added columns are present.
    let b = read_parquet(&out.join(m["files"][0]["path"].as_str().unwrap()));
    let names: Vec<String> = b[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        ["id", "url", "text", "n", "text_chars", "text_words"]
    );
}

#[test]
fn rerun_starts_no_committed_task_and_is_deterministic() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(2, 400));
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &spec(
            &format!("{}/in/a.jsonl", d.path().display()),
            &out.display().to_string(),
            "",
            ", task_bytes: 4KiB",
        ),
    );
    let jobs = d.path().join("jobs");
    let o1 = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(&jobs),
    );
    let ids1 = output_ids(&out);
    let before = files_under(&jobs);
    let o2 = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(&jobs),
    );
    assert_eq!(job_uri(&o1), job_uri(&o2), "same spec and inputs, same job");
    assert!(stderr(&o2).contains("resuming"), "{}", stderr(&o2));
    let after: Vec<String> = files_under(&jobs)
        .into_iter()
        .filter(|f| !f.contains("/workers/"))
        .collect();
    let before: Vec<String> = before
        .into_iter()
        .filter(|f| !f.contains("/workers/"))
        .collect();
    assert_eq!(
        before, after,
        "the second run wrote no lease, commit or staged file"
    );
    // A fresh job on the same input yields identical records.
    let out2 = d.path().join("out2");
    let o3 = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "-o"])
            .arg(&out2)
            .arg("--job-root")
            .arg(&jobs),
    );
    assert_ne!(job_uri(&o3), job_uri(&o1));
    let mut a = ids1.clone();
    let mut b = output_ids(&out2);
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn byte_ranges_read_every_line_exactly_once() {
    let d = tempfile::tempdir().unwrap();
    let lines = docs(3, 2000);
    let p = d.path().join("in/big.jsonl");
    write_lines(&p, &lines);
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &format!(
            "name: ranges\ninput: {{uris: [\"{}\"]}}\nstages: []\noutput: {{uri: \"{}\"}}\njob: {{task_bytes: 3000, poll_millis: 50}}\n",
            p.display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    assert!(st["phases"][0]["tasks"]["total"].as_u64().unwrap() > 50);
    let mut urls = Vec::new();
    let m = manifest(&out);
    for f in m["files"].as_array().unwrap() {
        urls.extend(strings(
            &read_parquet(&out.join(f["path"].as_str().unwrap())),
            "url",
        ));
    }
    let expected: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["url"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    urls.sort();
    let mut exp = expected.clone();
    exp.sort();
    assert_eq!(urls, exp, "each line exactly once");
}

#[test]
fn compressed_jsonl_and_parquet_inputs() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let lines = docs(4, 300);
    let body = lines.join("\n") + "\n";
    std::fs::create_dir_all(d.path().join("in")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&body.as_bytes()[..body.len() / 2]).unwrap();
    let first = gz.finish().unwrap();
    // A second gzip member (CommonCrawl-style multi-member file).
    let mut gz2 = flate2::write::GzEncoder::new(first, flate2::Compression::default());
    gz2.write_all(&body.as_bytes()[body.len() / 2..]).unwrap();
    std::fs::write(d.path().join("in/a.jsonl.gz"), gz2.finish().unwrap()).unwrap();
    std::fs::write(
        d.path().join("in/b.jsonl.zst"),
        zstd::encode_all(body.as_bytes(), 3).unwrap(),
    )
    .unwrap();
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &format!(
            "name: comp\ninput: {{uris: [\"{0}/in/*.jsonl.gz\", \"{0}/in/*.zst\"]}}\nstages: []\noutput: {{uri: \"{1}\"}}\njob: {{poll_millis: 50}}\n",
            d.path().display(),
            out.display()
        ),
    );
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let ids = output_ids(&out);
    assert_eq!(ids.len(), 600);
    // The Parquet output becomes the input of a second job (input ids kept as source_id).
    let out2 = d.path().join("out2");
    let s2 = write_spec(
        d.path(),
        &format!(
            "name: pq\ninput: {{uris: [\"{0}/*.parquet\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{1}\"}}\njob: {{poll_millis: 50}}\n",
            out.display(),
            out2.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", s2.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    // Said, not done silently.
    assert!(
        stderr(&o).contains("note: the input's column \"id\" is kept as \"source_id\""),
        "{}",
        stderr(&o)
    );
    let m = manifest(&out2);
    let mut src = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let b = read_parquet(&out2.join(f["path"].as_str().unwrap()));
        src.extend(strings(&b, "source_id"));
        assert!(b[0].column_by_name("text_chars").is_some());
    }
    let mut a = ids.clone();
    a.sort();
    src.sort();
    assert_eq!(a, src);
}

#[test]
fn reuse_recomputes_only_changed_phases() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(5, 300));
    let jobs = d.path().join("jobs");
    let two_phase = |min_words: u32, out: &str| {
        format!(
            "name: reuse\ninput: {{uris: [\"{0}/in/a.jsonl\"]}}\nstages:\n  - {{op: text_length, end_phase: true}}\n  - {{op: length_filter, params: {{min_words: {min_words}}}}}\noutput: {{uri: \"{out}\"}}\njob: {{task_bytes: 4KiB, poll_millis: 50}}\n",
            d.path().display()
        )
    };
    let s1 = write_spec(
        d.path(),
        &two_phase(3, &d.path().join("o1").display().to_string()),
    );
    let o1 = run_ok(
        mdf()
            .args(["run", s1.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(&jobs),
    );
    let job1 = job_uri(&o1);
    let s2 = write_spec(
        d.path(),
        &two_phase(6, &d.path().join("o2").display().to_string()),
    );
    let o2 = run_ok(
        mdf()
            .args([
                "run",
                s2.to_str().unwrap(),
                "--workers",
                "2",
                "--reuse",
                &job1,
                "--job-root",
            ])
            .arg(&jobs),
    );
    let job2 = job_uri(&o2);
    let st = status_json(&job2);
    // p00 was reused: its commits were copied, so its tasks made no requests.
    assert_eq!(st["phases"][0]["requests"]["get"], 0, "{st:#}");
    assert!(st["phases"][1]["requests"]["get"].as_u64().unwrap() > 0);
    let j2_dir = jobs.join("jobs").join(job2.rsplit('/').next().unwrap());
    assert!(
        !j2_dir.join("leases/p00").exists(),
        "no p00 task of the new job was leased"
    );
    let ids: Vec<String> = output_ids(&d.path().join("o2"));
    // Same as a fresh run of the changed spec.
    let s3 = write_spec(
        d.path(),
        &two_phase(6, &d.path().join("o3").display().to_string()),
    );
    run_ok(
        mdf()
            .args(["run", s3.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs-fresh")),
    );
    let mut a = ids;
    let mut b = output_ids(&d.path().join("o3"));
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn a_task_failing_the_same_way_is_recorded_as_failed() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(6, 50));
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &spec(
            &format!("{}/in/a.jsonl", d.path().display()),
            &out.display().to_string(),
            "",
            ", max_attempts: 2",
        ),
    );
    // Every staged write fails: the task can never succeed.
    let o = mdf()
        .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
        .arg(d.path().join("jobs"))
        .env("MDF_FAULTS", "put:before:1:/staging/")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let st = status_json(&job_uri(&o));
    assert_eq!(st["complete"], true);
    assert_eq!(st["succeeded"], false);
    let f = &st["failed_tasks"][0];
    assert_eq!(f["phase"], "p00");
    assert!(
        f["error"]
            .as_str()
            .unwrap()
            .starts_with("failed 2 times: writing "),
        "{f}"
    );
    assert_eq!(manifest(&out)["failed_tasks"].as_array().unwrap().len(), 1);
}

#[test]
fn the_bundled_examples_validate_and_the_quickstart_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    for ex in [
        "examples/quickstart.yaml",
        "examples/jsonl.yaml",
        "examples/commoncrawl.yaml",
    ] {
        let o = run_ok(mdf().current_dir(root).args(["validate", ex]));
        assert!(
            stdout(&o).contains("✓ output columns"),
            "{ex}: {}",
            stdout(&o)
        );
    }
    // The quickstart: the bundled WARC sample in byte-range tasks.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let o = run_ok(
        mdf()
            .current_dir(root)
            .args(["run", "examples/quickstart.yaml", "--workers", "2", "-o"])
            .arg(&out)
            .arg("--job-root")
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true);
    let p0 = &st["phases"][0];
    assert!(
        p0["tasks"]["total"].as_u64().unwrap() > 1,
        "byte-range tasks: {p0:#}"
    );
    let by = &p0["stats"]["rejects_by_reason"];
    assert_eq!(by["not_text"], 1, "{p0:#}");
    // The syndicated copy in the sample is removed by the dedup stage (phase p02).
    assert_eq!(
        st["phases"][2]["stats"]["rejects_by_reason"]["duplicate"],
        1
    );
    assert!(by["language"].as_u64().unwrap() >= 1, "{p0:#}");
    let kept = output_ids(&out).len() as u64;
    assert!(kept >= 10, "{p0:#}");
    assert_eq!(kept, p0["records_out"].as_u64().unwrap() - 1);
    let cols = output_columns(&out);
    for c in [
        "id",
        "url",
        "text",
        "title",
        "language",
        "warc_date",
        "warc_record_id",
        "content_key",
    ] {
        assert!(cols.iter().any(|x| x == c), "{c} missing from {cols:?}");
    }
    assert!(!cols.iter().any(|x| x == "html"), "{cols:?}");

    // The JSONL example over the JSONL sample: per-record rejects.
    let out = d.path().join("out-jsonl");
    let o = run_ok(
        mdf()
            .current_dir(root)
            .args([
                "run",
                "examples/jsonl.yaml",
                "--workers",
                "2",
                "--input",
                "examples/data/quickstart/*.jsonl",
                "-o",
            ])
            .arg(&out)
            .arg("--job-root")
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    let p0 = &st["phases"][0];
    assert_eq!(p0["records_in"], 381);
    assert_eq!(p0["stats"]["rejects_by_reason"]["bad_json"], 3);
    assert_eq!(p0["stats"]["rejects_by_reason"]["invalid_utf8"], 3);
    assert_eq!(
        output_ids(&out).len() as u64,
        p0["records_out"].as_u64().unwrap()
    );
}

#[test]
fn a_truncated_gzip_member_keeps_what_was_read_and_rejects_the_rest() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let lines = docs(8, 2000);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
    let full = gz.finish().unwrap();
    std::fs::create_dir_all(d.path().join("in")).unwrap();
    std::fs::write(d.path().join("in/cut.jsonl.gz"), &full[..full.len() / 2]).unwrap();
    write_lines(&d.path().join("in/ok.jsonl"), &docs(9, 10));
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &format!(
            "input: {{uris: [\"{0}/in/*\"], format: jsonl}}\nstages: []\noutput: {{uri: \"{1}\"}}\njob: {{poll_millis: 50}}\n",
            d.path().display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true);
    let p0 = &st["phases"][0];
    assert_eq!(
        p0["stats"]["rejects_by_reason"]["corrupt_input"], 1,
        "{p0:#}"
    );
    let kept = output_ids(&out).len();
    assert!(
        kept > 10 + 200 && kept < 10 + 2000,
        "records before the cut are kept: {kept}"
    );
}

#[test]
fn warc_gz_inputs_split_into_byte_ranges_read_each_record_once() {
    let data =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/warc/other-crawlers");
    assert!(data.is_dir(), "missing test data: {}", data.display());
    let d = tempfile::tempdir().unwrap();
    let run = |task_bytes: &str, out: &str| {
        let out = d.path().join(out);
        let s = write_spec(
            d.path(),
            &format!(
                "name: warc\ninput: {{uris: [\"{}/*.warc.gz\"]}}\nstages: []\noutput: {{uri: \"{}\"}}\njob: {{task_bytes: {task_bytes}, poll_millis: 50}}\n",
                data.display(),
                out.display()
            ),
        );
        let o = run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
                .arg(d.path().join("jobs")),
        );
        let st = status_json(&job_uri(&o));
        assert_eq!(st["succeeded"], true);
        assert_eq!(st["phases"][0]["rejected"], 0);
        let mut ids = output_ids(&out);
        ids.sort();
        (st["phases"][0]["tasks"]["total"].as_u64().unwrap(), ids)
    };
    let (whole_tasks, whole) = run("1GiB", "whole");
    let (split_tasks, split) = run("16KiB", "split");
    assert_eq!(whole_tasks, 1);
    assert!(split_tasks > 4, "{split_tasks}");
    assert!(whole.len() > 20, "{}", whole.len());
    assert_eq!(whole, split);
}

#[test]
fn url_filter_with_the_real_ut1_lists() {
    let bl = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/blocklists/datatrove-0.10.1");
    assert!(bl.is_dir(), "missing test data: {}", bl.display());
    let bl = bl.canonicalize().unwrap();
    let d = tempfile::tempdir().unwrap();
    let urls = [
        (
            "https://www.0-1avsex.com/index.html",
            Some("blocked_domain"),
        ),
        (
            "https://en.wikipedia.org/wiki/Rust_(programming_language)",
            None,
        ),
        (
            "http://0149614511.strimbat.fr/porno-anal-escort-granville-faire-sa-salope-baise-une-vache-video-gratuite-x-escort-girl-auxerre",
            Some("any"),
        ),
        (
            "https://news.example.org/2g1c-compilation",
            Some("banned_word"),
        ),
        ("https://docs.rs/object_store/latest/object_store/", None),
    ];
    let lines: Vec<String> = urls
        .iter()
        .map(|(u, _)| serde_json::json!({"url": u, "text": "some words here"}).to_string())
        .collect();
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &format!(
            "input: {{uris: [\"{0}/in/a.jsonl\"]}}\nstages:\n  - op: url_filter\n    params:\n      blocklists: [\"{1}/url_filterblacklistsv0_3_0.tar.gz\"]\n      banned_words: [\"{1}/banned_words.txt\"]\n      soft_banned_words: [\"{1}/soft_banned_words.txt\"]\n      banned_subwords: [\"{1}/banned_subwords.txt\"]\noutput: {{uri: \"{2}\"}}\njob: {{poll_millis: 50}}\n",
            d.path().display(),
            bl.display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    let kept: Vec<String> = {
        let m = manifest(&out);
        m["files"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| strings(&read_parquet(&out.join(f["path"].as_str().unwrap())), "url"))
            .collect()
    };
    let expect_kept: Vec<&str> = urls
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(u, _)| *u)
        .collect();
    assert_eq!(kept, expect_kept);
    let reasons = &st["phases"][0]["stats"]["rejects_by_reason"];
    assert!(
        reasons["blocked_domain"].as_u64().unwrap() >= 1,
        "{reasons}"
    );
    assert_eq!(reasons["banned_word"], 1, "{reasons}");
    // A missing list is refused before anything runs, naming the param.
    let bad = write_spec(
        d.path(),
        &format!(
            "input: {{uris: [\"{0}/in/a.jsonl\"]}}\nstages: [{{op: url_filter, params: {{domains: [\"{0}/nope.txt\"]}}}}]\noutput: {{uri: \"{0}/out2\"}}\n",
            d.path().display()
        ),
    );
    let o = mdf()
        .args(["run", bad.to_str().unwrap(), "--job-root"])
        .arg(d.path().join("jobs"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("stages[0].params.domains[0]: file://")
            && stderr(&o).contains("nope.txt does not exist"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_commoncrawl_example_runs_the_text_pipeline() {
    let root = env!("CARGO_MANIFEST_DIR");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let o = run_ok(
        mdf()
            .current_dir(root)
            .args(["run", "examples/commoncrawl.yaml", "--workers", "2", "-o"])
            .arg(&out)
            .arg("--job-root")
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true);
    let m = manifest(&out);
    let mut rejected: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        for ((reason, detail), record) in strings(&b, "reason")
            .into_iter()
            .zip(strings(&b, "detail"))
            .zip(strings(&b, "record"))
        {
            if reason == "language" {
                // The page HTML leaves the batches after html_extract (the output
                // drops it and no later stage reads it): later rejects hold the text.
                let r: serde_json::Value = serde_json::from_str(&record).unwrap();
                assert!(r.get("text").is_some() && r.get("html").is_none(), "{r}");
            }
            rejected.entry(reason).or_default().push(detail);
        }
    }
    let mut texts = Vec::new();
    let mut urls = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
        assert!(
            b[0].column_by_name("html").is_none(),
            "html dropped from the output"
        );
        texts.extend(strings(&b, "text"));
        urls.extend(strings(&b, "url"));
    }
    for r in ["blocked_domain", "banned_word", "not_text"] {
        assert!(rejected.contains_key(r), "{r} missing from {rejected:?}");
    }
    assert!(
        rejected
            .get("language")
            .is_some_and(|d| d.iter().any(|d| d.starts_with("de "))),
        "{rejected:?}"
    );
    assert!(
        urls.iter().filter(|u| u.contains("/river-")).count() >= 10,
        "{urls:?}"
    );
    assert!(
        !urls
            .iter()
            .any(|u| u.contains("casino") || u.contains("xxx") || u.contains("watches")),
        "{urls:?}"
    );
    assert!(
        texts
            .iter()
            .all(|t| !t.contains("Copyright") && !t.contains("Home |") && !t.contains("cookies"))
    );
    assert!(
        !texts.iter().any(|t| t.contains("desk@news.example.org")),
        "emails redacted"
    );
    // The syndicated copy is an exact duplicate of river-0, which survives.
    assert_eq!(
        rejected.get("duplicate").map(Vec::len),
        Some(1),
        "{rejected:?}"
    );
    assert!(urls.iter().any(|u| u.ends_with("/river-0")), "{urls:?}");
    assert!(
        !urls.iter().any(|u| u.contains("mirror.example.net")),
        "{urls:?}"
    );
}

#[test]
fn a_commoncrawl_crawl_id_expands_through_its_paths_file() {
    use std::io::Write;
    let data =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/warc/other-crawlers");
    assert!(data.is_dir(), "missing test data: {}", data.display());
    // A local stand-in for s3://commoncrawl with the crawl's layout.
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("cc");
    let mut listed = Vec::new();
    for (i, f) in ["dolma_sample-0000.warc.gz", "dolma_sample-0001.warc.gz"]
        .iter()
        .enumerate()
    {
        let rel = format!("crawl-data/CC-MAIN-2099-01/segments/{i}/warc/{f}");
        std::fs::create_dir_all(base.join(&rel).parent().unwrap()).unwrap();
        std::fs::copy(data.join(f), base.join(&rel)).unwrap();
        listed.push(rel);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all((listed.join("\n") + "\n").as_bytes()).unwrap();
    std::fs::write(
        base.join("crawl-data/CC-MAIN-2099-01/warc.paths.gz"),
        gz.finish().unwrap(),
    )
    .unwrap();
    let spec = |files: &str, out: &str| {
        write_spec(
            d.path(),
            &format!(
                "input: {{commoncrawl: {{crawl: CC-MAIN-2099-01, {files} base: \"{}\"}}}}\nstages: []\noutput: {{uri: \"{}/{out}\"}}\njob: {{poll_millis: 50}}\n",
                base.display(),
                d.path().display()
            ),
        )
    };
    let o = run_ok(mdf().args(["validate", spec("files: 1,", "o1").to_str().unwrap()]));
    assert!(stdout(&o).contains("✓ inputs: 1 files"), "{}", stdout(&o));
    run_ok(
        mdf()
            .args([
                "run",
                spec("files: 1,", "o1").to_str().unwrap(),
                "--job-root",
            ])
            .arg(d.path().join("jobs")),
    );
    run_ok(
        mdf()
            .args([
                "run",
                spec("offset: 1,", "o2").to_str().unwrap(),
                "--job-root",
            ])
            .arg(d.path().join("jobs")),
    );
    let (a, b) = (
        output_ids(&d.path().join("o1")),
        output_ids(&d.path().join("o2")),
    );
    assert!(!a.is_empty() && !b.is_empty());
    assert!(
        a.iter().all(|x| !b.contains(x)),
        "offset selects the other file"
    );
    let bad = write_spec(
        d.path(),
        "input: {commoncrawl: {crawl: CC-MAIN-24}}\noutput: {uri: o}\n",
    );
    let o = mdf()
        .args(["validate", bad.to_str().unwrap(), "--offline"])
        .output()
        .unwrap();
    assert!(
        stdout(&o).contains("input.commoncrawl.crawl: expected a crawl id such as CC-MAIN-2024-51"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn plan_is_a_dry_run_that_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write_lines(&d.path().join(format!("in/{i}.jsonl")), &docs(40 + i, 100));
    }
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &format!(
            "name: dry\ninput: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages: [{{op: exact_key, name: content}}, {{op: dedup, params: {{key: content_key, partitions: 2}}}}]\noutput: {{uri: \"{1}\"}}\njob: {{task_bytes: 8KiB}}\n",
            d.path().display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .current_dir(d.path())
            .args(["plan", s.to_str().unwrap()]),
    );
    let text = stdout(&o);
    for needle in [
        "inputs: 3 files",
        "task split:",
        "p01",
        "dedup reduce",
        "p02",
        "dedup apply",
        "requests: about",
        "memory per worker",
    ] {
        assert!(text.contains(needle), "{needle} missing: {text}");
    }
    assert!(!out.exists(), "plan wrote the output");
    assert!(!d.path().join(".mdf").exists(), "plan wrote a job");
}

#[test]
fn inspect_samples_records_and_rejects_through_the_manifest() {
    let d = tempfile::tempdir().unwrap();
    let mut lines = docs(21, 60);
    lines.push("{\"text\": \"too short\"}".into());
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &spec(
            &format!("{}/in/*.jsonl", d.path().display()),
            &out.display().to_string(),
            "",
            "",
        ),
    );
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let o = run_ok(mdf().args(["inspect", out.to_str().unwrap(), "--limit", "2"]));
    let text = stdout(&o);
    // How many are shown, of how many.
    assert!(
        text.starts_with("2 records sampled (of ") && text.contains(" records in 1 files)\n"),
        "{text}"
    );
    assert_eq!(text.matches("\"id\":").count(), 2, "{text}");
    // --limit 0 shows none; a reader that closes the pipe early ends it quietly.
    let o = run_ok(mdf().args(["inspect", out.to_str().unwrap(), "--limit", "0"]));
    assert!(
        stdout(&o).starts_with("0 records sampled"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("\"id\":"), "{}", stdout(&o));
    {
        // The reader is gone before the first line (`| head -0`): every write fails.
        let mut child = mdf()
            .args(["inspect", out.to_str().unwrap(), "--limit", "60"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{:?}: {}", o.status, stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
    // A condition on a column the output does not have is an error naming the columns.
    let o = mdf()
        .args(["inspect", out.to_str().unwrap(), "--where", "nosuchcol=1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no column \"nosuchcol\"; the columns are: id, "),
        "{}",
        stderr(&o)
    );
    let o = run_ok(mdf().args([
        "inspect",
        out.to_str().unwrap(),
        "--rejects",
        "--where",
        "reason=too_short",
        "--where",
        "record~too short",
    ]));
    let text = stdout(&o);
    assert!(text.contains("\"reason\": \"too_short\""), "{text}");
    assert!(!text.contains("(none)"), "{text}");
    let o = run_ok(mdf().args([
        "inspect",
        out.to_str().unwrap(),
        "--where",
        "text=no such text",
    ]));
    assert!(stdout(&o).contains("(none)"));
    let o = mdf()
        .args(["inspect", d.path().join("nothing").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("_manifest.json"), "{}", stderr(&o));
}

#[test]
fn shell_completions_cover_the_subcommands() {
    let o = run_ok(mdf().args(["completions", "bash"]));
    let text = stdout(&o);
    for sub in [
        "run", "submit", "worker", "status", "plan", "inspect", "validate",
    ] {
        assert!(text.contains(sub), "{sub} missing");
    }
    run_ok(mdf().args(["completions", "zsh"]));
}

#[test]
fn json_logs_are_one_object_a_line() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(8, 20));
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &spec(
            &format!("{}/in/*.jsonl", d.path().display()),
            &out.display().to_string(),
            "",
            "",
        ),
    );
    let o = run_ok(
        mdf()
            .args([
                "run",
                s.to_str().unwrap(),
                "-vv",
                "--log-format",
                "json",
                "--job-root",
            ])
            .arg(d.path().join("jobs")),
    );
    let logs: Vec<serde_json::Value> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("each log line is JSON"))
        .collect();
    assert!(!logs.is_empty(), "{}", stderr(&o));
    assert!(
        logs.iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
    // -q: nothing on stderr but errors; the result still on stdout.
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "-q", "-o"])
            .arg(d.path().join("out-q"))
            .arg("--job-root")
            .arg(d.path().join("jobs-q")),
    );
    assert!(stderr(&o).trim().is_empty(), "{}", stderr(&o));
    assert!(stdout(&o).contains("job: "));
}

#[test]
fn every_main_subcommand_help_has_examples() {
    for sub in [
        "run", "submit", "worker", "status", "validate", "plan", "inspect",
    ] {
        let o = run_ok(mdf().args([sub, "--help"]));
        let text = stdout(&o);
        assert!(text.contains("Example"), "{sub} --help: {text}");
        assert!(
            text.contains("  mdf "),
            "{sub} --help shows a command line: {text}"
        );
    }
}

/// `column_filter` drops by another stage's column, with a reason naming it, in a real
/// job: the kept and the rejected records partition the input by the threshold.
#[test]
fn column_filter_drops_by_a_written_column_with_its_reason() {
    let d = tempfile::tempdir().unwrap();
    let lines = docs(7, 200);
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &spec(
            &format!("{}/in/*.jsonl", d.path().display()),
            &out.display().to_string(),
            "  - op: column_filter\n    params: {column: text_words, min: 12, max: 40}",
            "",
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    let words = |l: &String| {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count()
    };
    let long_enough: Vec<&String> = lines.iter().filter(|l| words(l) >= 3).collect();
    let want = long_enough
        .iter()
        .filter(|l| (12..=40).contains(&words(l)))
        .count();
    assert!(
        want > 0 && want < long_enough.len(),
        "the data spans the bounds"
    );
    assert_eq!(output_ids(&out).len(), want);
    let by = &st["phases"][0]["stats"]["rejects_by_reason"];
    assert_eq!(
        by["text_words"].as_u64().unwrap() as usize,
        long_enough.len() - want
    );
    let m = manifest(&out);
    let mut seen = 0;
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        for (reason, op) in strings(&b, "reason")
            .into_iter()
            .zip(strings(&b, "operator"))
        {
            if reason == "text_words" {
                assert_eq!(op, "column_filter");
                seen += 1;
            }
        }
    }
    assert_eq!(seen, long_enough.len() - want);
}

/// A pipelined job whose phases are sharded (`job.shard_tasks: 3`: each of its two map
/// phases splits into 16 shards, the second following the first shard for shard)
/// writes exactly the output of the same job unsharded, marks every shard done, and a
/// `--reuse` of it, whose first phase's shards hold only reused commits, completes
/// without leasing them; `mdf status` reads its sharded folders.
#[test]
fn a_sharded_pipeline_writes_what_the_unsharded_one_writes_and_reuses_whole() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(7, 600));
    let spec = |out: &str, job: &str| {
        write_spec(
            d.path(),
            &format!(
                "name: sharded\ninput: {{uris: [\"{0}/in/a.jsonl\"]}}\nstages:\n  - {{op: text_length, end_phase: true}}\n  - {{op: length_filter, params: {{min_words: 4}}}}\noutput: {{uri: \"{0}/{out}\"}}\njob: {{task_bytes: 4KiB, poll_millis: 20{job}}}\n",
                d.path().display()
            ),
        )
    };
    let run = |out: &str, job: &str, extra: &[&str]| {
        let s = spec(out, job);
        job_uri(&run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--workers", "3"])
                .args(extra)
                .arg("--job-root")
                .arg(d.path().join("jobs")),
        ))
    };
    let sharded = run("o1", ", shard_tasks: 3", &[]);
    run("o2", "", &[]);
    let mut a = output_ids(&d.path().join("o1"));
    let mut b = output_ids(&d.path().join("o2"));
    a.sort();
    b.sort();
    assert!(a.len() > 100, "{}", a.len());
    assert_eq!(a, b, "the same records, each once");
    let dir = d
        .path()
        .join("jobs/jobs")
        .join(sharded.rsplit('/').next().unwrap());
    let job: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("job.json")).unwrap()).unwrap();
    assert_eq!(job["version"], 3);
    let tasks = job["phases"][0]["tasks"].as_u64().unwrap();
    assert!(tasks > 16, "{tasks} tasks: not enough to shard");
    for p in ["p00", "p01"] {
        assert_eq!(
            job["phases"][if p == "p00" { 0 } else { 1 }]["shard_digits"],
            1
        );
        assert_eq!(files_under(&dir.join("done").join(p)).len(), 16, "{p}");
        assert!(!dir.join("tasks").join(p).exists(), "{p}");
        // Every commit in its shard's folder, and a follower in its upstream's shard.
        let commits = files_under(&dir.join("commits").join(p));
        assert_eq!(commits.len() as u64, tasks, "{p}");
        assert!(commits.iter().all(|c| c[..1] == c[2..3]), "{commits:?}");
    }
    let st = status_json(&sharded);
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert_eq!(
        st["phases"][1]["tasks"]["committed"].as_u64(),
        Some(tasks),
        "{st:#}"
    );

    // Reused: p00's commits copied, none of its tasks leased, and its shards marked
    // done all the same (p01 writes the output, whose settings are in its fingerprint,
    // so it runs again).
    let again = run("o3", ", shard_tasks: 3", &["--reuse", &sharded]);
    let dir = d
        .path()
        .join("jobs/jobs")
        .join(again.rsplit('/').next().unwrap());
    assert!(!dir.join("leases/p00").exists());
    assert_eq!(files_under(&dir.join("done/p00")).len(), 16);
    assert_eq!(files_under(&dir.join("done/p01")).len(), 16);
    let mut c = output_ids(&d.path().join("o3"));
    c.sort();
    assert_eq!(a, c);
}

/// Shard parts (docs/PROTOCOL.md §1, `ShardPart`) are copies a marker's writer may
/// use, never an authority. Parts planted in every shard before any worker starts (one
/// unreadable, one of another job, one naming another shard, one holding records of
/// another shard's tasks and of another phase, one named right, every record forged)
/// leave every marker holding exactly the stored commit records, and nothing forged
/// reaches the output manifest, even for a task whose only copy is forged.
#[test]
fn forged_shard_parts_never_reach_a_marker() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(11, 600));
    let spec = write_spec(
        d.path(),
        &format!(
            "name: parts\ninput: {{uris: [\"{0}/in/a.jsonl\"]}}\nstages:\n  - {{op: text_length}}\n  - {{op: length_filter, params: {{min_words: 4}}}}\noutput: {{uri: \"{0}/out\"}}\njob: {{task_bytes: 4KiB, poll_millis: 20, shard_tasks: 3}}\n",
            d.path().display()
        ),
    );
    let jobs = d.path().join("jobs");
    let job = submit_job(&spec, &jobs);
    let dir = jobs.join("jobs").join(job.rsplit('/').next().unwrap());
    let job_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("job.json")).unwrap()).unwrap();
    let job_id = job_json["job_id"].as_str().unwrap().to_string();
    assert_eq!(job_json["phases"][0]["shard_digits"], 1, "{job_json:#}");
    let shard_ids = |x: &str| -> Vec<String> {
        let s: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!("shards/p00/{x}.json"))).unwrap(),
        )
        .unwrap();
        s["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect()
    };
    let forged = |phase: &str, task: &str| {
        serde_json::json!({
            "version": 3, "job_id": job_id, "phase": phase, "task_id": task,
            "status": "committed", "attempt": "forged", "worker": "forger", "epoch": 0,
            "write_id": "forged", "outputs": [{"uri": "file:///forged.parquet", "rows": 1, "bytes": 1, "blake3": "00"}],
            "started_ms": 0, "finished_ms": 0
        })
    };
    let part = |job: &str, prefix: &str, records: Vec<serde_json::Value>| {
        let body = serde_json::to_vec(&serde_json::json!({
            "version": 3, "job_id": job, "phase": "p00", "prefix": prefix,
            "worker": "forger", "records": records
        }))
        .unwrap();
        // A well-formed part: only its names make it unusable.
        serde_json::from_slice::<mdf::protocol::records::ShardPart>(&body).unwrap();
        body
    };
    // One worker commits one task and stops (`--max-tasks 1`): no part and no memory
    // of any worker holds its record, so in its shard the forged part below is its
    // only copy, and only the size check keeps it out.
    run_ok(mdf().args([
        "worker",
        "--job",
        &job,
        "--worker-id",
        "first",
        "--max-tasks",
        "1",
    ]));
    assert_eq!(files_under(&dir.join("commits/p00")).len(), 1);
    let hex: Vec<String> = (0..16).map(|i| format!("{i:x}")).collect();
    for (i, x) in hex.iter().enumerate() {
        let other = &hex[(i + 1) % 16];
        let (mine, theirs) = (shard_ids(x), shard_ids(other));
        let here = dir.join("parts/p00").join(x);
        std::fs::create_dir_all(&here).unwrap();
        std::fs::write(here.join("00-bad.json"), b"{not json").unwrap();
        let all = |ph: &str, ids: &[String]| ids.iter().map(|t| forged(ph, t)).collect();
        std::fs::write(
            here.join("01-foreign.json"),
            part("another-job", x, all("p00", &mine)),
        )
        .unwrap();
        std::fs::write(
            here.join("02-elsewhere.json"),
            part(&job_id, other, all("p00", &mine)),
        )
        .unwrap();
        let mut stray: Vec<serde_json::Value> = all("p00", &theirs);
        stray.extend(all("p01", &mine));
        std::fs::write(here.join("03-stray.json"), part(&job_id, x, stray)).unwrap();
        // Named right, every record of the shard's tasks forged: no copy of a stored
        // record (its size is not the stored object's).
        std::fs::write(
            here.join("04-forged.json"),
            part(&job_id, x, all("p00", &mine)),
        )
        .unwrap();
    }
    let mut workers: Vec<_> = (0..3)
        .map(|i| spawn_worker(&job, &format!("w{i}")))
        .collect();
    for w in &mut workers {
        assert!(w.wait().unwrap().success());
    }
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    for x in &hex {
        let marker: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("done/p00/{x}.json"))).unwrap())
                .unwrap();
        let records = marker["records"].as_array().unwrap();
        assert_eq!(records.len(), shard_ids(x).len(), "shard {x}");
        for r in records {
            let t = r["task_id"].as_str().unwrap();
            let stored: serde_json::Value = serde_json::from_slice(
                &std::fs::read(dir.join(format!("commits/p00/{x}/{t}.json"))).unwrap(),
            )
            .unwrap();
            assert_eq!(r, &stored, "shard {x}, task {t}");
            assert_ne!(r["worker"], "forger");
        }
    }
    let m = manifest(&d.path().join("out")).to_string();
    assert!(!m.contains("forged"), "{m}");
}

/// An input's own `source_id` column is read as it is (it used to be read from a
/// missing `id`: every value null), and an input with both `id` and `source_id`
/// keeps both, the `id` as `source_id_1`, which the run says.
#[test]
fn an_inputs_own_source_id_column_is_never_lost() {
    let d = tempfile::tempdir().unwrap();
    write_lines(
        &d.path().join("own/a.jsonl"),
        &[
            r#"{"source_id": "s-1", "text": "one"}"#.to_string(),
            r#"{"source_id": "s-2", "text": "two"}"#.to_string(),
        ],
    );
    write_lines(
        &d.path().join("both/a.jsonl"),
        &[
            r#"{"id": "i-1", "source_id": "s-1", "text": "one"}"#.to_string(),
            r#"{"id": "i-2", "source_id": "s-2", "text": "two"}"#.to_string(),
        ],
    );
    for (input, want_note) in [("own", None), ("both", Some("source_id_1"))] {
        let out = d.path().join(format!("out-{input}"));
        let s = write_spec(
            d.path(),
            &format!(
                "name: {input}\ninput: {{uris: [\"{}/{input}/*.jsonl\"]}}\nstages: []\noutput: {{uri: \"{}\"}}\n",
                d.path().display(),
                out.display()
            ),
        );
        let o = run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--job-root"])
                .arg(d.path().join("jobs")),
        );
        let b = output_batches(&out);
        let mut src = strings(&b, "source_id");
        src.sort();
        assert_eq!(src, ["s-1", "s-2"], "{input}: the input's own source_id");
        match want_note {
            None => assert!(!stderr(&o).contains("is kept as"), "{}", stderr(&o)),
            Some(carried) => {
                let mut ids = strings(&b, carried);
                ids.sort();
                assert_eq!(ids, ["i-1", "i-2"], "the input's id, as {carried}");
                assert!(
                    stderr(&o).contains(&format!("\"id\" is kept as \"{carried}\"")),
                    "{}",
                    stderr(&o)
                );
            }
        }
    }
}
