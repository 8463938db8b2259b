//! Lease caps bound how many tasks of a phase run at once; `max_unconsumed_tasks`
//! stops an upstream phase from running ahead of its downstream phase.
mod common;
use common::*;
use std::path::Path;

/// (phase, task, started_ms, finished_ms) of every committed task.
fn intervals(jobs: &Path, job: &str) -> Vec<(String, String, u64, u64)> {
    let dir = jobs
        .join("jobs")
        .join(job.rsplit('/').next().unwrap())
        .join("commits");
    let mut out = Vec::new();
    for f in files_under(&dir) {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(&f)).unwrap()).unwrap();
        out.push((
            v["phase"].as_str().unwrap().to_string(),
            v["task_id"].as_str().unwrap().to_string(),
            v["started_ms"].as_u64().unwrap(),
            v["finished_ms"].as_u64().unwrap(),
        ));
    }
    out
}

#[test]
fn a_lease_cap_of_one_serialises_the_phase() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..6 {
        write_lines(&d.path().join(format!("in/{i}.jsonl")), &docs(i, 20));
    }
    let s = write_spec(
        d.path(),
        &format!(
            "input: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages: [{{op: throttle, params: {{records_per_sec: 200}}}}]\noutput: {{uri: \"{0}/out\"}}\njob: {{max_files_per_task: 1, lease_caps: {{p00: 1}}, poll_millis: 20, batch_rows: 5}}\n",
            d.path().display()
        ),
    );
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "4", "--job-root"])
            .arg(&jobs),
    );
    let mut iv: Vec<_> = intervals(&jobs, &job_uri(&o))
        .into_iter()
        .filter(|i| i.0 == "p00")
        .collect();
    assert_eq!(iv.len(), 6);
    iv.sort_by_key(|i| i.2);
    for w in iv.windows(2) {
        assert!(
            w[0].3 <= w[1].2,
            "tasks overlapped under a cap of 1: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
    assert!(
        files_under(&jobs)
            .iter()
            .any(|f| f.contains("/slots/p00/00000/")),
        "slot leases were used"
    );
}

#[test]
fn max_unconsumed_tasks_holds_cpu_workers_back_from_a_slow_gpu_phase() {
    let run = |cap: Option<u32>| {
        let d = tempfile::tempdir().unwrap();
        for i in 0..10 {
            write_lines(&d.path().join(format!("in/{i}.jsonl")), &docs(i, 10));
        }
        let cap = cap
            .map(|c| format!(", max_unconsumed_tasks: {c}"))
            .unwrap_or_default();
        let s = write_spec(
            d.path(),
            &format!(
                "input: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages:\n  - {{op: text_length, end_phase: true}}\n  - {{op: throttle, params: {{records_per_sec: 50}}, resources: {{gpu: 1}}}}\noutput: {{uri: \"{0}/out\"}}\njob: {{max_files_per_task: 1, poll_millis: 20, batch_rows: 5 {cap}}}\n",
                d.path().display()
            ),
        );
        let jobs = d.path().join("jobs");
        let o = run_ok(
            mdf()
                .args(["submit", s.to_str().unwrap(), "--job-root"])
                .arg(&jobs),
        );
        let job = stdout(&o).lines().last().unwrap().to_string();
        let spawn = |class: &str| {
            mdf()
                .args(["worker", "--job", &job, "--resources", class])
                .spawn()
                .unwrap()
        };
        let mut ws = vec![spawn("cpu"), spawn("cpu"), spawn("gpu")];
        for w in &mut ws {
            assert!(w.wait().unwrap().success());
        }
        assert_eq!(status_json(&job)["succeeded"], true);
        let iv = intervals(&jobs, &job);
        let p0: Vec<_> = iv.iter().filter(|i| i.0 == "p00").collect();
        let p1: Vec<_> = iv.iter().filter(|i| i.0 == "p01").collect();
        // The most p00 outputs waiting for p01 when a p00 task started.
        p0.iter()
            .map(|start| {
                let t = start.2;
                let done_p0 = p0.iter().filter(|x| x.3 <= t).count();
                let done_p1 = p1.iter().filter(|x| x.3 <= t).count();
                done_p0.saturating_sub(done_p1)
            })
            .max()
            .unwrap()
    };
    let free = run(None);
    let held = run(Some(1));
    assert!(
        free >= 5,
        "without a cap the CPU phase runs ahead ({free} waiting)"
    );
    assert!(
        held <= 3,
        "with max_unconsumed_tasks 1 and two CPU workers at most 3 wait, saw {held}"
    );
}
