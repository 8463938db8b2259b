//! Bad input loses nothing and fails nothing: generated hostile files (truncated gzip,
//! garbage, empty, a record over the memory budget, invalid UTF-8, a gzip bomb) and
//! every malformed WARC/ARC file in ../shared/data/warc/edge-cases go through one job
//! each: the job succeeds, every good record is kept, every bad one is a reject with
//! its reason, and the counts are in `mdf status`. Security: a forged commit record
//! naming a file outside the job cannot make a worker publish it, and credentials
//! never reach logs, manifests or records.
mod common;
use common::*;
use std::io::Write;
use std::path::Path;

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn hostile_jsonl_files_become_rejects_and_the_job_succeeds() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    let good = docs(5, 50);
    write_lines(&inp.join("good.jsonl"), &good);
    // A gzip stream cut in the middle.
    let full = gz((docs(6, 400).join("\n") + "\n").as_bytes());
    std::fs::write(inp.join("cut.jsonl.gz"), &full[..full.len() / 2]).unwrap();
    // Garbage bytes with some newlines.
    let mut x = 17u64;
    let garbage: Vec<u8> = (0..20_000)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            if i % 997 == 0 { b'\n' } else { (x >> 56) as u8 }
        })
        .collect();
    std::fs::write(inp.join("garbage.jsonl"), garbage).unwrap();
    std::fs::write(inp.join("empty.jsonl"), b"").unwrap();
    std::fs::write(
        inp.join("notjson.jsonl"),
        b"this is not json {\n[1, 2, 3]\n",
    )
    .unwrap();
    // One record over input.max_record_bytes (64 KiB), then a good one.
    let big = format!("{{\"text\": \"{}\"}}\n{}\n", "a".repeat(1 << 20), good[0]);
    std::fs::write(inp.join("huge.jsonl"), big).unwrap();
    // Invalid UTF-8 inside a JSON string.
    let mut bad = b"{\"text\": \"caf\xe9 au lait is fine\"}\n".to_vec();
    bad.extend_from_slice(good[1].as_bytes());
    bad.push(b'\n');
    std::fs::write(inp.join("latin1.jsonl"), bad).unwrap();
    // A gzip bomb: 256 MiB of one byte, no newline (about 250 KB compressed).
    {
        let f = std::fs::File::create(inp.join("bomb.jsonl.gz")).unwrap();
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::best());
        let chunk = vec![b'{'; 1 << 20];
        for _ in 0..256 {
            e.write_all(&chunk).unwrap();
        }
        e.finish().unwrap();
    }
    let out = d.path().join("out");
    let spec = write_spec(
        d.path(),
        &format!(
            "name: hostile\ninput: {{uris: [\"{}/*\"], format: jsonl, max_record_bytes: 64KiB}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{}\"}}\njob: {{poll_millis: 50}}\n",
            inp.display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", spec.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true, "{st:#}");
    let by = &st["phases"][0]["stats"]["rejects_by_reason"];
    for reason in [
        "corrupt_input",
        "bad_json",
        "record_too_large",
        "invalid_utf8",
    ] {
        assert!(by[reason].as_u64().unwrap_or(0) >= 1, "{reason}: {by:#}");
    }
    // Every good record is in the output (the two behind hostile lines included).
    let ids = output_ids(&out);
    assert!(ids.len() >= good.len() + 2, "{} kept", ids.len());
}

#[test]
fn every_malformed_warc_and_arc_file_is_read_without_failing_the_job() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/warc/edge-cases");
    if !data.exists() {
        eprintln!("skipping: ../shared/data is not here");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = write_spec(
        d.path(),
        &format!(
            "name: edge\ninput: {{uris: [\"{0}/warcio/*\", \"{0}/resiliparse/*\", \"{0}/jwarc/*\"], format: warc}}\nstages: [{{op: html_extract}}]\noutput: {{uri: \"{1}\"}}\njob: {{poll_millis: 50}}\n",
            data.display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args(["run", spec.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true, "{st:#}");
    let p0 = &st["phases"][0];
    assert_eq!(p0["tasks"]["failed"], 0);
    assert!(p0["records_out"].as_u64().unwrap() >= 5, "{p0:#}");
    assert!(
        p0["stats"]["rejects_by_reason"]["corrupt_input"]
            .as_u64()
            .unwrap_or(0)
            >= 2,
        "{p0:#}"
    );
    // block-sized-records.warc.lz4 says it is LZ4, not "no WARC version line".
    assert_eq!(
        p0["stats"]["rejects_by_reason"]["unsupported_compression"], 1,
        "{p0:#}"
    );
    // A stream that breaks after a kept record (clipped.warc.gz: one page, then a cut
    // member; example-trunc.warc: cut after its records) is a reject with an id of its
    // own: every id, kept or rejected, names one record (found by a new user).
    let mut ids = output_ids(&out);
    let m = manifest(&out);
    let mut traced = 0;
    for f in m["rejects"].as_array().unwrap() {
        let rj = read_parquet(&out.join("_rejects").join(f["path"].as_str().unwrap()));
        ids.extend(strings(&rj, "id"));
        // A record the reader refuses keeps where it came from and which it was.
        for (why, rec) in strings(&rj, "reason")
            .into_iter()
            .zip(strings(&rj, "record"))
        {
            if why == "not_text" {
                let v: serde_json::Value = serde_json::from_str(&rec).unwrap();
                assert!(
                    v["url"].as_str().is_some_and(|u| u.starts_with("http")),
                    "{v}"
                );
                assert!(
                    v["source"].as_str().is_some_and(|u| u.contains("warc")),
                    "{v}"
                );
                assert!(v["warc_record_id"].is_string(), "{v}");
                traced += 1;
            }
        }
    }
    assert!(traced >= 1, "no not_text reject to check");
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        n,
        "an id is both kept and rejected, or rejected twice"
    );
}

#[test]
fn a_forged_commit_record_cannot_publish_a_file_outside_the_job() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(1, 20));
    write_lines(&d.path().join("in/b.jsonl"), &docs(2, 20));
    let secret = d.path().join("secret.txt");
    std::fs::write(&secret, "do not publish me").unwrap();
    let out = d.path().join("out");
    let spec = write_spec(
        d.path(),
        &format!(
            "name: forged\ninput: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages: []\noutput: {{uri: \"{1}\"}}\njob: {{poll_millis: 50, max_files_per_task: 1, max_attempts: 2}}\n",
            d.path().display(),
            out.display()
        ),
    );
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    let job_dir = jobs.join("jobs").join(job.rsplit('/').next().unwrap());
    let task = files_under(&job_dir.join("tasks/p00"))[0]
        .trim_end_matches(".json")
        .to_string();
    let forged = serde_json::json!({
        "version": 1, "job_id": job.rsplit('/').next().unwrap(), "phase": "p00",
        "task_id": task, "status": "committed", "attempt": "evil", "worker": "evil",
        "epoch": 0, "write_id": "evil",
        "outputs": [{"uri": format!("file://{}", secret.display()), "rows": 1, "bytes": 17, "blake3": "0"}],
        "rejects": [], "started_ms": 0, "finished_ms": 0
    });
    std::fs::create_dir_all(job_dir.join("commits/p00")).unwrap();
    std::fs::write(
        job_dir.join(format!("commits/p00/{task}.json")),
        forged.to_string(),
    )
    .unwrap();
    let o = mdf().args(["worker", "--job", &job]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let st = status_json(&job);
    assert_eq!(st["succeeded"], false, "{st:#}");
    assert!(
        st.to_string().contains("outside the job's staging area"),
        "{st:#}"
    );
    for f in files_under(&out) {
        let b = std::fs::read(out.join(&f)).unwrap();
        assert!(
            !String::from_utf8_lossy(&b).contains("do not publish me"),
            "{f} is a copy of the secret"
        );
    }
}

#[test]
fn credentials_never_reach_logs_manifests_or_records() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(3, 30));
    let secret = "SECRETsecretSECRET0123456789abcdef";
    let out = d.path().join("out");
    let spec = write_spec(
        d.path(),
        &format!(
            "name: creds\ninput: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages: [{{op: length_filter, params: {{min_words: 5}}}}]\noutput: {{uri: \"{1}\"}}\njob: {{poll_millis: 50}}\n",
            d.path().display(),
            out.display()
        ),
    );
    let run = |extra: &[&str]| {
        mdf()
            .args(["run", spec.to_str().unwrap(), "-vv", "--job-root"])
            .arg(d.path().join("jobs"))
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEYID0000")
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_SESSION_TOKEN", secret)
            .output()
            .unwrap()
    };
    let ok = run(&[]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    // And a run that fails talking to an S3 endpoint that is not there.
    let bad = run(&["-o", "s3://no-such-bucket/out"]);
    let mut text = format!(
        "{}{}{}{}",
        stdout(&ok),
        stderr(&ok),
        stdout(&bad),
        stderr(&bad)
    );
    for root in [d.path().join("jobs"), out.clone()] {
        for f in files_under(&root) {
            text.push_str(&String::from_utf8_lossy(
                &std::fs::read(root.join(f)).unwrap(),
            ));
        }
    }
    assert!(!text.contains(secret), "a secret leaked");
}

/// moto accepts any credentials, so a store refusing them is injected: a denied read
/// of the inputs stops the job at once with the store's message (not retried, since
/// more attempts cannot help), and a denied write to the output fails the job with
/// the reason after `job.max_attempts`, instead of hanging.
#[test]
fn denied_credentials_fail_fast_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(3, 30));
    let out = d.path().join("out");
    let spec = write_spec(
        d.path(),
        &format!(
            "name: denied\ninput: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages: []\noutput: {{uri: \"{1}\"}}\njob: {{poll_millis: 50, max_attempts: 2}}\n",
            d.path().display(),
            out.display()
        ),
    );
    let run = |faults: &str, root: &str| {
        let t = std::time::Instant::now();
        let o = mdf()
            .args(["run", spec.to_str().unwrap(), "--job-root"])
            .arg(d.path().join(root))
            .env("MDF_FAULTS", faults)
            .output()
            .unwrap();
        (o, t.elapsed())
    };
    let (o, took) = run("get:denied:1:/in/", "jobs-a");
    assert!(!o.status.success());
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    assert!(stderr(&o).contains("AccessDenied"), "{}", stderr(&o));
    let (o, took) = run("any:denied:1:/out/", "jobs-b");
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("AccessDenied"), "{text}");
}

