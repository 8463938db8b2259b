//! S3 failures as S3 sends them, through a fault-injecting HTTP proxy in front of the
//! moto server (`tests/common/fault_proxy.rs`; `.ci/run` starts moto and sets
//! MDF_TEST_S3_ENDPOINT): a 409 with S3's XML body, 500 after the write applied, 503
//! SlowDown, a reset connection, and the response dropped after the write applied.
//! The lease protocol and a whole `mdf run` go through mdf's own S3 client (the
//! `Registry`), and a claim, renewal or commit that landed must be recognised as
//! ours: no lost lease, and the output of a clean run. A store that ignores
//! `If-None-Match` (the proxy strips it) must be refused by submit and by workers.
mod common;
#[path = "common/fault_proxy.rs"]
mod fault_proxy;
use common::*;
use fault_proxy::{FaultProxy, Kind};
use futures::TryStreamExt;
use mdf::clock::{Entropy, MockClock};
use mdf::protocol::io::{Retry, put_json};
use mdf::protocol::lease::{Claim, CommitOutcome, LeaseCtx};
use mdf::protocol::records::{CommitRecord, LeaseRecord};
use mdf::spec::S3Settings;
use mdf::store::Registry;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

/// moto's endpoint, or `None` (skipped) outside CI when it is not set.
fn endpoint() -> Option<String> {
    match std::env::var("MDF_TEST_S3_ENDPOINT") {
        Ok(e) => Some(e),
        Err(_) => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must run the S3 tests (set MDF_TEST_S3_ENDPOINT)"
            );
            eprintln!("skipping: MDF_TEST_S3_ENDPOINT is not set");
            None
        }
    }
}

/// mdf's S3 client reads credentials from the standard variables, set once here
/// before any test of this file opens a store.
fn aws_credentials() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: every test of this file calls this first, and no thread of this
        // process reads the environment while the `Once` runs.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", "test");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
            std::env::set_var("AWS_REGION", "us-east-1");
        }
    });
}

fn aws_env(cmd: &mut std::process::Command, ep: &str) {
    cmd.env("AWS_ENDPOINT_URL", ep)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1");
}

/// The store mdf itself opens for `s3://bucket` at `endpoint`.
fn mdf_store(endpoint: &str, bucket: &str) -> std::sync::Arc<dyn ObjectStore> {
    aws_credentials();
    let reg = Registry::with_wrapper(
        S3Settings {
            endpoint: Some(endpoint.to_string()),
            max_concurrent_requests: 8,
            ..Default::default()
        },
        None,
    );
    reg.resolve(&format!("s3://{bucket}/")).unwrap().0
}

async fn read_json(s3: &dyn ObjectStore, p: &Path) -> serde_json::Value {
    serde_json::from_slice(&s3.get(p).await.unwrap().bytes().await.unwrap()).unwrap()
}

