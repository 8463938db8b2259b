//! End to end against a real S3-compatible server (`.ci/run` starts moto on
//! 127.0.0.1 and sets MDF_TEST_S3_ENDPOINT): inputs, job root and output all on
//! `s3://`, endpoint and credentials from the standard AWS variables.
mod common;
use common::*;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

/// Every test that needs the S3 server asks `common::s3_endpoint`: it skips only
/// outside CI; with `CI` or `MDF_REQUIRE_S3` set and no endpoint it fails.
#[test]
fn s3_tests_fail_instead_of_skipping_when_required() {
    let decide = |vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        s3_endpoint_from(&move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    };
    let ep = "http://127.0.0.1:9000";
    assert_eq!(decide(&[]), Ok(None), "a developer without a server skips");
    assert_eq!(decide(&[("MDF_REQUIRE_S3", "0")]), Ok(None));
    assert_eq!(decide(&[("CI", "false")]), Ok(None));
    assert_eq!(
        decide(&[("MDF_TEST_S3_ENDPOINT", ep)]),
        Ok(Some(ep.to_string()))
    );
    assert_eq!(
        decide(&[("MDF_TEST_S3_ENDPOINT", ep), ("CI", "true")]),
        Ok(Some(ep.to_string()))
    );
    for required in [
        vec![("MDF_REQUIRE_S3", "1")],
        vec![("CI", "true")],
        vec![("CI", "1"), ("MDF_TEST_S3_ENDPOINT", "")],
    ] {
        let e = decide(&required).expect_err("required but not configured fails");
        assert!(e.contains("MDF_TEST_S3_ENDPOINT is not set"), "{e}");
        assert!(e.contains(required[0].0), "{e}");
    }
}

fn aws_env(cmd: &mut std::process::Command, ep: &str) {
    cmd.env("AWS_ENDPOINT_URL", ep)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1");
}

/// Writes `files` (JSONL lines each) as `<prefix>/in/<i>.jsonl`.
async fn put_inputs(s3: &impl ObjectStore, prefix: &str, files: &[Vec<String>]) {
    for (i, f) in files.iter().enumerate() {
        s3.put(
            &Path::from(format!("{prefix}/in/{i}.jsonl")),
            (f.join("\n") + "\n").into(),
        )
        .await
        .unwrap();
    }
}

/// `mdf run SPEC` with `workers` workers and its job root at `s3://bucket/prefix/jobs`.
fn run_on_s3(
    spec: &std::path::Path,
    ep: &str,
    bucket: &str,
    prefix: &str,
    workers: u32,
) -> std::process::Output {
    let mut cmd = mdf();
    cmd.args(["run", spec.to_str().unwrap(), "--workers"])
        .arg(workers.to_string())
        .arg("--job-root")
        .arg(format!("s3://{bucket}/{prefix}/jobs"));
    aws_env(&mut cmd, ep);
    run_ok(&mut cmd)
}

/// The `_manifest.json` of the output at `<prefix>/<dir>`.
async fn manifest_at(s3: &impl ObjectStore, prefix: &str, dir: &str) -> serde_json::Value {
    let b = s3
        .get(&Path::from(format!("{prefix}/{dir}/_manifest.json")))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    serde_json::from_slice(&b).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_runs_entirely_on_s3() {
    if s3_endpoint().is_none() {
        return;
    }
    let (ep, bucket, s3) = test_s3().expect("endpoint set");
    let prefix = format!("e2e-{}", mdf::clock::Entropy::from_os().hex_id(6));
    let lines = docs(9, 500);
    let files: Vec<Vec<String>> = lines.chunks(125).map(|c| c.to_vec()).collect();
    put_inputs(&s3, &prefix, &files).await;
    let d = tempfile::tempdir().unwrap();
    let spec = write_spec(
        d.path(),
        &format!(
            "name: s3e2e\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\nstages: [{{op: text_length}}, {{op: length_filter, params: {{min_words: 2}}}}]\noutput: {{uri: \"s3://{bucket}/{prefix}/out\"}}\njob: {{task_bytes: 8KiB, poll_millis: 50}}\n"
        ),
    );
    let o = run_on_s3(&spec, &ep, &bucket, &prefix, 3);
    let job = job_uri(&o);
    assert!(
        job.starts_with(&format!("s3://{bucket}/{prefix}/jobs/jobs/s3e2e-")),
        "{job}"
    );
    let m = manifest_at(&s3, &prefix, "out").await;
    let short = lines
        .iter()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count()
                < 2
        })
        .count() as u64;
    assert_eq!(m["rows"].as_u64().unwrap(), 500 - short);
    // Exactly the manifest's files (and rejects) are under the output prefix.
    let listed: Vec<String> = {
        use futures::TryStreamExt;
        s3.list(Some(&Path::from(format!("{prefix}/out"))))
            .map_ok(|o| o.location.to_string())
            .try_collect()
            .await
            .unwrap()
    };
    // + the manifest and the job's owner marker.
    let n_files = m["files"].as_array().unwrap().len() + m["rejects"].as_array().unwrap().len() + 2;
    assert!(listed.iter().any(|l| l.ends_with("/_mdf_owner.json")));
    assert_eq!(listed.len(), n_files, "{listed:?}");
    let mut st = mdf();
    st.args(["status", &job, "--json"]);
    aws_env(&mut st, &ep);
    let v: serde_json::Value = serde_json::from_slice(&run_ok(&mut st).stdout).unwrap();
    assert_eq!(v["complete"], true);
    assert!(v["phases"][0]["requests"]["put"].as_u64().unwrap() > 0);
}

