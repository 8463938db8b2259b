//! Storage outages: the store stops answering (every request fails with a 503,
//! injected through `MDF_FAULTS=any:outage=MILLIS@N`) for far longer than a request's
//! retry budget (`job.retry_attempts` / `job.retry_base_millis`). Workers back off and
//! carry on; the job completes with exactly the output of a clean run. A worker told
//! `--give-up-after` stops with an error instead; a job that does not exist still
//! fails at once.
mod common;
use common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Eight throttled tasks; every request gets 3 tries at most 10 + 20 ms apart, so an
/// outage of 1.5 s outlasts a request's whole retry budget fifty times over.
fn outage_spec(dir: &Path, out: &Path) -> std::path::PathBuf {
    for i in 0..8 {
        write_lines(&dir.join(format!("in/{i:02}.jsonl")), &docs(500 + i, 60));
    }
    write_spec(
        dir,
        &format!(
            r#"
name: outage
input: {{uris: ["{0}/in/*.jsonl"]}}
stages:
  - op: throttle
    params: {{records_per_sec: 600}}
  - op: text_length
  - op: length_filter
    params: {{min_words: 4}}
output: {{uri: "{1}"}}
job: {{max_files_per_task: 1, lease_ttl_secs: 2, heartbeat_secs: 1, poll_millis: 50, retry_attempts: 3, retry_base_millis: 10}}
"#,
            dir.display(),
            out.display()
        ),
    )
}

/// An output: its record ids and its files' (rows, checksum), both sorted.
type Output = (Vec<String>, Vec<(u64, String)>);

fn output_of(out: &Path) -> Output {
    let mut ids = output_ids(out);
    ids.sort();
    let m = manifest(out);
    let mut files: Vec<(u64, String)> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rows"].as_u64().unwrap(),
                f["blake3"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    files.sort();
    (ids, files)
}

/// A clean run of `spec` into `dir/out-ref`: its output, and how many requests
/// its tasks and workers made.
fn clean_run(dir: &Path, spec: &Path) -> (Output, u64) {
    let out = dir.join("out-ref");
    let o = run_ok(
        mdf()
            .args(["run", spec.to_str().unwrap(), "--workers", "2", "-o"])
            .arg(&out)
            .arg("--job-root")
            .arg(dir.join("jobs-ref")),
    );
    let st = status_json(&job_uri(&o));
    let requests = st["requests_total"]
        .as_u64()
        .unwrap_or_else(|| panic!("no request total in {st:#}"));
    (output_of(&out), requests)
}

#[test]
fn a_store_outage_mid_job_is_waited_out_and_the_output_is_unchanged() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = outage_spec(d.path(), &out);
    let (reference, requests) = clean_run(d.path(), &spec);
    // The store goes down halfway through the job's requests, for 1.5 s.
    let from = (requests / 2).max(20);
    let o = mdf()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--workers",
            "2",
            "--job-root",
        ])
        .arg(d.path().join("jobs"))
        .env("MDF_FAULTS", format!("any:outage=1500@{from}:1"))
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{}\n{err}", stdout(&o));
    assert!(err.contains("storage outage"), "no outage was met: {err}");
    assert!(
        err.contains("storage outage over after"),
        "the outage's duration is logged: {err}"
    );
    assert!(!err.contains("worker error"), "{err}");
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert_eq!(output_of(&out), reference, "the same output as a clean run");
    assert!(orphans(&out).is_empty(), "orphans: {:?}", orphans(&out));
}

#[test]
fn a_worker_started_during_an_outage_waits_for_the_store() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = outage_spec(d.path(), &out);
    let (reference, _) = clean_run(d.path(), &spec);
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    // Down from the very first request: reading job.json meets the outage, with the
    // default retry budget (job.json is not read yet), at most 3.2 s: down for 4 s.
    let o = mdf()
        .args(["worker", "--job", &job])
        .env("MDF_FAULTS", "any:outage=4000@1:1")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("storage outage over after"), "{err}");
    assert!(err.contains("job complete"), "{err}");
    assert_eq!(output_of(&out), reference, "the same output as a clean run");
}

#[test]
fn give_up_after_bounds_the_wait_and_a_missing_job_fails_at_once() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = outage_spec(d.path(), &out);
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    // The store goes down after a few requests and stays down.
    let t0 = Instant::now();
    let o = mdf()
        .args(["worker", "--job", &job, "--give-up-after", "2"])
        .env("MDF_FAULTS", "any:outage=600000@12:1")
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("giving up"), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "gave up after {:?}",
        t0.elapsed()
    );
    // No job.json is an answer, not an outage: no waiting.
    let t0 = Instant::now();
    let o = mdf()
        .args(["worker", "--job"])
        .arg(d.path().join("jobs/jobs/no-such-job"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no job at"), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}