/// Every lease record under `prefix`.
async fn lease_records(s3: &dyn ObjectStore, prefix: &str) -> Vec<(String, LeaseRecord)> {
    let metas: Vec<_> = s3
        .list(Some(&Path::from(prefix)))
        .try_collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for m in metas {
        let s = m.location.as_ref();
        if (s.contains("/leases/") || s.contains("/slots/")) && s.ends_with(".json") {
            let v = read_json(s3, &m.location).await;
            out.push((s.to_string(), serde_json::from_value(v).unwrap()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn every_http_fault_on_claim_renew_and_commit_leaves_the_lease_ours() {
    let Some(ep) = endpoint() else { return };
    let (_, bucket, direct) = test_s3().expect("endpoint set");
    let proxy = FaultProxy::start(&ep, 11);
    let store = mdf_store(&proxy.endpoint, &bucket);
    let clock = MockClock::new(1_000_000);
    let entropy = Entropy::seeded(5);
    let retry = Retry::new(entropy.clone());
    let observed = mdf::protocol::lease::Observations::default();
    let lease = LeaseCtx {
        store: store.as_ref(),
        clock: &clock,
        entropy: &entropy,
        worker: "w",
        ttl_ms: 60_000,
        retry: &retry,
        observed: &observed,
    };
    let root = format!("s3faults-lease-{}", Entropy::from_os().hex_id(6));
    let fixture: CommitRecord =
        serde_json::from_str(include_str!("fixtures/v1/commit.json")).unwrap();
    for (i, kind) in Kind::ALL_FAULTS.into_iter().enumerate() {
        let dir = Path::from(format!("{root}/k{i}/leases/p00/t"));
        let before = proxy.fired().len();
        proxy.fail("PUT", &format!("{dir}/0000000000.json"), kind, 1);
        let Claim::Acquired(mut held) = lease.claim(&dir, true).await.unwrap() else {
            panic!("{kind:?}: a claim that met the fault is not ours");
        };
        assert_eq!(held.seq, 0, "{kind:?}");
        proxy.fail("PUT", &format!("{dir}/0000000001.json"), kind, 1);
        lease
            .renew(&mut held)
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: renew: {e}"));
        assert_eq!(held.seq, 1, "{kind:?}");
        let commit = Path::from(format!("{root}/k{i}/commits/p00/t.json"));
        let mut rec = fixture.clone();
        rec.attempt = held.attempt.clone();
        rec.write_id = entropy.hex_id(8);
        proxy.fail("PUT", commit.as_ref(), kind, 1);
        match lease.commit(&mut held, &commit, &rec).await {
            Ok(CommitOutcome::Committed) => {}
            other => panic!("{kind:?}: commit: {other:?}"),
        }
        assert_eq!(
            proxy.fired().len(),
            before + 3,
            "{kind:?}: each fault fired"
        );
        // What the store holds, read around the proxy.
        let records = lease_records(&direct, &format!("{root}/k{i}")).await;
        assert_eq!(records.len(), 2, "{kind:?}: {records:?}");
        for (path, r) in &records {
            assert_eq!(r.attempt, held.attempt, "{kind:?}: {path}");
            assert_eq!(r.lost, 0, "{kind:?}: {path}");
        }
        let c = read_json(&direct, &commit).await;
        assert_eq!(c["write_id"], rec.write_id.as_str(), "{kind:?}");
    }
}

/// A plain PUT (worker stats, `_manifest.json`) answered 409 `OperationAborted` is
/// retried, not reported as "already exists".
#[tokio::test(flavor = "multi_thread")]
async fn a_409_on_a_plain_put_is_retried() {
    let Some(ep) = endpoint() else { return };
    let (_, bucket, direct) = test_s3().expect("endpoint set");
    let proxy = FaultProxy::start(&ep, 14);
    let store = mdf_store(&proxy.endpoint, &bucket);
    let retry = Retry::new(Entropy::seeded(6));
    let root = format!("s3faults-put-{}", Entropy::from_os().hex_id(6));
    for (n, kind) in [Kind::OperationAborted, Kind::Conflict]
        .into_iter()
        .enumerate()
    {
        let p = Path::from(format!("{root}/workers/w{n}.json"));
        proxy.fail("PUT", p.as_ref(), kind, 1);
        let v = serde_json::json!({ "n": n });
        put_json(store.as_ref(), &p, &v, &retry)
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(read_json(&direct, &p).await, v, "{kind:?}");
    }
    assert_eq!(proxy.fired().len(), 2);
}

/// Spec of a small job: two phases, exact dedup, so leases, commits and the shuffle
/// objects all cross the proxy.
fn job_spec(bucket: &str, prefix: &str, out: &str) -> String {
    format!(
        "name: s3faults\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\nstages:\n  - op: text_length\n  - op: length_filter\n    params: {{min_words: 2}}\n  - op: exact_key\n    name: content\n  - op: dedup\n    params: {{key: content_key, partitions: 2}}\noutput: {{uri: \"s3://{bucket}/{prefix}/{out}\"}}\njob: {{max_files_per_task: 1, poll_millis: 50, lease_ttl_secs: 20, heartbeat_secs: 2}}\n"
    )
}

/// The sorted record ids of the output at `<prefix>/<out>`, and its manifest.
async fn output_ids(s3: &dyn ObjectStore, prefix: &str, out: &str) -> (Vec<String>, u64, u64) {
    let m = read_json(s3, &Path::from(format!("{prefix}/{out}/_manifest.json"))).await;
    let mut ids = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let p = Path::from(format!("{prefix}/{out}/{}", f["path"].as_str().unwrap()));
        let b = s3.get(&p).await.unwrap().bytes().await.unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(b)
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
        ids.extend(strings(&batches, "id"));
    }
    ids.sort();
    (
        ids,
        m["rows"].as_u64().unwrap(),
        m["rejected"].as_u64().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_under_every_http_fault_equals_a_clean_run() {
    let Some(ep) = endpoint() else { return };
    let (_, bucket, direct) = test_s3().expect("endpoint set");
    let prefix = format!("s3faults-job-{}", Entropy::from_os().hex_id(6));
    let lines = docs(41, 240);
    let mut files: Vec<Vec<String>> = lines.chunks(60).map(|c| c.to_vec()).collect();
    files.push(files[0][..30].to_vec());
    for (i, f) in files.iter().enumerate() {
        direct
            .put(
                &Path::from(format!("{prefix}/in/{i}.jsonl")),
                (f.join("\n") + "\n").into(),
            )
            .await
            .unwrap();
    }
    let d = tempfile::tempdir().unwrap();
    let run = |out: &str, jobs: &str, endpoint: &str| {
        let spec = write_spec(d.path(), &job_spec(&bucket, &prefix, out));
        let mut cmd = mdf();
        cmd.args([
            "run",
            spec.to_str().unwrap(),
            "--workers",
            "2",
            "--job-root",
        ])
        .arg(format!("s3://{bucket}/{prefix}/{jobs}"));
        aws_env(&mut cmd, endpoint);
        run_ok(&mut cmd)
    };
    run("out-clean", "jobs-clean", &ep);

    let proxy = FaultProxy::start(&ep, 12);
    for kind in Kind::ALL_FAULTS {
        // Claims, renewals and releases; commits; task manifests (submit).
        proxy.fail("PUT", "/leases/", kind, 2);
        proxy.fail("PUT", "/commits/", kind, 1);
        proxy.fail("PUT", "/tasks/", kind, 1);
    }
    for kind in [Kind::InternalError, Kind::SlowDown, Kind::Reset] {
        proxy.fail("GET", "/jobs-faulty/", kind, 2);
    }
    let o = run("out-faulty", "jobs-faulty", &proxy.endpoint);
    let job = job_uri(&o);
    for kind in Kind::ALL_FAULTS {
        let on_gets = [Kind::InternalError, Kind::SlowDown, Kind::Reset].contains(&kind);
        assert_eq!(
            proxy.fired_of(kind),
            4 + 2 * usize::from(on_gets),
            "{kind:?}: {:?}",
            proxy.fired()
        );
    }
    // One probe (two creates) for the submit and both workers of the process.
    assert_eq!(
        proxy.seen("PUT", "/probe/"),
        2,
        "the probe runs once per process"
    );
    let mut st = mdf();
    st.args(["status", &job, "--json"]);
    aws_env(&mut st, &ep);
    let v: serde_json::Value = serde_json::from_slice(&run_ok(&mut st).stdout).unwrap();
    assert_eq!(v["succeeded"], true, "{v:#}");
    let leases = lease_records(&direct, &format!("{prefix}/jobs-faulty")).await;
    assert!(!leases.is_empty());
    for (path, r) in &leases {
        assert_eq!(
            r.lost, 0,
            "a landed claim was counted as a lost lease: {path}"
        );
    }
    let clean = output_ids(&direct, &prefix, "out-clean").await;
    let faulty = output_ids(&direct, &prefix, "out-faulty").await;
    assert!(clean.1 > 0 && clean.2 > 0, "rows and duplicates: {clean:?}");
    assert_eq!(faulty, clean, "the output of a clean run");
}

#[tokio::test(flavor = "multi_thread")]
async fn submit_and_worker_refuse_a_store_that_ignores_if_none_match() {
    let Some(ep) = endpoint() else { return };
    let (_, bucket, direct) = test_s3().expect("endpoint set");
    let prefix = format!("s3faults-inm-{}", Entropy::from_os().hex_id(6));
    direct
        .put(
            &Path::from(format!("{prefix}/in/0.jsonl")),
            (docs(3, 20).join("\n") + "\n").into(),
        )
        .await
        .unwrap();
    let proxy = FaultProxy::start(&ep, 13);
    proxy.random("PUT", "", Kind::StripIfNoneMatch, 1.0);
    let d = tempfile::tempdir().unwrap();
    let spec = write_spec(d.path(), &job_spec(&bucket, &prefix, "out"));
    let jobs = format!("s3://{bucket}/{prefix}/jobs");
    let submit = |endpoint: &str| {
        let mut c = mdf();
        c.args(["submit", spec.to_str().unwrap(), "--job-root", &jobs]);
        aws_env(&mut c, endpoint);
        c.output().unwrap()
    };
    let want = format!("s3://{bucket} at {}", proxy.endpoint);
    let o = submit(&proxy.endpoint);
    let err = stderr(&o);
    assert!(!o.status.success(), "submit accepted the store");
    assert!(err.contains(&want), "names the store: {err}");
    assert!(
        err.contains("If-None-Match: *"),
        "names the requirement: {err}"
    );
    // Nothing of the job was written (the probe object is removed again).
    let left: Vec<_> = direct
        .list(Some(&Path::from(format!("{prefix}/jobs"))))
        .try_collect()
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");

    // A job submitted through a good endpoint: its workers on the bad one refuse too.
    let o = submit(&ep);
    assert!(o.status.success(), "{}", stderr(&o));
    let job = stdout(&o).lines().last().unwrap().to_string();
    let mut w = mdf();
    w.args(["worker", "--job", &job]);
    aws_env(&mut w, &proxy.endpoint);
    let o = w.output().unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "worker accepted the store");
    assert!(err.contains(&want), "names the store: {err}");
    assert!(
        err.contains("If-None-Match: *"),
        "names the requirement: {err}"
    );
    let leases = lease_records(&direct, &format!("{prefix}/jobs")).await;
    assert!(leases.is_empty(), "the worker claimed nothing: {leases:?}");
}