/// The exact-dedup shuffle on S3: keys objects read by byte range, 16 sections in
/// flight per reduce and apply task; every distinct text kept once, every copy (here
/// a whole file repeated in another, and short texts that repeat by chance) rejected.
#[tokio::test(flavor = "multi_thread")]
async fn exact_dedup_runs_on_s3() {
    if s3_endpoint().is_none() {
        return;
    }
    let (ep, bucket, s3) = test_s3().expect("endpoint set");
    let prefix = format!("dedup-{}", mdf::clock::Entropy::from_os().hex_id(6));
    let lines = docs(21, 300);
    let mut files: Vec<Vec<String>> = lines.chunks(100).map(|c| c.to_vec()).collect();
    files.push(files[0][..60].to_vec());
    put_inputs(&s3, &prefix, &files).await;
    let d = tempfile::tempdir().unwrap();
    let spec = write_spec(
        d.path(),
        &format!(
            "name: s3dedup\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\nstages:\n  - op: exact_key\n    name: content\n    params: {{field: text}}\n  - op: dedup\n    params: {{key: content_key, partitions: 3}}\noutput: {{uri: \"s3://{bucket}/{prefix}/out\"}}\njob: {{max_files_per_task: 1, poll_millis: 50}}\n"
        ),
    );
    run_on_s3(&spec, &ep, &bucket, &prefix, 2);
    let m = manifest_at(&s3, &prefix, "out").await;
    let all: Vec<String> = files
        .iter()
        .flatten()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let t = v["text"].as_str().unwrap().to_lowercase();
            t.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect();
    let distinct = all.iter().collect::<std::collections::HashSet<_>>().len() as u64;
    assert!(distinct < 300, "the planted copies make duplicates");
    assert_eq!(m["rows"].as_u64().unwrap(), distinct);
    assert_eq!(m["rejected"].as_u64().unwrap(), all.len() as u64 - distinct);
}

/// Lance output on S3: fragments written under attempt paths on the store, committed
/// at finalize through Lance's own S3 client (endpoint and credentials from the AWS
/// variables), then read back by pylance from the same server.
#[cfg(feature = "lance")]
#[tokio::test(flavor = "multi_thread")]
async fn lance_output_on_s3_reads_back_in_pylance() {
    let Some(ep) = s3_endpoint() else { return };
    let (_, bucket, s3) = test_s3().expect("endpoint set");
    let prefix = format!("lance-{}", mdf::clock::Entropy::from_os().hex_id(6));
    let lines = docs(33, 200);
    let files: Vec<Vec<String>> = lines.chunks(50).map(|c| c.to_vec()).collect();
    put_inputs(&s3, &prefix, &files).await;
    let d = tempfile::tempdir().unwrap();
    let out = format!("s3://{bucket}/{prefix}/ds");
    let spec = write_spec(
        d.path(),
        &format!(
            "name: s3lance\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{out}\", format: lance}}\njob: {{max_files_per_task: 1, poll_millis: 50}}\n"
        ),
    );
    run_on_s3(&spec, &ep, &bucket, &prefix, 2);
    let o = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, lance; ds = lance.dataset(sys.argv[1], storage_options={'aws_endpoint': sys.argv[2], 'allow_http': 'true', 'aws_access_key_id': 'test', 'aws_secret_access_key': 'test', 'aws_region': 'us-east-1'}); print(ds.count_rows(), len(ds.get_fragments()))",
            &out,
            &ep,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && err.contains("No module named 'lance'") {
        assert!(std::env::var_os("MDF_REQUIRE_LANCE").is_none(), "{err}");
        return;
    }
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "200 4");
}

/// Issue 22, item 5, on a real S3 API: an input rewritten after submit is read with
/// `If-Match` on its planned etag, so its task fails with `input_changed` naming the
/// file instead of reading the new bytes under the old task id and byte ranges.
#[tokio::test(flavor = "multi_thread")]
async fn an_input_rewritten_after_submit_fails_on_s3() {
    if s3_endpoint().is_none() {
        return;
    }
    let (ep, bucket, s3) = test_s3().expect("endpoint set");
    let prefix = format!("pin-{}", mdf::clock::Entropy::from_os().hex_id(6));
    put_inputs(&s3, &prefix, &[docs(61, 40), docs(62, 40)]).await;
    let d = tempfile::tempdir().unwrap();
    let spec = write_spec(
        d.path(),
        &format!(
            "name: pin\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"s3://{bucket}/{prefix}/out\"}}\njob: {{max_files_per_task: 1, poll_millis: 50}}\n"
        ),
    );
    let mut cmd = mdf();
    cmd.args(["submit", spec.to_str().unwrap(), "--job-root"])
        .arg(format!("s3://{bucket}/{prefix}/jobs"));
    aws_env(&mut cmd, &ep);
    let job = stdout(&run_ok(&mut cmd))
        .lines()
        .last()
        .unwrap()
        .to_string();
    put_inputs(&s3, &prefix, &[docs(61, 40), docs(63, 55)]).await;
    let mut w = mdf();
    w.args(["worker", "--job", &job]);
    aws_env(&mut w, &ep);
    let o = w.output().unwrap();
    let mut st = mdf();
    st.args(["status", &job, "--json"]);
    aws_env(&mut st, &ep);
    let v: serde_json::Value = serde_json::from_slice(&run_ok(&mut st).stdout).unwrap();
    assert_eq!(v["complete"], true, "{v:#}\n{}", stderr(&o));
    let failed = v["failed_tasks"].to_string();
    assert!(
        failed.contains("input_changed") && failed.contains("in/1.jsonl"),
        "{failed}"
    );
    assert!(!failed.contains("in/0.jsonl"), "{failed}");
}