/// A spec cannot make a worker run a command: no operator executes anything, and
/// interpolation knows only `${VAR}` — shell syntax in any value stays literal text.
#[test]
fn shell_syntax_in_a_spec_is_never_executed() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(4, 10));
    let marker = d.path().join("pwned");
    let m = marker.display();
    // `$(...)` is not interpolation syntax: refused or kept literally, never run.
    let spec = write_spec(
        d.path(),
        &format!(
            "name: \"shell-$(touch {m})\"\ninput: {{uris: [\"{0}/in/*.jsonl\"]}}\noutput: {{uri: \"{0}/out1\"}}\n",
            d.path().display()
        ),
    );
    let _ = mdf()
        .args(["run", spec.to_str().unwrap(), "--job-root"])
        .arg(d.path().join("jobs"))
        .output()
        .unwrap();
    // Backticks and `;` in values: the job runs, the values are just text.
    let spec = write_spec(
        d.path(),
        &format!(
            "name: shell\ninput: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages: [{{op: text_length, params: {{prefix: \"`touch {m}`_\"}}}}]\noutput: {{uri: \"{0}/out;touch {m}\"}}\njob: {{poll_millis: 50}}\n",
            d.path().display()
        ),
    );
    let o = mdf()
        .args(["run", spec.to_str().unwrap(), "--job-root"])
        .arg(d.path().join("jobs"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        d.path()
            .join(format!("out;touch {m}"))
            .join("_manifest.json")
            .exists()
    );
    assert!(!marker.exists(), "a command in the spec ran");
}

