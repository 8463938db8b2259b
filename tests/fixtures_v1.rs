//! Persisted formats are versioned: every record written by format version 1 (the
//! files in tests/fixtures/v1/, written by a real `mdf run` of the quickstart) must
//! keep decoding in every later version, and records from a newer format are refused
//! with a clear message. tests/fixtures/v2/ holds version-2 records that v1 has no
//! example of (a job with dedup phases; a commit record with token totals, whose
//! fields are optional, so records without them still read).
use mdf::protocol::io::decode;
use mdf::protocol::records::*;
use object_store::path::Path;

fn fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let bytes = std::fs::read(format!(
        "{}/tests/fixtures/v1/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    decode(&Path::from(name), &bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn v1_records_decode() {
    let job: JobManifest = fixture("job.json");
    assert_eq!(job.version, 1);
    assert_eq!(job.phases.len(), 1);
    assert_eq!(job.phases[0].name, "p00");
    assert!(job.phases[0].last);
    assert_eq!(job.phases[0].input_schema.field(0).name(), "id");
    // Written before owner markers and asset pins: neither is claimed.
    assert!(!job.owner_markers);
    assert!(job.asset_etags.is_empty());
    let owner: OwnerMarker = fixture("owner.json");
    assert_eq!(owner.role, "output");
    let spec =
        mdf::spec::Spec::from_value(job.spec.clone()).expect("a v1 job's spec still validates");
    assert_eq!(spec.name, "quickstart");
    // Its stages still build into operators, as a worker builds them.
    mdf::ops::build_stages(&spec).expect("a v1 job's stages still build");

    let task: TaskManifest = fixture("task.json");
    assert_eq!(task.phase, "p00");
    assert!(!task.inputs.is_empty());
    let fin: TaskManifest = fixture("task-finalize.json");
    assert_eq!(fin.phase, FINALIZE);
    assert_eq!(fin.task_id, job.finalize_task);

    let lease: LeaseRecord = fixture("lease.json");
    assert_eq!(
        (lease.seq, lease.kind, lease.epoch),
        (0, LeaseKind::Lease, 0)
    );

    let commit: CommitRecord = fixture("commit.json");
    assert_eq!(commit.status, TaskStatus::Committed);
    assert!(commit.requests.total() > 0);
    assert_eq!(
        commit.stats.records_in,
        commit.stats.records_out + commit.stats.rejected
    );
    let fc: CommitRecord = fixture("commit-finalize.json");
    assert_eq!(fc.phase, FINALIZE);

    let m: OutputManifest = fixture("output-manifest.json");
    assert_eq!(m.rows, m.files.iter().map(|f| f.rows).sum::<u64>());
    assert!(m.failed_tasks.is_empty());
    let w: WorkerStats = fixture("worker.json");
    assert!(w.requests.total() > 0);
    let s: Submission = fixture("submission.json");
    assert_eq!((s.backend.as_str(), s.workers), ("aws-batch", 4));
}

#[test]
fn records_from_a_newer_format_are_refused() {
    let mut v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(format!(
            "{}/tests/fixtures/v1/commit.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    v["version"] = 4.into();
    let e = decode::<CommitRecord>(&Path::from("c.json"), v.to_string().as_bytes()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "corrupt record at c.json: c.json: written by a newer mdf (format version 4, this build reads up to 3)"
    );
}

/// A version-2 job with an exact dedup (keep highest, cluster column, 2 partitions)
/// and a MinHash dedup (candidates, 3 label steps), as `mdf run` wrote it before the
/// protocol had its own dedup params type (tests/fixtures/v2/job-dedup.json): it
/// decodes, its dedup params read as written, and it encodes back to the same JSON,
/// so fingerprints and task ids derived from it cannot change.
#[test]
fn a_v2_dedup_job_reads_and_writes_back_the_same_json() {
    let bytes = std::fs::read(format!(
        "{}/tests/fixtures/v2/job-dedup.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let job: JobManifest = decode(&Path::from("job.json"), &bytes).unwrap();
    assert_eq!(job.version, 2);
    let kinds: Vec<(PhaseKind, u32)> = job
        .phases
        .iter()
        .map(|p| (p.kind, p.dedup.as_ref().map_or(0, |d| d.step)))
        .collect();
    use PhaseKind::*;
    assert_eq!(
        kinds,
        [
            (Map, 0),
            (Reduce, 0),
            (Apply, 0),
            (Reduce, 0),
            (Propagate, 1),
            (Propagate, 2),
            (Propagate, 3),
            (Apply, 0)
        ]
    );
    let exact = &job.phases[1].dedup.as_ref().unwrap().params;
    assert_eq!(exact.keep, DedupPhaseKeep::Highest("score".into()));
    assert_eq!((exact.partitions, exact.cluster_column), (Some(2), true));
    assert_eq!(exact.kind, DedupPhaseKind::Exact);
    let near = &job.phases[3].dedup.as_ref().unwrap().params;
    assert_eq!(
        near.kind,
        DedupPhaseKind::Minhash {
            bands: 4,
            rows: 2,
            threshold: 0.5
        }
    );
    assert_eq!(near.max_rounds, 2);
    let written: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(serde_json::to_value(&job).unwrap(), written);
    mdf::spec::Spec::from_value(job.spec.clone()).expect("its spec still validates");
}

/// A commit record of a job with `language_filter` and `tokenize` (a real `mdf run`
/// over two JSONL files, tests/fixtures/v2/commit-tokens.json): the stage's token
/// totals per language and per source, and the input files by key. Records written
/// before totals (the v1 commit) read as having none.
#[test]
fn a_commit_with_token_totals_reads_and_writes_back_the_same_json() {
    let bytes = std::fs::read(format!(
        "{}/tests/fixtures/v2/commit-tokens.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let c: CommitRecord = decode(&Path::from("commit.json"), &bytes).unwrap();
    let t = &c.stats.stages[1].totals["token_count"];
    assert_eq!((t.sum, t.records), (916, 12));
    assert_eq!(t.by["language"].values().sum::<u64>(), 916);
    let sources = &t.by[BY_SOURCE];
    assert_eq!(sources.len(), 2);
    for (key, n) in sources {
        assert!(c.stats.sources[key].ends_with(".jsonl"), "{key}");
        assert!(*n > 400);
    }
    let written: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(serde_json::to_value(&c).unwrap(), written);

    let old: CommitRecord = fixture("commit.json");
    assert!(old.stats.sources.is_empty());
    assert!(old.stats.stages.iter().all(|s| s.totals.is_empty()));
}
