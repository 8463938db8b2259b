//! Helpers shared by the integration tests: the `mdf` binary, generated inputs,
//! reading outputs back.
#![allow(dead_code)]
use arrow_array::{Array, RecordBatch, StringArray};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn mdf() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mdf"));
    c.env_remove("MDF_FAULTS");
    c
}

pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("mdf runs");
    assert!(
        out.status.success(),
        "mdf failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Deterministic pseudo-random documents: `{"url", "text", "n"}` per line.
pub fn docs(seed: u64, n: usize) -> Vec<String> {
    let words = [
        "alpha", "beta", "gamma", "delta", "web", "data", "token", "model", "crawl", "text",
    ];
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    (0..n)
        .map(|i| {
            let len = 1 + next() % 40;
            let text: Vec<&str> = (0..len).map(|_| words[next() % words.len()]).collect();
            serde_json::json!({"url": format!("https://e.org/{seed}/{i}"), "text": text.join(" "), "n": i})
                .to_string()
        })
        .collect()
}

pub fn write_lines(path: &Path, lines: &[String]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Writes `text` as the spec in `dir`, runs it to the end with its jobs under
/// `dir/jobs` (the run must succeed), and returns the run's output and its status.
pub fn run_spec(dir: &Path, text: &str) -> (Output, serde_json::Value) {
    let spec = write_spec(dir, text);
    let o = run_ok(
        mdf()
            .args(["run", spec.to_str().unwrap(), "--job-root"])
            .arg(dir.join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    (o, st)
}

pub fn write_spec(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("spec.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

pub fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    let f = std::fs::File::open(path).unwrap();
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    r.map(|b| b.unwrap()).collect()
}

pub fn strings(batches: &[RecordBatch], col: &str) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        let c = b
            .column_by_name(col)
            .unwrap_or_else(|| panic!("no column {col}"));
        let s = c.as_any().downcast_ref::<StringArray>().unwrap();
        out.extend((0..s.len()).map(|i| s.value(i).to_string()));
    }
    out
}

/// The output manifest of a finished job.
pub fn manifest(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("_manifest.json")).expect("manifest exists"))
        .unwrap()
}

/// Every record id in the output, read through the manifest only.
pub fn output_ids(out: &Path) -> Vec<String> {
    let m = manifest(out);
    let mut ids = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let batches = read_parquet(&out.join(f["path"].as_str().unwrap()));
        let n: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(
            n as u64,
            f["rows"].as_u64().unwrap(),
            "manifest row count matches the file"
        );
        ids.extend(strings(&batches, "id"));
    }
    ids
}