/// A compressed input of 0 bytes is a cut upload, not an empty file: a reject says
/// so (it was read as empty, and nothing told the user).
#[test]
fn an_empty_compressed_file_is_a_reject() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    write_lines(&inp.join("good.jsonl"), &docs(9, 10));
    std::fs::write(inp.join("zero.jsonl.gz"), b"").unwrap();
    std::fs::write(inp.join("zero.jsonl.zst"), b"").unwrap();
    std::fs::write(inp.join("empty.jsonl"), b"").unwrap();
    let out = d.path().join("out");
    let (_, st) = run_spec(
        d.path(),
        &format!(
            "name: zero\ninput: {{uris: [\"{}/*\"], format: jsonl}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{}\"}}\n",
            inp.display(),
            out.display()
        ),
    );
    // The two compressed ones; an empty plain file is just empty.
    assert_eq!(
        st["phases"][0]["stats"]["rejects_by_reason"]["corrupt_input"], 2,
        "{st:#}"
    );
    assert_eq!(output_ids(&out).len(), 10);
    let wd = d.path().join("w");
    std::fs::create_dir_all(&wd).unwrap();
    std::fs::write(wd.join("zero.warc.gz"), b"").unwrap();
    let (_, st) = run_spec(
        d.path(),
        &format!(
            "name: zerowarc\ninput: {{uris: [\"{}/*\"], format: warc}}\nstages: []\noutput: {{uri: \"{}\", drop_columns: [html]}}\n",
            wd.display(),
            d.path().join("out2").display()
        ),
    );
    assert_eq!(
        st["phases"][0]["stats"]["rejects_by_reason"]["corrupt_input"], 1,
        "{st:#}"
    );
}
