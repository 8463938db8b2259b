//! An operator that panics (issue 22, item 6), injected with `MDF_FAULTS` rule
//! `panic:<stage>:<substring>`, a real panic inside the stage: in a stage that may be
//! split, the records it panics on are quarantined as `operator_panic` rejects and the
//! job completes; a panic that cannot be pinned on records fails the task with one
//! stable error after `job.max_attempts` attempts, instead of retrying forever.
mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;

/// (id, reason, operator, detail) of every published reject.
fn rejects(out: &Path) -> Vec<(String, String, String, String)> {
    let m = manifest(out);
    let mut v = Vec::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        let (ids, rs, ops, ds) = (
            strings(&b, "id"),
            strings(&b, "reason"),
            strings(&b, "operator"),
            strings(&b, "detail"),
        );
        for i in 0..ids.len() {
            v.push((ids[i].clone(), rs[i].clone(), ops[i].clone(), ds[i].clone()));
        }
    }
    v
}

fn spec(dir: &Path, stages: &str, job: &str) -> std::path::PathBuf {
    write_spec(
        dir,
        &format!(
            "name: panics\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\nstages:\n{stages}\noutput: {{uri: \"{d}/out\", overwrite: true}}\njob: {{poll_millis: 20, lease_ttl_secs: 4, heartbeat_secs: 1{job}}}\n",
            d = dir.display()
        ),
    )
}

#[test]
fn records_an_operator_panics_on_are_quarantined_and_the_rest_go_on() {
    let d = tempfile::tempdir().unwrap();
    let mut lines = docs(3, 60);
    // Two planted records the operator panics on, in different batches of 16.
    for at in [5, 40] {
        lines[at] = serde_json::json!({"url": format!("https://e.org/boom/{at}"), "text": "alpha KABOOM beta", "n": at})
            .to_string();
    }
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let s = spec(
        d.path(),
        "  - op: text_length\n    name: len\n  - op: length_filter\n    params: {min_words: 1}",
        ", batch_rows: 16",
    );
    let o = mdf()
        .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
        .arg(d.path().join("jobs"))
        .env("MDF_FAULTS", "panic:len:KABOOM")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = d.path().join("out");
    let rj = rejects(&out);
    let panicked: Vec<_> = rj.iter().filter(|r| r.1 == "operator_panic").collect();
    assert_eq!(panicked.len(), 2, "{rj:?}");
    for r in &panicked {
        assert_eq!(r.2, "len");
        assert_eq!(
            r.3, "injected panic in stage len: a record contains \"KABOOM\"",
            "{r:?}"
        );
    }
    // Every other record is in the output; none is both or neither.
    let kept: BTreeSet<String> = output_ids(&out).into_iter().collect();
    assert_eq!(kept.len(), 58);
    let quarantined: BTreeSet<String> = panicked.iter().map(|r| r.0.clone()).collect();
    assert!(kept.is_disjoint(&quarantined));
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true, "{st:#}");
}

#[test]
fn a_panic_in_a_stage_that_cannot_be_split_fails_the_task_after_max_attempts() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(4, 40));
    // The dedup stage sees whole tasks: its panic is never pinned on records.
    let s = spec(
        d.path(),
        "  - op: exact_key\n    name: content\n  - op: dedup\n    params: {key: content_key}",
        ", max_attempts: 2",
    );
    let o = mdf()
        .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
        .arg(d.path().join("jobs"))
        .env("MDF_FAULTS", "panic:dedup:a")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let st = status_json(&job_uri(&o));
    assert_eq!(st["complete"], true, "{st:#}");
    assert_eq!(st["succeeded"], false);
    let failed = st["failed_tasks"].as_array().unwrap();
    let map = failed.iter().find(|f| f["phase"] == "p00").expect("{st:#}");
    // One stable error, counted twice: no task id or address that differs per attempt.
    assert_eq!(
        map["error"],
        "failed 2 times: operator dedup panicked: injected panic in stage dedup: a record contains \"a\"",
        "{st:#}"
    );
}