/// Every batch of the output's data files, read through the manifest.
pub fn output_batches(out: &Path) -> Vec<RecordBatch> {
    let m = manifest(out);
    m["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| read_parquet(&out.join(f["path"].as_str().unwrap())))
        .collect()
}

/// The column names of the output's first file (all files share the planned schema).
pub fn output_columns(out: &Path) -> Vec<String> {
    let m = manifest(out);
    let f = &m["files"].as_array().unwrap()[0];
    let batches = read_parquet(&out.join(f["path"].as_str().unwrap()));
    batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

/// All files under `dir`, relative, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

/// Files under the output that the manifest does not list (should be none).
pub fn orphans(out: &Path) -> Vec<String> {
    let m = manifest(out);
    let rejects_dir = out.join("_rejects");
    let mut listed: Vec<String> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    for r in m["rejects"].as_array().unwrap() {
        let p = rejects_dir.join(r["path"].as_str().unwrap());
        listed.push(p.strip_prefix(out).unwrap().to_string_lossy().into_owned());
    }
    // Side tables, relative to the output.
    for files in m["tables"].as_object().into_iter().flat_map(|t| t.values()) {
        for f in files.as_array().unwrap() {
            listed.push(f["path"].as_str().unwrap().to_string());
        }
    }
    listed.push("_manifest.json".into());
    // The job's owner marker (docs/PROTOCOL.md §3), not data.
    listed.push("_mdf_owner.json".into());
    files_under(out)
        .into_iter()
        .filter(|f| !listed.contains(f))
        .collect()
}

pub fn status_json(job: &str) -> serde_json::Value {
    let o = run_ok(mdf().args(["status", job, "--json"]));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The last line of stdout that starts with `job: `.
pub fn job_uri(o: &Output) -> String {
    stdout(o)
        .lines()
        .filter_map(|l| l.strip_prefix("job: "))
        .next_back()
        .expect("a job: line")
        .to_string()
}

/// The endpoint of the tests' S3 server (MDF_TEST_S3_ENDPOINT), or `None`: the
/// caller skips its S3 part. Panics instead when the S3 tests are required (see
/// [`s3_endpoint_from`]), so a CI run never passes by skipping them.
pub fn s3_endpoint() -> Option<String> {
    match s3_endpoint_from(&|k: &str| std::env::var(k).ok()) {
        Ok(Some(ep)) => Some(ep),
        Ok(None) => {
            eprintln!("skipping the S3 part: MDF_TEST_S3_ENDPOINT is not set");
            None
        }
        Err(message) => panic!("{message}"),
    }
}

/// [`s3_endpoint`]'s decision over an injected environment: the endpoint when set;
/// otherwise an error when `CI` or `MDF_REQUIRE_S3` is set (to anything but empty,
/// `0` or `false`; `.ci/run` sets MDF_REQUIRE_S3=1), else `None` (skip).
pub fn s3_endpoint_from(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, String> {
    if let Some(ep) = env("MDF_TEST_S3_ENDPOINT").filter(|e| !e.trim().is_empty()) {
        return Ok(Some(ep));
    }
    let on = |k: &str| env(k).is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    match ["MDF_REQUIRE_S3", "CI"].into_iter().find(|k| on(k)) {
        Some(k) => Err(format!(
            "{k} is set, so the S3 tests must run, but MDF_TEST_S3_ENDPOINT is not set (.ci/run starts a moto server and sets it)"
        )),
        None => Ok(None),
    }
}

/// The S3 server of the tests ([`s3_endpoint`], bucket MDF_TEST_S3_BUCKET or
/// `mdf-test`), with the dummy credentials it accepts; `None` when not configured
/// and not required.
pub fn test_s3() -> Option<(String, String, object_store::aws::AmazonS3)> {
    let endpoint = s3_endpoint()?;
    let bucket = std::env::var("MDF_TEST_S3_BUCKET").unwrap_or_else(|_| "mdf-test".into());
    let s3 = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(&bucket)
        .with_endpoint(&endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()
        .unwrap();
    Some((endpoint, bucket, s3))
}

/// Runs a Python reference script: its stdout, or `None` (skip, with a message) when
/// python3 or a package it needs is missing — a panic instead when MDF_REQUIRE_ONNX
/// is set (.ci/run sets it), so CI never passes by skipping.
pub fn python(args: &[&str]) -> Option<String> {
    let o = std::process::Command::new("python3")
        .args(args)
        .output()
        .ok()?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        if std::env::var_os("MDF_REQUIRE_ONNX").is_some() {
            panic!("python3 {args:?}: {err}");
        }
        eprintln!("skipping: python3 {args:?}: {err}");
        return None;
    }
    Some(String::from_utf8_lossy(&o.stdout).to_string())
}

/// Submits a spec to `jobs` without running it; returns the job's URI.
pub fn submit_job(spec: &Path, jobs: &Path) -> String {
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(jobs),
    );
    stdout(&o).lines().last().unwrap().to_string()
}

/// Starts `mdf worker` on `job` as worker `id`, its output discarded.
pub fn spawn_worker(job: &str, id: &str) -> std::process::Child {
    mdf()
        .args(["worker", "--job", job, "--worker-id", id])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The lease records of `phase` under `jobs` (those readable now).
pub fn lease_records(jobs: &Path, phase: &str) -> Vec<serde_json::Value> {
    files_under(jobs)
        .iter()
        .filter(|f| f.contains(&format!("/leases/{phase}/")))
        .filter_map(|f| {
            std::fs::read(jobs.join(f))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
        })
        .collect()
}

/// Kills worker `id` (its process `worker`) a little after it first holds a lease of
/// `phase` under `jobs` (or after a minute), and reaps it. Any of the process's task
/// slots counts (`id`, `id-1`, ...: one per core).
pub fn kill_once_it_holds(jobs: &Path, worker: &mut std::process::Child, id: &str, phase: &str) {
    let slot = |w: &str| {
        w == id
            || w.strip_prefix(id)
                .and_then(|r| r.strip_prefix('-'))
                .is_some_and(|n| n.parse::<usize>().is_ok())
    };
    let holds = || {
        lease_records(jobs, phase)
            .iter()
            .any(|v| v["worker"].as_str().is_some_and(slot))
    };
    let t0 = std::time::Instant::now();
    while !holds() && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    worker.kill().unwrap();
    worker.wait().unwrap();
}

/// Whether some task of `phase` under `jobs` was taken over after its worker was lost
/// (a lease record counts `lost` attempts).
pub fn a_lease_was_lost(jobs: &Path, phase: &str) -> bool {
    lease_records(jobs, phase)
        .iter()
        .any(|v| v["lost"].as_u64().unwrap_or(0) > 0)
}

/// The side table of a cutting dedup stage (substring, paragraph) named `stage`: the
/// cut byte spans by record id, sorted; empty when the job cut nothing (no table).
pub fn side_table(
    out: &Path,
    stage: &str,
) -> std::collections::BTreeMap<u128, Vec<(usize, usize)>> {
    let m = manifest(out);
    let mut t: std::collections::BTreeMap<u128, Vec<(usize, usize)>> = Default::default();
    let files = m["tables"][stage].as_array().cloned().unwrap_or_default();
    for f in &files {
        let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
        let ids = strings(&b, "id");
        let nums = |c: &str| -> Vec<u64> {
            b.iter()
                .flat_map(|x| {
                    x.column_by_name(c)
                        .unwrap()
                        .as_any()
                        .downcast_ref::<arrow_array::UInt64Array>()
                        .unwrap()
                        .values()
                        .to_vec()
                })
                .collect()
        };
        let (s, e) = (nums("start"), nums("end"));
        for i in 0..ids.len() {
            t.entry(u128::from_str_radix(&ids[i], 16).unwrap())
                .or_default()
                .push((s[i] as usize, e[i] as usize));
        }
    }
    for v in t.values_mut() {
        v.sort_unstable();
    }
    t
}

/// Every record of a cutting dedup's output (substring, paragraph), by id: its
/// `doc_col` value and its text if kept, or `None` if rejected (with `reason`, the
/// only reason these tests expect; a rejected record is kept as it reached the stage).
pub fn cut_records(
    out: &Path,
    doc_col: &str,
    reason: &str,
) -> std::collections::BTreeMap<u128, (String, Option<String>)> {
    let b = output_batches(out);
    let mut r = std::collections::BTreeMap::new();
    for ((id, doc), text) in strings(&b, "id")
        .into_iter()
        .zip(strings(&b, doc_col))
        .zip(strings(&b, "text"))
    {
        r.insert(u128::from_str_radix(&id, 16).unwrap(), (doc, Some(text)));
    }
    let m = manifest(out);
    for f in m["rejects"].as_array().unwrap() {
        let rj = read_parquet(&out.join("_rejects").join(f["path"].as_str().unwrap()));
        for ((id, why), rec) in strings(&rj, "id")
            .into_iter()
            .zip(strings(&rj, "reason"))
            .zip(strings(&rj, "record"))
        {
            assert_eq!(why, reason);
            let v: serde_json::Value = serde_json::from_str(&rec).unwrap();
            let id = u128::from_str_radix(&id, 16).unwrap();
            let prev = r.insert(id, (v[doc_col].as_str().unwrap().to_string(), None));
            assert!(
                prev.is_none(),
                "{id:x} both kept and rejected, or rejected twice"
            );
        }
    }
    r
}

/// Each `(params, field)` of a dedup stage named `stage` over `dir/in/*.jsonl` is
/// refused before any task starts (exit 2, nothing written), the message naming
/// `field`.
pub fn assert_dedup_params_refused(dir: &Path, stage: &str, cases: &[(&str, &str)]) {
    for (params, field) in cases {
        let s = write_spec(
            dir,
            &format!(
                "version: 1\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages:\n  - {{name: {stage}, op: dedup, params: {params}}}\noutput: {{uri: \"{}/out\"}}\n",
                dir.display(),
                dir.display()
            ),
        );
        let o = mdf().args(["run", s.to_str().unwrap()]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{params}: {}", stderr(&o));
        assert!(stderr(&o).contains(field), "{params}: {}", stderr(&o));
        assert!(!dir.join("out").exists());
    }
}

/// Runs a bundled example (`examples/<name>.yaml`) from the repository root with its
/// output at `out` and its job under `jobs`, with `--workers` when given.
pub fn run_example(name: &str, out: &Path, jobs: &Path, workers: Option<&str>) -> Output {
    let mut cmd = mdf();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", &format!("examples/{name}.yaml"), "-o"])
        .arg(out)
        .arg("--job-root")
        .arg(jobs);
    if let Some(w) = workers {
        cmd.args(["--workers", w]);
    }
    run_ok(&mut cmd)
}

/// A test server in Python (`scripts/NAME` with `args`) that prints its port on its
/// first stdout line; killed when dropped.
pub struct PyServer {
    pub child: std::process::Child,
    pub port: u16,
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `scripts/<script>` with `args`; its stderr is shown when `show_stderr`.
pub fn py_server<S: AsRef<std::ffi::OsStr>>(
    script: &str,
    args: &[S],
    show_stderr: bool,
) -> PyServer {
    use std::io::BufRead;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(script);
    let mut child = std::process::Command::new("python3")
        .arg(path)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(if show_stderr {
            std::process::Stdio::inherit()
        } else {
            std::process::Stdio::null()
        })
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{script} did not start (it prints its port)"));
    PyServer { child, port }
}

/// (url, text) of every output record of `out`, sorted.
pub fn url_text_records(out: &Path) -> Vec<(String, String)> {
    let b = output_batches(out);
    let mut v: Vec<(String, String)> = strings(&b, "url")
        .into_iter()
        .zip(strings(&b, "text"))
        .collect();
    v.sort();
    v
}
